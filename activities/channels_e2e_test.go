package activities_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/providertest"
	"github.com/herald-notify/herald/providers/resolver"
)

// process points the provider clients at the fakes.
func process(f apitest.Fakes) resolver.Process {
	return f.Process("https://herald.example.test", 10*time.Second)
}

// configure stores real-provider credentials for every channel of the tenant.
func configure(h *apitest.Harness, f apitest.Fakes, tenantID string) {
	h.T.Helper()
	h.ConfigureSendGrid(tenantID, `{"from":"shop@example.com","from_name":"Shop"}`)
	h.ConfigureTwilio(tenantID)
	h.ConfigureFCM(tenantID, f.FCM.URL+providertest.TokenPath)
}

func setup(t *testing.T) (*apitest.Harness, apitest.Fakes, string, string) {
	t.Helper()
	return setupWith(t, func(*resolver.Process) {})
}

// setupWith is setup with the provider process settings adjusted.
func setupWith(t *testing.T, adjust func(*resolver.Process)) (*apitest.Harness, apitest.Fakes, string, string) {
	t.Helper()
	f := apitest.StartFakes(t)
	proc := process(f)
	adjust(&proc)
	h := apitest.Start(t, apitest.Options{Process: proc})
	tenantID, key := h.TenantWith("shop", "order_shipped")
	configure(h, f, tenantID)
	h.PutUser(key, "ada", map[string]any{"email": "ada@example.com", "phone": "+14155550100"})
	if _, err := h.Providers.PutPushToken(context.Background(), providers.PushToken{TenantID: tenantID, UserID: "ada", Token: "device-token-1", Platform: "android"}, 0); err != nil {
		t.Fatal(err)
	}
	return h, f, tenantID, key
}

var sent int

func send(h *apitest.Harness, key string, channels ...string) string {
	h.T.Helper()
	sent++ // distinct content, so content-based dedup never merges two test sends
	return h.Accept(key, map[string]any{"user_id": "ada", "template_id": "order_shipped",
		"channels": channels, "data": map[string]any{"title": "Shipped", "body": "Order 42 <b>is</b> on its way", "n": sent}})
}

func TestEveryChannelGoesThroughItsRealSDK(t *testing.T) {
	h, f, tenantID, key := setup(t)
	id := send(h, key, "email", "sms", "push", "in_app")
	for _, ch := range []herald.Channel{"email", "sms", "push"} {
		st := h.AwaitChannel(key, id, ch, "sent", "", 20*time.Second)
		if st["provider_message_id"] == nil || st["provider_message_id"] == "" {
			t.Errorf("%s: no provider message id: %v", ch, st)
		}
	}
	h.AwaitChannel(key, id, "in_app", "delivered", "", 5*time.Second)
	h.AwaitStatus(key, id, "sent", 10*time.Second)
	if f.SendGrid.Accepted() != 1 || f.Twilio.Accepted() != 1 || f.FCM.Accepted() != 1 {
		t.Fatalf("accepted calls: sendgrid %d twilio %d fcm %d, want 1 each", f.SendGrid.Accepted(), f.Twilio.Accepted(), f.FCM.Accepted())
	}
	mail, err := providertest.DecodeMail(f.SendGrid.AcceptedRequests()[0])
	if err != nil {
		t.Fatal(err)
	}
	tags := mail.Personalizations[0].CustomArgs
	if tags["notification_id"] != id || tags["channel"] != "email" || tags["tenant"] != tenantID || mail.Personalizations[0].To[0].Email != "ada@example.com" {
		t.Errorf("SendGrid personalization: %+v", mail.Personalizations[0])
	}
	if html := apitest.MailPart(mail, "text/html"); !strings.Contains(html, "&lt;b&gt;is&lt;/b&gt;") || strings.Contains(html, "<b>") {
		t.Errorf("user data reached the email HTML unescaped: %q", html)
	}
	sms := f.Twilio.AcceptedRequests()[0].Form
	cb := sms.Get("StatusCallback")
	if sms.Get("To") != "+14155550100" || !strings.HasPrefix(cb, "https://herald.example.test/v1/webhooks/twilio?") || !strings.Contains(cb, id) {
		t.Errorf("Twilio request: To=%q StatusCallback=%q", sms.Get("To"), cb)
	}
	if push := string(f.FCM.AcceptedRequests()[0].Body); !strings.Contains(push, "device-token-1") || !strings.Contains(push, id) {
		t.Errorf("FCM request: %s", push)
	}
}

