package activities

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/templates"
)

// TestCampaignRenderCacheBoundedInBytes: a batch of 500 recipients, each with
// 20 KB of data of their own rendered into their email and in-app message,
// keeps at most campaignCacheBytes of renders and merged data (about 40 MB
// before, when the cache was bounded at 10,000 entries: every recipient's
// render of every channel for the whole batch), while recipients without data
// of their own still share one render per channel.
func TestCampaignRenderCacheBoundedInBytes(t *testing.T) {
	tmpl := templates.Template{ID: "big", Category: "c",
		InApp: &templates.InAppContent{Title: "Hi {{.name}}", Body: "{{.note}}"},
		Email: &templates.EmailContent{Subject: "Hi {{.name}}", Text: "{{.note}}", HTML: "<p>{{.note}}</p>"}}
	b := &campaignBatch{tmpl: tmpl, ts: store.TenantSettings{DefaultLocale: "en"}, data: templates.Data{"name": "friend", "note": "shared"},
		renders: map[string]renderOutcome{}, ownKeys: map[string]bool{}, merged: map[string]mergedData{}}
	var produced int
	for i := range 500 {
		raw, err := json.Marshal(map[string]string{"name": fmt.Sprint("user", i), "note": strings.Repeat(fmt.Sprint(i%10), 20_000)})
		if err != nil {
			t.Fatal(err)
		}
		w := recipientWork{member: store.AudienceMember{UserID: fmt.Sprint("u", i), Data: raw}, id: fmt.Sprint("n", i)}
		for _, ch := range []herald.Channel{herald.ChannelInApp, herald.ChannelEmail} {
			out, ok := b.render(w, ch)
			if !ok {
				t.Fatalf("render %s of %d failed", ch, i)
			}
			if got := renderedBytes(out.r); got < 20_000 || !strings.Contains(out.r.Locale, "en") {
				t.Fatalf("render %s of %d: %d bytes", ch, i, got)
			}
			produced += len(raw) + renderedBytes(out.r)
		}
	}
	if b.cacheBytes > campaignCacheBytes {
		t.Fatalf("the batch's cache holds %d bytes, over its budget of %d", b.cacheBytes, campaignCacheBytes)
	}
	if b.cacheBytes < campaignCacheBytes/2 {
		t.Fatalf("the batch's cache holds %d bytes: the budget of %d is not used", b.cacheBytes, campaignCacheBytes)
	}
	var held int
	for k, r := range b.renders {
		held += len(k) + renderedBytes(r.r)
	}
	for k := range b.merged {
		held += 2 * len(k)
	}
	if held > campaignCacheBytes {
		t.Fatalf("the cache's entries hold %d bytes, over the budget of %d (counted %d)", held, campaignCacheBytes, b.cacheBytes)
	}
	t.Logf("renders made of 500 recipients' own data: %d bytes; kept: %d (budget %d)", produced, held, campaignCacheBytes)

	// Recipients without data of their own share one render per channel.
	before := len(b.renders)
	for i := range 50 {
		w := recipientWork{member: store.AudienceMember{UserID: fmt.Sprint("plain", i)}, id: fmt.Sprint("p", i)}
		if out, ok := b.render(w, herald.ChannelEmail); !ok || out.r.Email.Text != "shared" {
			t.Fatalf("shared render: %+v", out.r.Email)
		}
	}
	if len(b.renders) != before+1 {
		t.Fatalf("50 recipients without data of their own added %d renders, want 1", len(b.renders)-before)
	}
}
