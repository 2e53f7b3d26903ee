// Command webhook-receiver serves a status webhook endpoint: it verifies each
// request's Standard Webhooks signature with the endpoint's secret and prints
// the event. Subscribe it with POST /v1/webhook-endpoints (the answer holds the
// secret once).
//
//	HERALD_WEBHOOK_SECRET=whsec_... go run ./docs/examples/webhook-receiver -addr 127.0.0.1:9000
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/herald-notify/herald/client"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9000", "where to listen")
	flag.Parse()
	v, err := client.NewWebhookVerifier(os.Getenv("HERALD_WEBHOOK_SECRET"))
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /hooks", v.Handler(func(_ *http.Request, ev *client.WebhookEvent) error {
		// ev.MessageID is the same on every retry of a message: dedup on it.
		if d, err := ev.Delivery(); err == nil {
			fmt.Printf("%s %s: %s %s %s\n", ev.MessageID, ev.Type, d.NotificationID, d.Channel, d.Status)
			return nil
		}
		if c, err := ev.Campaign(); err == nil {
			fmt.Printf("%s %s: campaign %s %s\n", ev.MessageID, ev.Type, c.CampaignID, c.Status)
		}
		return nil
	}))
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
