// Command inbox-stream prints a user's inbox events as they happen; the client
// reconnects by itself and resumes after the last event. It stops after -n
// events (0: never) or on Ctrl-C.
//
//	HERALD_URL=http://127.0.0.1:8080 HERALD_KEY=hk_... go run ./docs/examples/inbox-stream -user ada
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"

	"github.com/herald-notify/herald/client"
)

func main() {
	user := flag.String("user", "ada", "the user whose inbox to follow")
	n := flag.Int("n", 0, "stop after this many item events (0: never)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	// A tenant key reads any user's stream; a user token (MintUserToken) only theirs.
	hc, err := client.New(os.Getenv("HERALD_URL"), os.Getenv("HERALD_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	stream, err := hc.StreamInbox(ctx, *user, nil)
	if err != nil {
		log.Fatal(err)
	}
	seen := 0
	for ev := range stream.Events {
		switch {
		case ev.Marker != nil: // ready, or refetch: reload the list (ListInbox), then go on
			fmt.Printf("%s: %d unread\n", ev.Type, ev.Marker.Counts.Unread)
		case ev.Change != nil && ev.Change.Item != nil:
			fmt.Printf("%s: %q (%d unread)\n", ev.Type, ev.Change.Item.Title, ev.Change.Counts.Unread)
			seen++
		default:
			fmt.Printf("%s (%d unread)\n", ev.Type, ev.Change.Counts.Unread)
		}
		if *n > 0 && seen >= *n {
			return
		}
	}
	if err := stream.Err(); err != nil && ctx.Err() == nil {
		log.Fatal(err)
	}
}
