package fcm_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/fcm"
	"github.com/herald-notify/herald/providers/providertest"
)

var tags = providers.Tags{TenantID: "t_acme", NotificationID: "ntf_01J0000000000000000000000", Channel: herald.ChannelPush}

func newFake() *providertest.FCMFake {
	f := providertest.NewFCM()
	f.Token = "test-access-token"
	return f
}

func newClient(t *testing.T, baseURL string, timeout time.Duration) *fcm.Client {
	t.Helper()
	c, err := fcm.New(context.Background(), fcm.Config{
		ProjectID:   "herald-test",
		TokenSource: oauth2.StaticTokenSource(&oauth2.Token{AccessToken: "test-access-token", TokenType: "Bearer"}),
		BaseURL:     baseURL,
		Timeout:     timeout,
		HTTPClient:  providertest.LoopbackClient(0), // the fake is on 127.0.0.1
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func send(t *testing.T, c *fcm.Client) (providers.Result, error) {
	t.Helper()
	return c.SendPush(context.Background(), providers.PushMessage{Token: "device-token-1", Title: "Order shipped", Body: "#1234 is on its way",
		Data: map[string]string{"order_id": "1234"}}, tags.IdempotencyKey(), tags)
}

func TestSendReturnsMessageNameAndTagsTheMessage(t *testing.T) {
	fake := newFake()
	defer fake.Close()
	res, err := send(t, newClient(t, fake.URL, 0))
	if err != nil {
		t.Fatal(err)
	}
	acc := fake.AcceptedRequests()
	if len(acc) != 1 || res.Provider != "fcm" || res.ProviderMessageID != "projects/herald-test/messages/"+acc[0].MessageID {
		t.Fatalf("result %+v, accepted %+v", res, acc)
	}
	if acc[0].Path != "/v1/projects/herald-test/messages:send" || acc[0].Header.Get("Authorization") != "Bearer test-access-token" {
		t.Fatalf("request %s %v", acc[0].Path, acc[0].Header)
	}
	s, err := providertest.DecodeFCM(acc[0])
	if err != nil {
		t.Fatal(err)
	}
	m := s.Message
	if m.Token != "device-token-1" || m.Notification == nil || m.Notification.Title != "Order shipped" || m.Data["order_id"] != "1234" {
		t.Fatalf("message %+v", m)
	}
	if m.Data["herald_notification_id"] != tags.NotificationID || m.Data["herald_channel"] != "push" || m.Data["herald_tenant"] != "t_acme" {
		t.Fatalf("data %v", m.Data)
	}
	collapse := fcm.CollapseID(tags.IdempotencyKey())
	if len(collapse) != 32 || m.Android == nil || m.Android.CollapseKey != "" || m.Android.Notification.Tag != collapse ||
		m.APNS.Headers["apns-collapse-id"] != collapse || m.Webpush.Headers["Topic"] != collapse {
		t.Fatalf("collapse ids: android %+v apns %+v webpush %+v", m.Android, m.APNS, m.Webpush)
	}
}

func TestUnregisteredAndInvalidTokensAreDead(t *testing.T) {
	fake := newFake()
	defer fake.Close()
	c := newClient(t, fake.URL, 0)
	for name, b := range map[string]providertest.Behavior{"UNREGISTERED": fake.Unregistered(), "INVALID_ARGUMENT": fake.InvalidToken()} {
		fake.Next(b)
		_, err := send(t, c)
		pe, ok := providers.AsError(err)
		if !ok || !pe.Permanent || !pe.DeadToken || pe.Code != name || !providers.IsDeadToken(err) {
			t.Errorf("%s: err = %#v", name, err)
		}
	}
	// The malformed-token answer without field details, and one naming the token
	// field in its message, kill the token too.
	for _, msg := range []string{"The registration token is not a valid FCM registration token", "Invalid value at 'message.token' (TYPE_STRING)"} {
		fake.Next(providertest.Behavior{Status: 400, Body: providertest.FCMError(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", msg)})
		if _, err := send(t, c); !providers.IsDeadToken(err) {
			t.Errorf("%q: err = %#v", msg, err)
		}
	}
	// INVALID_ARGUMENT about something other than the token: permanent, token
	// kept, even when the message mentions registration tokens.
	for _, msg := range []string{"Invalid value at 'message.data[0].value'", "Message too big", "Invalid registration token count for a multicast"} {
		fake.Next(providertest.Behavior{Status: 400, Body: providertest.FCMError(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", msg)})
		_, err := send(t, c)
		if pe, ok := providers.AsError(err); !ok || !pe.Permanent || pe.DeadToken {
			t.Errorf("non-token INVALID_ARGUMENT %q: err = %#v", msg, err)
		}
	}
}

func TestServerErrorsAndQuotaAreRetryable(t *testing.T) {
	fake := newFake()
	defer fake.Close()
	c := newClient(t, fake.URL, 0)

	fake.Next(providertest.Fail500())
	_, err := send(t, c)
	if pe, ok := providers.AsError(err); !ok || pe.Permanent || pe.Code != "INTERNAL" {
		t.Fatalf("500: err = %#v", err)
	}
	if fake.Calls() != 1 {
		t.Fatalf("the client retried by itself: %d calls", fake.Calls())
	}
	fake.Next(providertest.Fail503("3"))
	_, err = send(t, c)
	if pe, ok := providers.AsError(err); !ok || pe.Permanent || pe.RetryAfter != 3*time.Second {
		t.Fatalf("503: err = %#v", err)
	}
	fake.Next(fake.QuotaExceeded("60"))
	_, err = send(t, c)
	if pe, ok := providers.AsError(err); !ok || pe.Permanent || pe.Code != "QUOTA_EXCEEDED" || pe.RetryAfter != time.Minute {
		t.Fatalf("429: err = %#v", err)
	}
	if _, err := send(t, c); err != nil {
		t.Fatal(err)
	}
	if fake.Accepted() != 1 || fake.Calls() != 4 {
		t.Fatalf("accepted %d of %d calls", fake.Accepted(), fake.Calls())
	}
}

func TestSlowProviderTimesOutRetryably(t *testing.T) {
	fake := newFake()
	defer fake.Close()
	fake.Next(providertest.Slow(3 * time.Second))
	_, err := send(t, newClient(t, fake.URL, 200*time.Millisecond))
	if pe, ok := providers.AsError(err); !ok || pe.Permanent || pe.Code != "timeout" {
		t.Fatalf("err = %#v", err)
	}
}

func TestBadCredentialsArePermanent(t *testing.T) {
	fake := newFake()
	defer fake.Close()
	fake.Token = "another-token"
	_, err := send(t, newClient(t, fake.URL, 0))
	if pe, ok := providers.AsError(err); !ok || !pe.Permanent || pe.DeadToken || pe.StatusCode != http.StatusUnauthorized {
		t.Fatalf("err = %#v", err)
	}
}

func TestEmptyTokenIsDeadWithoutCallingFCM(t *testing.T) {
	fake := newFake()
	defer fake.Close()
	_, err := newClient(t, fake.URL, 0).SendPush(context.Background(), providers.PushMessage{Title: "x"}, "", tags)
	if !providers.IsDeadToken(err) || fake.Calls() != 0 {
		t.Fatalf("err = %v calls = %d", err, fake.Calls())
	}
}

func TestConfigNeedsProjectAndCredentials(t *testing.T) {
	if _, err := fcm.New(context.Background(), fcm.Config{ProjectID: "p"}); err == nil || !strings.Contains(err.Error(), "credentials") {
		t.Errorf("no credentials: %v", err)
	}
	if _, err := fcm.New(context.Background(), fcm.Config{TokenSource: oauth2.StaticTokenSource(&oauth2.Token{AccessToken: "x"})}); err == nil {
		t.Error("no project accepted")
	}
}