func TestA500IsRetriedAndAcceptedOnce(t *testing.T) {
	h, f, _, key := setup(t)
	f.SendGrid.Next(providertest.Fail500())
	id := send(h, key, "email")
	st := h.AwaitChannel(key, id, "email", "sent", "", 20*time.Second)
	if f.SendGrid.Calls() != 2 || f.SendGrid.Accepted() != 1 {
		t.Fatalf("calls %d accepted %d, want 2 calls and exactly 1 accepted", f.SendGrid.Calls(), f.SendGrid.Accepted())
	}
	if st["attempts"].(float64) != 2 {
		t.Fatalf("attempts = %v, want 2", st["attempts"])
	}
}

func TestA429WaitsForRetryAfter(t *testing.T) {
	h, f, _, key := setup(t)
	f.Twilio.Next(providertest.Fail429("3"))
	id := send(h, key, "sms")
	h.AwaitChannel(key, id, "sms", "sent", "", 20*time.Second)
	reqs := f.Twilio.Requests()
	if len(reqs) != 2 || f.Twilio.Accepted() != 1 {
		t.Fatalf("requests %d accepted %d, want 2 and 1", len(reqs), f.Twilio.Accepted())
	}
	if gap := reqs[1].At.Sub(reqs[0].At); gap < 3*time.Second {
		t.Fatalf("retried after %s, before the provider's Retry-After of 3s", gap)
	}
}

func TestPermanentFailureIsNotRetried(t *testing.T) {
	h, f, _, key := setup(t)
	f.Twilio.Next(f.Twilio.InvalidTo())
	id := send(h, key, "sms")
	st := h.AwaitChannel(key, id, "sms", "failed", "", 20*time.Second)
	if f.Twilio.Calls() != 1 {
		t.Fatalf("a permanent failure was retried: %d calls", f.Twilio.Calls())
	}
	if msg, _ := st["last_error"].(string); !strings.Contains(msg, "21211") {
		t.Fatalf("failed without the provider's reason: %v", st)
	}
	h.AwaitStatus(key, id, "failed", 10*time.Second)
}

func TestDeadPushTokenIsRemoved(t *testing.T) {
	h, f, tenantID, key := setup(t)
	f.FCM.Next(f.FCM.Unregistered())
	id := send(h, key, "push")
	h.AwaitChannel(key, id, "push", "failed", "", 20*time.Second)
	tokens, err := h.Providers.PushTokens(context.Background(), tenantID, "ada")
	if err != nil || len(tokens) != 0 {
		t.Fatalf("dead token kept: %v %v", tokens, err)
	}
	// With no device left the next push is suppressed for want of an address.
	id2 := send(h, key, "push", "in_app")
	st := h.AwaitChannel(key, id2, "push", "suppressed", "", 20*time.Second)
	if st["reason"] != "no_address" {
		t.Fatalf("reason = %v, want no_address", st["reason"])
	}
}

