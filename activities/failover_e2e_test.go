package activities_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/providertest"
	"github.com/herald-notify/herald/providers/resolver"
	"github.com/herald-notify/herald/providers/smtp/smtptest"
)

// fastRetries makes the tenant's email and SMS retries quick, for tests.
func fastRetries(t *testing.T, h *apitest.Harness, tenantID string) {
	t.Helper()
	ctx := context.Background()
	ts, err := h.Store.GetTenantSettings(ctx, tenantID)
	if err != nil {
		t.Fatal(err)
	}
	fast := herald.RetryPolicy{InitialInterval: herald.Duration{Duration: 100 * time.Millisecond}, MaximumInterval: herald.Duration{Duration: 200 * time.Millisecond}, MaximumAttempts: 6}
	ts.RetryPolicies = map[herald.Channel]herald.RetryPolicy{"email": fast, "sms": fast}
	if err := h.Store.PutTenantSettings(ctx, tenantID, ts); err != nil {
		t.Fatal(err)
	}
}

// addSMTPFallback adds an SMTP relay as the tenant's second email provider.
func addSMTPFallback(t *testing.T, h *apitest.Harness, tenantID string) *smtptest.Server {
	t.Helper()
	relay, err := smtptest.New(smtptest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { relay.Close() })
	settings, _ := json.Marshal(map[string]any{"host": relay.Host, "port": relay.Port, "from": "shop@example.com", "tls": "none"})
	h.PutProviderConfig(providers.ProviderConfig{TenantID: tenantID, Channel: "email",
		Provider: "smtp", Priority: 10, Enabled: true, Settings: settings, Secret: []byte(`{}`)})
	return relay
}

func TestFailoverToTheSMTPRelayWhenSendGridIsDown(t *testing.T) {
	h, f, tenantID, key := setup(t)
	fastRetries(t, h, tenantID)
	relay := addSMTPFallback(t, h, tenantID)
	f.SendGrid.Always(providertest.Fail500())

	id := send(h, key, "email")
	st := h.AwaitChannel(key, id, "email", "sent", "", 30*time.Second)
	if st["provider"] != "smtp" {
		t.Fatalf("sent by %v, want the smtp fallback", st["provider"])
	}
	if f.SendGrid.Accepted() != 0 || relay.Accepted() != 1 {
		t.Fatalf("sendgrid accepted %d, relay accepted %d; want 0 and 1", f.SendGrid.Accepted(), relay.Accepted())
	}
	hist := st["history"].([]any)
	if len(hist) < 3 || hist[0].(map[string]any)["provider"] != "sendgrid" || hist[len(hist)-1].(map[string]any)["provider"] != "smtp" {
		t.Fatalf("history should show sendgrid failing, then smtp: %v", hist)
	}
	msgs := relay.Messages()
	if got := msgs[0].Header.Get("X-Herald-Notification-Id"); got != id {
		t.Fatalf("relay message names %q, want %q", got, id)
	}
}

// TestNoFallbackOnceTheProviderAccepted: SendGrid accepts the message but its answer
// never arrives (the worker's HTTP call times out). Its receipt arrives before the
// retry, so the retry sends nothing: neither SendGrid again nor the fallback.
func TestNoFallbackOnceTheProviderAccepted(t *testing.T) {
	h, f, tenantID, key := setupWith(t, func(p *resolver.Process) { p.HTTPClient = &http.Client{Timeout: time.Second} })
	fastRetries(t, h, tenantID)
	relay := addSMTPFallback(t, h, tenantID)
	hold := f.SendGrid.HoldNext(true)

	id := send(h, key, "email")
	select {
	case <-hold.Arrived():
	case <-time.After(20 * time.Second):
		t.Fatal("SendGrid was never called")
	}
	recordReceipt(t, h, f, tenantID, id) // the delivered event arrives before the retry
	st := h.AwaitChannel(key, id, "email", "delivered", "", 30*time.Second)
	hold.Release()
	time.Sleep(500 * time.Millisecond) // any (wrong) retry would have happened by now
	if hist := st["history"].([]any); len(hist) != 1 || hist[0].(map[string]any)["outcome"] != "retryable" {
		t.Fatalf("want one timed-out attempt in the history, got %v", hist)
	}
	if f.SendGrid.Accepted() != 1 || f.SendGrid.Calls() != 1 || relay.Accepted() != 0 {
		t.Fatalf("sendgrid calls %d accepted %d, relay %d: want exactly one send in all", f.SendGrid.Calls(), f.SendGrid.Accepted(), relay.Accepted())
	}
}

// TestProviderRateLimitAcrossWorkers runs three worker sets against one Twilio
// account limited to 10 messages/s and measures the fake's accept rate.
func TestProviderRateLimitAcrossWorkers(t *testing.T) {
	h, f, tenantID, key := setup(t)
	h.StartWorkers(2) // three worker sets in all, sharing the task queues
	cfg, err := h.Providers.GetProviderConfig(context.Background(), tenantID, "sms", "twilio")
	if err != nil {
		t.Fatal(err)
	}
	const rate = 10.0
	cfg.RatePerSecond = rate
	h.PutProviderConfig(cfg)
	const n = 31
	for i := 0; i < n; i++ {
		h.Accept(key, map[string]any{"user_id": "ada", "template_id": "order_shipped",
			"channels": []string{"sms"}, "data": map[string]any{"body": fmt.Sprintf("rate %d", i)}})
	}
	if !f.Twilio.WaitCalls(n, 30*time.Second) {
		t.Fatalf("only %d of %d SMS sent", f.Twilio.Calls(), n)
	}
	var at []time.Time
	for _, r := range f.Twilio.AcceptedRequests() {
		at = append(at, r.At)
	}
	sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
	measured := float64(len(at)-1) / at[len(at)-1].Sub(at[0]).Seconds()
	t.Logf("provider rate limit %.0f/s: measured %.2f/s over %d sends by 3 workers", rate, measured, len(at))
	// The limit: never more than 10 % over it, overall or in any run of 10 sends.
	if measured > rate*1.1 {
		t.Fatalf("measured %.2f/s, more than 10%% over the limit of %.0f/s", measured, rate)
	}
	for i := 0; i+9 < len(at); i++ {
		if w := at[i+9].Sub(at[i]).Seconds(); 9/w > rate*1.1 {
			t.Fatalf("sends %d..%d ran at %.2f/s, more than 10%% over the limit", i, i+9, 9/w)
		}
	}
	// Below the limit means the workers could not keep up (a loaded CI machine);
	// far below means the limiter throttles too hard.
	if measured < rate*0.5 {
		t.Fatalf("measured %.2f/s: the limiter throttles far below %.0f/s", measured, rate)
	}
}
