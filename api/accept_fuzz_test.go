package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/templates"
)

// fuzzFinalWithin bounds how long an accepted notification may take to reach a
// final status. Delivery through the sandbox and the inbox takes well under a
// second; anything stuck (an undecodable workflow input, an inbox insert retried
// for a day, a run Temporal terminated, a send Temporal refuses to schedule)
// never gets there.
const fuzzFinalWithin = 20 * time.Second

// FuzzAccept is the accept path's invariant: for any request body, POST
// /v1/notifications answers without a 5xx (and without a panic, which the API
// turns into a 500), every answer matches api/openapi.yaml (the harness checks),
// and every notification it accepts reaches a final status (delivered, sent,
// failed, partially_failed, suppressed or cancelled) within fuzzFinalWithin:
// nothing accepted is lost or stuck. A scheduled notification (send_at ahead) is
// cancelled first, since waiting for its time is not being stuck.
//
// One harness (API, worker, tenant) per fuzz process. The tenant has an invalid
// retry override stored around the API's check (as one stored before it would
// be), so every email, SMS and push send also exercises the workflow's fallback
// to the default policy. The seeds, in testdata/fuzz/FuzzAccept, include every
// input of the "accepted, then stuck" issue; plain `go test` runs them as tests,
// `make fuzz` fuzzes from them.
func FuzzAccept(f *testing.F) {
	h := apitest.Start(f, apitest.Options{})
	tenantID, key := h.Tenant("fuzz")
	h.Template(key, apitest.SimpleTemplate("simple"))
	h.Template(key, templates.Template{ID: "num", Category: "c",
		InApp: &templates.InAppContent{Title: "n", Body: "x={{.x}}"},
		Email: &templates.EmailContent{Subject: "x={{.x}}", Text: "x={{.x}}"}})
	h.Template(key, templates.Template{ID: "big", Category: "c",
		InApp: &templates.InAppContent{Title: bigRange, Body: bigRange},
		Email: &templates.EmailContent{Subject: "big", Text: bigRange}})
	h.Template(key, templates.Template{ID: "order", Category: "shipping",
		InApp: &templates.InAppContent{Title: "Order {{.order.id}}", Body: "Hi {{.name}}, {{range .order.items}}{{.sku}} {{end}}"},
		SMS:   &templates.SMSContent{Text: "Order {{.order.id}} for {{.name}}"},
		Push:  &templates.PushContent{Title: "Order {{.order.id}}", Body: "{{.name}}"}})
	h.Template(key, templates.Template{ID: "otp", Category: "security", Critical: true,
		SMS:   &templates.SMSContent{Text: "Code {{.code}}"},
		InApp: &templates.InAppContent{Body: "Code {{.code}}"}})
	for user, profile := range map[string]map[string]any{
		"ada": {"email": "ada@example.com", "phone": "+14155550100", "locale": "en-GB", "timezone": "Europe/London"},
		"bob": {"locale": "de"},
	} {
		if r := h.Do(http.MethodPut, "/v1/users/"+user, key, profile); r.Status != http.StatusCreated {
			f.Fatalf("PUT user %s: %d %s", user, r.Status, r.Body)
		}
	}
	// Flows, for events (flow_id): a send and a branch, a throttle, a digest.
	for id, def := range map[string]string{
		"f_send": `{"category":"c","steps":[{"type":"send","id":"s","template_id":"order","channels":["in_app"]},
			{"type":"branch","cases":[{"if":{"field":"data.order.id","op":"exists"},"steps":[{"type":"send","template_id":"simple","channels":["sms"]}]}],
			"else":[{"type":"delay","duration":"1s"}]}]}`,
		"f_throttle": `{"category":"c","steps":[{"type":"throttle","limit":1,"window":"1h","key":"{{.order.id}}"},{"type":"send","template_id":"simple","channels":["in_app"]}]}`,
		"f_digest":   `{"category":"c","steps":[{"type":"digest","window":"1s","key":"{{.name}}"},{"type":"send","template_id":"simple","channels":["in_app"]}]}`,
	} {
		if r := h.Do(http.MethodPut, "/v1/flows/"+id, key, def); r.Status != http.StatusCreated {
			f.Fatalf("PUT flow %s: %d %s", id, r.Status, r.Body)
		}
	}
	if err := h.Store.UpdateTenantSettings(context.Background(), tenantID, func(ts *store.TenantSettings) {
		ts.RetryPolicies = map[herald.Channel]herald.RetryPolicy{
			herald.ChannelEmail: {InitialInterval: herald.Duration{Duration: 10 * time.Minute}}, // over the default maximum of 5m
			herald.ChannelSMS:   {MaximumInterval: herald.Duration{Duration: 100 * time.Millisecond}},
		}
	}); err != nil {
		f.Fatal(err)
	}

	f.Fuzz(func(t *testing.T, body []byte) {
		th := *h // the same harness, reporting to this input's test
		th.T = t
		r := th.Do(http.MethodPost, "/v1/notifications", key, body)
		if r.Status >= 500 {
			t.Fatalf("POST /v1/notifications answered %d: %s\nbody: %q", r.Status, r.Body, body)
		}
		t.Logf("answer %d %s", r.Status, r.Body)
		if r.Status != http.StatusAccepted && r.Status != http.StatusOK {
			return
		}
		id := r.Str("notification_id")
		if id == "" {
			t.Fatalf("%d without a notification_id: %s", r.Status, r.Body)
		}
		fuzzWaitFinal(t, &th, key, id, body)
	})
}

// fuzzWaitFinal cancels a scheduled notification, then waits for a final status.
func fuzzWaitFinal(t *testing.T, h *apitest.Harness, key, id string, body []byte) {
	t.Helper()
	deadline := time.Now().Add(fuzzFinalWithin)
	cancelled := false
	var last apitest.Response
	for {
		last = h.Do(http.MethodGet, "/v1/notifications/"+id, key, nil)
		if last.Status >= 500 {
			t.Fatalf("GET %s answered %d: %s", id, last.Status, last.Body)
		}
		status := statusOf(last)
		if last.Status == http.StatusOK && finalStatus(status) {
			return
		}
		if status == herald.NotificationScheduled && !cancelled {
			// 200 cancelled, or 409 when a channel started sending meanwhile.
			c := h.Do(http.MethodDelete, "/v1/notifications/"+id, key, nil)
			if c.Status != http.StatusOK && c.Status != http.StatusConflict {
				t.Fatalf("cancel %s: %d %s", id, c.Status, c.Body)
			}
			cancelled = true
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("accepted notification %s is not final after %s (stuck): %s\nrequest body: %q", id, fuzzFinalWithin, last.Body, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