// TestDeadTokensAreRemovedExactly: a user with two devices, FCM answering
// UNREGISTERED for one: that token alone is removed (another user's device is
// untouched) and the push is sent to the other; INVALID_ARGUMENT naming the
// token removes it too; INVALID_ARGUMENT about anything else fails the push
// and keeps the token.
func TestDeadTokensAreRemovedExactly(t *testing.T) {
	h, f, tenantID, key := setup(t)
	ctx := context.Background()
	h.PutUser(key, "bob", map[string]any{"email": "bob@example.com"})
	for _, tk := range []providers.PushToken{{UserID: "ada", Token: "device-token-2"}, {UserID: "bob", Token: "bob-token"}} {
		tk.TenantID, tk.Platform = tenantID, "ios"
		if _, err := h.Providers.PutPushToken(ctx, tk, 0); err != nil {
			t.Fatal(err)
		}
	}
	tokens := func(user string) []string {
		t.Helper()
		toks, err := h.Providers.PushTokens(ctx, tenantID, user)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tk := range toks {
			out = append(out, tk.Token)
		}
		return out
	}

	f.FCM.Next(f.FCM.Unregistered()) // the oldest device, device-token-1
	h.AwaitChannel(key, send(h, key, "push"), "push", "sent", "", 20*time.Second)
	if got := tokens("ada"); len(got) != 1 || got[0] != "device-token-2" {
		t.Fatalf("ada's devices after UNREGISTERED: %v", got)
	}
	if got := tokens("bob"); len(got) != 1 {
		t.Fatalf("bob's device was touched: %v", got)
	}

	f.FCM.Next(providertest.Behavior{Status: 400, Body: providertest.FCMError(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "Message too big")})
	h.AwaitChannel(key, send(h, key, "push"), "push", "failed", "", 20*time.Second)
	if got := tokens("ada"); len(got) != 1 {
		t.Fatalf("a non-token INVALID_ARGUMENT removed a device: %v", got)
	}

	f.FCM.Next(f.FCM.InvalidToken())
	h.AwaitChannel(key, send(h, key, "push"), "push", "failed", "", 20*time.Second)
	if got := tokens("ada"); len(got) != 0 {
		t.Fatalf("ada's devices after INVALID_ARGUMENT on the token: %v", got)
	}
}

func TestEmailOutageDoesNotDelayOtherChannels(t *testing.T) {
	h, f, _, key := setup(t)
	f.SendGrid.Always(providertest.Fail500())
	id := send(h, key, "email", "sms", "push", "in_app")
	start := time.Now()
	h.AwaitChannel(key, id, "sms", "sent", "", 10*time.Second)
	h.AwaitChannel(key, id, "push", "sent", "", 10*time.Second)
	h.AwaitChannel(key, id, "in_app", "delivered", "", 10*time.Second)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("other channels took %s during the email outage", took)
	}
	// The email is retrying meanwhile: its first failed call may be recorded
	// a moment after the other channels finished.
	h.Eventually(10*time.Second, "the email retrying during the outage", func() bool {
		_, chans := h.Channels(key, id)
		attempts, _ := chans["email"]["attempts"].(float64)
		return chans["email"]["status"] == "sending" && attempts >= 1
	})
	f.SendGrid.Recover()
	h.AwaitChannel(key, id, "email", "sent", "", 30*time.Second)
	if f.SendGrid.Accepted() != 1 {
		t.Fatalf("accepted %d emails, want 1", f.SendGrid.Accepted())
	}
}

func TestNoAddressIsSuppressedNotFailed(t *testing.T) {
	f := apitest.StartFakes(t)
	h := apitest.Start(t, apitest.Options{Process: process(f)})
	tenantID, key := h.TenantWith("shop", "order_shipped")
	configure(h, f, tenantID)
	h.PutUser(key, "ada", map[string]any{"locale": "en"})
	id := send(h, key, "email", "sms", "in_app")
	for _, ch := range []herald.Channel{"email", "sms"} {
		if st := h.AwaitChannel(key, id, ch, "suppressed", "", 10*time.Second); st["reason"] != "no_address" {
			t.Errorf("%s reason = %v", ch, st["reason"])
		}
	}
	h.AwaitChannel(key, id, "in_app", "delivered", "", 10*time.Second)
	if f.SendGrid.Calls()+f.Twilio.Calls() != 0 {
		t.Fatal("a provider was called for a user without an address")
	}
}
