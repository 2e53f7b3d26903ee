package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/templates"
)

// fuzzCampaignFinalWithin bounds how long an accepted campaign of the fuzz
// tenant (a few users, batches of 2) may take to reach a final status.
const fuzzCampaignFinalWithin = 30 * time.Second

// campaignFuzzHarness is the fuzzers' Herald: a tenant with two users (one
// with every address), a topic, an uploaded list with data of its own, and
// templates that render data, fail on missing data, or are critical.
func campaignFuzzHarness(f *testing.F) (h *apitest.Harness, tenantID, key string) {
	h = apitest.Start(f, apitest.Options{CampaignPageSize: 2, CampaignWindow: 2, CampaignInDoubtWait: time.Second})
	tenantID, key = h.Tenant("fuzz-campaign")
	h.Template(key, apitest.SimpleTemplate("simple"))
	h.Template(key, templates.Template{ID: "strict", Category: "c",
		InApp: &templates.InAppContent{Title: "{{.title}}", Body: "x={{.x}}"},
		Email: &templates.EmailContent{Subject: "Hi {{.name}}", Text: "x={{.x}}", HTML: "<p>{{.name}}</p>"}})
	h.Template(key, templates.Template{ID: "otp", Category: "security", Critical: true,
		SMS: &templates.SMSContent{Text: "Code {{.code}}"}})
	for user, profile := range map[string]map[string]any{
		"ada": {"email": "ada@example.com", "phone": "+14155550100", "locale": "en-GB", "timezone": "Europe/London"},
		"bob": {"locale": "de"},
	} {
		h.MustDo(http.StatusCreated, http.MethodPut, "/v1/users/"+user, key, profile)
	}
	h.MustDo(http.StatusOK, http.MethodPost, "/v1/topics/news/subscribers", key, map[string]any{"user_ids": []string{"ada", "bob"}})
	return h, tenantID, key
}

// FuzzCampaign is the campaign path's invariant: for any POST /v1/campaigns
// body no 5xx (nor a panic, which the API answers 500), every answer matches
// api/openapi.yaml (the harness checks), and every campaign it accepts reaches
// a final status (completed, cancelled or failed) within
// fuzzCampaignFinalWithin; one scheduled for later is cancelled first (waiting
// for its time is not being stuck). Seeds: testdata/fuzz/FuzzCampaign; `make
// fuzz` fuzzes from them.
func FuzzCampaign(f *testing.F) {
	h, _, key := campaignFuzzHarness(f)
	list := h.MustDo(http.StatusCreated, http.MethodPost, "/v1/lists", key, "user_id,title,x\nada,Hello,1\nbob,Hallo,2\nghost,,\n",
		"Content-Type", "text/csv").Str("list_id")
	// The other seeds are in testdata/fuzz/FuzzCampaign; a list's id is made here.
	f.Add([]byte(`{"template_id":"strict","audience":{"list_id":"` + list + `"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		th := *h // the same harness, reporting to this input's test
		th.T = t
		r := th.Do(http.MethodPost, "/v1/campaigns", key, body)
		if r.Status >= 500 {
			t.Fatalf("POST /v1/campaigns answered %d: %s\nbody: %q", r.Status, r.Body, body)
		}
		t.Logf("answer %d %s", r.Status, r.Body)
		if r.Status != http.StatusAccepted && r.Status != http.StatusOK {
			return
		}
		id := r.Str("campaign_id")
		if id == "" {
			t.Fatalf("%d without a campaign_id: %s", r.Status, r.Body)
		}
		fuzzCampaignFinal(t, &th, key, id, body)
	})
}

// fuzzCampaignFinal cancels a campaign still scheduled, then waits for a final
// status.
func fuzzCampaignFinal(t *testing.T, h *apitest.Harness, key, id string, body []byte) {
	t.Helper()
	deadline := time.Now().Add(fuzzCampaignFinalWithin)
	cancelled := false
	for {
		r := h.Do(http.MethodGet, "/v1/campaigns/"+id, key, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("GET campaign %s answered %d: %s", id, r.Status, r.Body)
		}
		status := r.Str("status")
		if herald.CampaignFinal(status) {
			return
		}
		if status == herald.CampaignScheduled && !cancelled && r.JSON["send_at"] != nil {
			// 200 cancelled, or 409 when it finished meanwhile.
			c := h.Do(http.MethodPost, "/v1/campaigns/"+id+"/cancel", key, nil)
			if c.Status != http.StatusOK && c.Status != http.StatusConflict {
				t.Fatalf("cancel %s: %d %s", id, c.Status, c.Body)
			}
			cancelled = true
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("accepted campaign %s is not final after %s (stuck): %s\nrequest body: %q", id, fuzzCampaignFinalWithin, r.Body, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// FuzzListUpload is the list upload's invariant: for any body, as CSV or
// NDJSON (or another content type), POST /v1/lists answers without a 5xx or a
// panic, a refused upload stores nothing, an accepted list's summary counts
// no more members than lines, and a campaign to an accepted list with known
// users reaches a final status (its lines' data rendered for each).
func FuzzListUpload(f *testing.F) {
	h, tenantID, key := campaignFuzzHarness(f)
	// Seeds: testdata/fuzz/FuzzListUpload (kind 0 CSV, 1 NDJSON, 2 neither).
	f.Fuzz(func(t *testing.T, kind byte, body []byte) {
		th := *h
		th.T = t
		contentType := []string{"text/csv", "application/x-ndjson", "text/plain"}[int(kind)%3]
		before := fuzzListCount(t, h, tenantID)
		r := th.Do(http.MethodPost, "/v1/lists", key, body, "Content-Type", contentType)
		if r.Status >= 500 {
			t.Fatalf("POST /v1/lists (%s) answered %d: %s\nbody: %q", contentType, r.Status, r.Body, body)
		}
		t.Logf("answer %d %s", r.Status, r.Body)
		if r.Status != http.StatusCreated {
			if after := fuzzListCount(t, h, tenantID); after != before {
				t.Fatalf("a refused upload (%d) stored a list: %d lists, were %d", r.Status, after, before)
			}
			return
		}
		lines, members, unknown := r.JSON["lines"].(float64), r.JSON["members"].(float64), r.JSON["unknown_users"].(float64)
		if members > lines || unknown > members {
			t.Fatalf("summary: %s", r.Body)
		}
		if members == unknown {
			return
		}
		c := th.Do(http.MethodPost, "/v1/campaigns", key, map[string]any{"template_id": "simple", "channels": []string{"in_app", "email"},
			"audience": map[string]any{"list_id": r.Str("list_id")}})
		if c.Status != http.StatusAccepted {
			t.Fatalf("campaign to list %s: %d %s", r.Str("list_id"), c.Status, c.Body)
		}
		fuzzCampaignFinal(t, &th, key, c.Str("campaign_id"), body)
	})
}

// fuzzListCount is how many lists the tenant has stored (uploaded or inline).
func fuzzListCount(t *testing.T, h *apitest.Harness, tenantID string) int {
	t.Helper()
	var n int
	if err := h.Store.DB().QueryRow(context.Background(), `SELECT count(*) FROM recipient_lists WHERE tenant_id = $1`, tenantID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
