package activities_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/providertest"
	"github.com/herald-notify/herald/providers/resolver"
)

// fakes are the three providers, speaking their wire protocols on loopback.
type fakes struct {
	sendgrid *providertest.SendGridFake
	twilio   *providertest.TwilioFake
	fcm      *providertest.FCMFake
}

func startFakes(t *testing.T) fakes {
	f := fakes{sendgrid: providertest.NewSendGrid(), twilio: providertest.NewTwilio(), fcm: providertest.NewFCM()}
	t.Cleanup(func() { f.sendgrid.Close(); f.twilio.Close(); f.fcm.Close() })
	return f
}

func (f fakes) process() resolver.Process {
	return resolver.Process{SendGridBaseURL: f.sendgrid.URL, TwilioBaseURL: f.twilio.URL, FCMBaseURL: f.fcm.URL, FCMTokenURL: f.fcm.TokenURL(),
		PublicBaseURL: "https://herald.example.test", HTTPClient: &http.Client{Timeout: 10 * time.Second}}
}

// configure stores real-provider credentials for every channel of the tenant.
func configure(t *testing.T, h *apitest.Harness, f fakes, tenantID string) {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(h.Providers.PutProviderConfig(ctx, providers.ProviderConfig{TenantID: tenantID, Channel: "email", Provider: "sendgrid", Enabled: true,
		Settings: json.RawMessage(`{"from":"shop@example.com","from_name":"Shop"}`), Secret: []byte(`{"api_key":"SG.test-key"}`)}))
	must(h.Providers.PutProviderConfig(ctx, providers.ProviderConfig{TenantID: tenantID, Channel: "sms", Provider: "twilio", Enabled: true,
		Settings: json.RawMessage(`{"account_sid":"AC0123456789abcdef0123456789abcdef","from":"+14155550000"}`), Secret: []byte(`{"auth_token":"twilioauthtoken0123456789abcdef"}`)}))
	must(h.Providers.PutProviderConfig(ctx, providers.ProviderConfig{TenantID: tenantID, Channel: "push", Provider: "fcm", Enabled: true,
		Settings: json.RawMessage(`{"project_id":"herald-test"}`), Secret: serviceAccount(t, f.fcm.URL+providertest.TokenPath)}))
}

func serviceAccount(t *testing.T, tokenURI string) []byte {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]string{"type": "service_account", "project_id": "herald-test", "private_key_id": "k1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "herald@herald-test.iam.gserviceaccount.com", "client_id": "1", "token_uri": tokenURI})
	return b
}

func setup(t *testing.T) (*apitest.Harness, fakes, string, string) {
	t.Helper()
	return setupWith(t, func(*resolver.Process) {})
}

// setupWith is setup with the provider process settings adjusted.
func setupWith(t *testing.T, adjust func(*resolver.Process)) (*apitest.Harness, fakes, string, string) {
	t.Helper()
	f := startFakes(t)
	proc := f.process()
	adjust(&proc)
	h := apitest.Start(t, apitest.Options{Process: proc})
	tenantID, key := h.Tenant("shop")
	h.Template(key, apitest.SimpleTemplate("order_shipped"))
	configure(t, h, f, tenantID)
	r := h.Do(http.MethodPut, "/v1/users/ada", key, map[string]any{"email": "ada@example.com", "phone": "+14155550100"})
	if r.Status != http.StatusCreated {
		t.Fatalf("create user: %d %s", r.Status, r.Body)
	}
	if _, err := h.Providers.PutPushToken(context.Background(), providers.PushToken{TenantID: tenantID, UserID: "ada", Token: "device-token-1", Platform: "android"}); err != nil {
		t.Fatal(err)
	}
	return h, f, tenantID, key
}

var sent int

func send(t *testing.T, h *apitest.Harness, key string, channels ...string) string {
	t.Helper()
	sent++ // distinct content, so content-based dedup never merges two test sends
	r := h.Do(http.MethodPost, "/v1/notifications", key, map[string]any{"user_id": "ada", "template_id": "order_shipped",
		"channels": channels, "data": map[string]any{"title": "Shipped", "body": "Order 42 <b>is</b> on its way", "n": sent}})
	if r.Status != http.StatusAccepted {
		t.Fatalf("submit: %d %s", r.Status, r.Body)
	}
	return r.Str("notification_id")
}

