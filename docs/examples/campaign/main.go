// Command campaign uploads a recipient list from a CSV file, starts a campaign
// to it, follows it to the end and lists the tenant's campaigns page by page.
//
//	HERALD_URL=http://127.0.0.1:8080 HERALD_KEY=hk_... go run ./docs/examples/campaign audience.csv
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/herald-notify/herald/client"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	hc, err := client.New(os.Getenv("HERALD_URL"), os.Getenv("HERALD_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	if len(os.Args) != 2 {
		log.Fatal("usage: campaign FILE.csv (a user_id column, then data columns)")
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	// The file streams as it is read; an *os.File is rewound if Herald asks to retry.
	list, err := hc.UploadList(ctx, client.CSV, f, &client.UploadListParams{Name: client.Ptr("spring")})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("list %s: %d members, %d unknown\n", list.ListID, list.Members, list.UnknownUsers)

	acc, err := hc.CreateCampaign(ctx, client.CreateCampaignRequest{TemplateID: "welcome",
		Audience: client.CreateCampaignRequest_Audience{ListID: &list.ListID}, Channels: []client.ChannelName{"in_app"}})
	if err != nil {
		log.Fatal(err)
	}
	for {
		cp, err := hc.GetCampaign(ctx, acc.CampaignID)
		if err != nil {
			log.Fatal(err)
		}
		if cp.Status != client.CampaignStatusScheduled && cp.Status != client.CampaignStatusRunning {
			fmt.Printf("campaign %s: %s, %d recipients, %d delivered in the inbox\n",
				cp.CampaignID, cp.Status, cp.RecipientsProcessed, cp.Counts["in_app"].Delivered)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Every campaign, following the pages' cursors.
	n := 0
	for cp, err := range hc.AllCampaigns(ctx, &client.ListCampaignsParams{Limit: client.Ptr(50)}) {
		if err != nil {
			log.Fatal(err)
		}
		n++
		_ = cp
	}
	fmt.Printf("%d campaigns in all\n", n)
}
