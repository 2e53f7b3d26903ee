package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"

	"github.com/herald-notify/herald/client"
)

// These examples compile with the package; docs/examples/ holds whole programs
// that TestDocExamplesRun runs against a real Herald.

func ExampleClient_CreateNotification() {
	hc, err := client.New("http://127.0.0.1:8080", os.Getenv("HERALD_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	sent, err := hc.CreateNotification(context.Background(), client.CreateNotificationRequest{
		UserID: "ada", TemplateID: "welcome",
		Data:           &client.TemplateData{"name": "Ada"},
		IdempotencyKey: client.Ptr("order-1234-shipped"), // the same key again is the same notification
	})
	var herr *client.Error
	switch {
	case errors.As(err, &herr) && herr.Code == "unknown_user":
		fmt.Println("create the user first:", herr.Field)
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Println(sent.NotificationID, sent.Status, sent.Duplicate)
	}
}

func ExampleClient_AllCampaigns() {
	hc, _ := client.New("http://127.0.0.1:8080", os.Getenv("HERALD_KEY"))
	for c, err := range hc.AllCampaigns(context.Background(), &client.ListCampaignsParams{Limit: client.Ptr(100)}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(c.CampaignID, c.Status, c.RecipientsProcessed)
	}
}

func ExampleClient_StreamInbox() {
	hc, _ := client.New("http://127.0.0.1:8080", os.Getenv("HERALD_KEY"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := hc.StreamInbox(ctx, "ada", nil)
	if err != nil {
		log.Fatal(err)
	}
	for ev := range stream.Events { // reconnects by itself, resuming after the last event
		if ev.Change != nil {
			fmt.Println(ev.Type, ev.Change.Counts.Unread)
		}
	}
	log.Println("stream ended:", stream.Err())
}

func ExampleWebhookVerifier_Handler() {
	v, err := client.NewWebhookVerifier(os.Getenv("HERALD_WEBHOOK_SECRET")) // whsec_...
	if err != nil {
		log.Fatal(err)
	}
	http.Handle("POST /hooks", v.Handler(func(_ *http.Request, ev *client.WebhookEvent) error {
		if d, err := ev.Delivery(); err == nil {
			fmt.Println(ev.MessageID, ev.Type, d.NotificationID, d.Channel, d.Status)
		}
		return nil
	}))
}
