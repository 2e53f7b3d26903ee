// Command send creates a user, sends them a notification, sends it again as a
// retry would (a duplicate, not a second message) and waits for its status.
//
//	HERALD_URL=http://127.0.0.1:8080 HERALD_KEY=hk_... go run ./docs/examples/send
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/herald-notify/herald/client"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hc, err := client.New(os.Getenv("HERALD_URL"), os.Getenv("HERALD_KEY"))
	if err != nil {
		log.Fatal(err)
	}

	if _, err := hc.PutUser(ctx, "ada", client.PutUserRequest{Email: client.Ptr("ada@example.com"), Locale: client.Ptr("en-GB")}); err != nil {
		log.Fatal(err)
	}
	// Your own key (an order id, a signup id) makes the send safe to repeat.
	req := client.CreateNotificationRequest{UserID: "ada", TemplateID: "welcome",
		Data: &client.TemplateData{"name": "Ada"}, IdempotencyKey: client.Ptr("welcome-ada")}
	first, err := hc.CreateNotification(ctx, req)
	if err != nil {
		log.Fatal(err)
	}
	again, err := hc.CreateNotification(ctx, req)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("sent %s (duplicate: %v); again: %s (duplicate: %v)\n", first.NotificationID, first.Duplicate, again.NotificationID, again.Duplicate)

	// Errors are *client.Error, with Herald's code and the field at fault.
	_, err = hc.CreateNotification(ctx, client.CreateNotificationRequest{UserID: "nobody", TemplateID: "welcome"})
	var herr *client.Error
	if errors.As(err, &herr) {
		fmt.Printf("refused: %d %s (field %s)\n", herr.Status, herr.Code, herr.Field)
	}

	for {
		n, err := hc.GetNotification(ctx, first.NotificationID)
		if err != nil {
			log.Fatal(err)
		}
		if n.Status != client.NotificationStatusQueued && n.Status != client.NotificationStatusSending {
			for _, ch := range n.Channels {
				fmt.Printf("  %s: %s\n", ch.Channel, ch.Status)
			}
			fmt.Printf("status: %s\n", n.Status)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}