// channelStates returns channel → its JSON object from the status API.
func channelStates(t *testing.T, h *apitest.Harness, key, id string) (string, map[string]map[string]any) {
	t.Helper()
	r := h.Do(http.MethodGet, "/v1/notifications/"+id, key, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("status: %d %s", r.Status, r.Body)
	}
	out := map[string]map[string]any{}
	for _, c := range r.JSON["channels"].([]any) {
		m := c.(map[string]any)
		out[m["channel"].(string)] = m
	}
	return r.Str("status"), out
}

func waitChannel(t *testing.T, h *apitest.Harness, key, id, channel, status string, within time.Duration) map[string]any {
	t.Helper()
	var got map[string]any
	deadline := time.Now().Add(within)
	for {
		_, chans := channelStates(t, h, key, id)
		if got = chans[channel]; got != nil && got["status"] == status {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s to be %s; last state %v", within, channel, status, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func waitOverall(t *testing.T, h *apitest.Harness, key, id, status string, within time.Duration) {
	t.Helper()
	h.Eventually(within, "overall status "+status, func() bool {
		overall, _ := channelStates(t, h, key, id)
		return overall == status
	})
}

func TestEveryChannelGoesThroughItsRealSDK(t *testing.T) {
	h, f, tenantID, key := setup(t)
	id := send(t, h, key, "email", "sms", "push", "in_app")
	for _, ch := range []string{"email", "sms", "push"} {
		st := waitChannel(t, h, key, id, ch, "sent", 20*time.Second)
		if st["provider_message_id"] == nil || st["provider_message_id"] == "" {
			t.Errorf("%s: no provider message id: %v", ch, st)
		}
	}
	waitChannel(t, h, key, id, "in_app", "delivered", 5*time.Second)
	waitOverall(t, h, key, id, "sent", 10*time.Second)
	if f.sendgrid.Accepted() != 1 || f.twilio.Accepted() != 1 || f.fcm.Accepted() != 1 {
		t.Fatalf("accepted calls: sendgrid %d twilio %d fcm %d, want 1 each", f.sendgrid.Accepted(), f.twilio.Accepted(), f.fcm.Accepted())
	}
	mail, err := providertest.DecodeMail(f.sendgrid.AcceptedRequests()[0])
	if err != nil {
		t.Fatal(err)
	}
	tags := mail.Personalizations[0].CustomArgs
	if tags["notification_id"] != id || tags["channel"] != "email" || tags["tenant"] != tenantID || mail.Personalizations[0].To[0].Email != "ada@example.com" {
		t.Errorf("SendGrid personalization: %+v", mail.Personalizations[0])
	}
	var html string
	for _, c := range mail.Content {
		if c.Type == "text/html" {
			html = c.Value
		}
	}
	if !strings.Contains(html, "&lt;b&gt;is&lt;/b&gt;") || strings.Contains(html, "<b>") {
		t.Errorf("user data reached the email HTML unescaped: %q", html)
	}
	sms := f.twilio.AcceptedRequests()[0].Form
	cb := sms.Get("StatusCallback")
	if sms.Get("To") != "+14155550100" || !strings.HasPrefix(cb, "https://herald.example.test/v1/webhooks/twilio?") || !strings.Contains(cb, id) {
		t.Errorf("Twilio request: To=%q StatusCallback=%q", sms.Get("To"), cb)
	}
	if push := string(f.fcm.AcceptedRequests()[0].Body); !strings.Contains(push, "device-token-1") || !strings.Contains(push, id) {
		t.Errorf("FCM request: %s", push)
	}
}

func TestA500IsRetriedAndAcceptedOnce(t *testing.T) {
	h, f, _, key := setup(t)
	f.sendgrid.Next(providertest.Fail500())
	id := send(t, h, key, "email")
	st := waitChannel(t, h, key, id, "email", "sent", 20*time.Second)
	if f.sendgrid.Calls() != 2 || f.sendgrid.Accepted() != 1 {
		t.Fatalf("calls %d accepted %d, want 2 calls and exactly 1 accepted", f.sendgrid.Calls(), f.sendgrid.Accepted())
	}
	if st["attempts"].(float64) != 2 {
		t.Fatalf("attempts = %v, want 2", st["attempts"])
	}
}

func TestA429WaitsForRetryAfter(t *testing.T) {
	h, f, _, key := setup(t)
	f.twilio.Next(providertest.Fail429("3"))
	id := send(t, h, key, "sms")
	waitChannel(t, h, key, id, "sms", "sent", 20*time.Second)
	reqs := f.twilio.Requests()
	if len(reqs) != 2 || f.twilio.Accepted() != 1 {
		t.Fatalf("requests %d accepted %d, want 2 and 1", len(reqs), f.twilio.Accepted())
	}
	if gap := reqs[1].At.Sub(reqs[0].At); gap < 3*time.Second {
		t.Fatalf("retried after %s, before the provider's Retry-After of 3s", gap)
	}
}

func TestPermanentFailureIsNotRetried(t *testing.T) {
	h, f, _, key := setup(t)
	f.twilio.Next(f.twilio.InvalidTo())
	id := send(t, h, key, "sms")
	st := waitChannel(t, h, key, id, "sms", "failed", 20*time.Second)
	if f.twilio.Calls() != 1 {
		t.Fatalf("a permanent failure was retried: %d calls", f.twilio.Calls())
	}
	if msg, _ := st["last_error"].(string); !strings.Contains(msg, "21211") {
		t.Fatalf("failed without the provider's reason: %v", st)
	}
	waitOverall(t, h, key, id, "failed", 10*time.Second)
}

func TestDeadPushTokenIsRemoved(t *testing.T) {
	h, f, tenantID, key := setup(t)
	f.fcm.Next(f.fcm.Unregistered())
	id := send(t, h, key, "push")
	waitChannel(t, h, key, id, "push", "failed", 20*time.Second)
	tokens, err := h.Providers.PushTokens(context.Background(), tenantID, "ada")
	if err != nil || len(tokens) != 0 {
		t.Fatalf("dead token kept: %v %v", tokens, err)
	}
	// With no device left the next push is suppressed for want of an address.
	id2 := send(t, h, key, "push", "in_app")
	st := waitChannel(t, h, key, id2, "push", "suppressed", 20*time.Second)
	if st["reason"] != "no_address" {
		t.Fatalf("reason = %v, want no_address", st["reason"])
	}
}

func TestEmailOutageDoesNotDelayOtherChannels(t *testing.T) {
	h, f, _, key := setup(t)
	f.sendgrid.Always(providertest.Fail500())
	id := send(t, h, key, "email", "sms", "push", "in_app")
	start := time.Now()
	waitChannel(t, h, key, id, "sms", "sent", 10*time.Second)
	waitChannel(t, h, key, id, "push", "sent", 10*time.Second)
	waitChannel(t, h, key, id, "in_app", "delivered", 10*time.Second)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("other channels took %s during the email outage", took)
	}
	_, chans := channelStates(t, h, key, id)
	if chans["email"]["status"] != "sending" || chans["email"]["attempts"].(float64) < 1 {
		t.Fatalf("email during the outage: %v", chans["email"])
	}
	f.sendgrid.Recover()
	waitChannel(t, h, key, id, "email", "sent", 30*time.Second)
	if f.sendgrid.Accepted() != 1 {
		t.Fatalf("accepted %d emails, want 1", f.sendgrid.Accepted())
	}
}

func TestNoAddressIsSuppressedNotFailed(t *testing.T) {
	f := startFakes(t)
	h := apitest.Start(t, apitest.Options{Process: f.process()})
	tenantID, key := h.Tenant("shop")
	h.Template(key, apitest.SimpleTemplate("order_shipped"))
	configure(t, h, f, tenantID)
	h.Do(http.MethodPut, "/v1/users/ada", key, map[string]any{"locale": "en"})
	id := send(t, h, key, "email", "sms", "in_app")
	for _, ch := range []string{"email", "sms"} {
		if st := waitChannel(t, h, key, id, ch, "suppressed", 10*time.Second); st["reason"] != "no_address" {
			t.Errorf("%s reason = %v", ch, st["reason"])
		}
	}
	waitChannel(t, h, key, id, "in_app", "delivered", 10*time.Second)
	if f.sendgrid.Calls()+f.twilio.Calls() != 0 {
		t.Fatal("a provider was called for a user without an address")
	}
}
