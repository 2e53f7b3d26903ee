package sendgrid_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/egress"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/providertest"
	"github.com/herald-notify/herald/providers/sendgrid"
)

var tags = providers.Tags{TenantID: "t_acme", NotificationID: "ntf_01J0000000000000000000000", Channel: herald.ChannelEmail}

func message() providers.EmailMessage {
	return providers.EmailMessage{
		To: "alice@example.com", ToName: "Alice", Subject: "Order #1234 shipped",
		Text: "Your order shipped.", HTML: "<p>Your order shipped.</p>", Categories: []string{"shipping"},
	}
}

// newClient builds a client for a fake on 127.0.0.1: hc (nil: 30 s timeout) on
// an egress policy that allows it.
func newClient(t *testing.T, baseURL string, hc *http.Client) *sendgrid.Client {
	t.Helper()
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	if hc.Transport == nil {
		hc.Transport, hc.CheckRedirect = providertest.Loopback().Transport(), egress.RefuseRedirects
	}
	c, err := sendgrid.New(sendgrid.Config{APIKey: "SG.test-key", BaseURL: baseURL, From: "noreply@acme.example", FromName: "Acme", HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func send(t *testing.T, c *sendgrid.Client) (providers.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.SendEmail(ctx, message(), tags.IdempotencyKey(), tags)
}

func TestSendReturnsMessageIDAndTagsTheMessage(t *testing.T) {
	fake := providertest.NewSendGrid()
	defer fake.Close()
	fake.APIKey = "SG.test-key"

	res, err := send(t, newClient(t, fake.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	accepted := fake.AcceptedRequests()
	if len(accepted) != 1 || fake.Accepted() != 1 {
		t.Fatalf("accepted %d requests, want 1", len(accepted))
	}
	if res.Provider != "sendgrid" || res.ProviderMessageID == "" || res.ProviderMessageID != accepted[0].MessageID {
		t.Fatalf("result %+v, fake gave id %q", res, accepted[0].MessageID)
	}
	if got := accepted[0].Header.Get("Authorization"); got != "Bearer SG.test-key" {
		t.Fatalf("Authorization = %q", got)
	}
	m, err := providertest.DecodeMail(accepted[0])
	if err != nil {
		t.Fatal(err)
	}
	args := m.Personalizations[0].CustomArgs
	if args["notification_id"] != tags.NotificationID || args["channel"] != "email" || args["tenant"] != "t_acme" {
		t.Fatalf("custom_args = %v", args)
	}
	if len(m.CustomArgs) != 0 {
		t.Fatalf("message-level custom_args must be absent (the spec types it as a string): %s", m.CustomArgs)
	}
	if m.From.Email != "noreply@acme.example" || m.Personalizations[0].To[0].Email != "alice@example.com" || m.Subject != "Order #1234 shipped" {
		t.Fatalf("mail = %+v", m)
	}
	if len(m.Content) != 2 || m.Content[0].Type != "text/plain" || m.Content[1].Type != "text/html" {
		t.Fatalf("content = %+v (text/plain must come first)", m.Content)
	}
}

func TestServerErrorIsRetryable(t *testing.T) {
	fake := providertest.NewSendGrid()
	defer fake.Close()
	fake.Next(providertest.Fail500())

	_, err := send(t, newClient(t, fake.URL, nil))
	pe, ok := providers.AsError(err)
	if !ok || pe.Permanent || pe.StatusCode != 500 {
		t.Fatalf("err = %#v, want retryable 500", err)
	}
	if fake.Accepted() != 0 {
		t.Fatal("a failed call was accepted")
	}
	// The next attempt goes through: exactly one accepted message.
	if _, err := send(t, newClient(t, fake.URL, nil)); err != nil {
		t.Fatal(err)
	}
	if fake.Accepted() != 1 || fake.Calls() != 2 {
		t.Fatalf("accepted %d of %d calls", fake.Accepted(), fake.Calls())
	}
}

func TestRateLimitHonoursRetryAfter(t *testing.T) {
	fake := providertest.NewSendGrid()
	defer fake.Close()
	c := newClient(t, fake.URL, nil)

	fake.Next(providertest.Fail429("7"))
	_, err := send(t, c)
	if providers.IsPermanent(err) || providers.RetryAfter(err) != 7*time.Second {
		t.Fatalf("err = %v, retry after %v; want retryable, 7s", err, providers.RetryAfter(err))
	}

	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	fake.Next(providertest.Fail429(date))
	_, err = send(t, c)
	if d := providers.RetryAfter(err); d < 80*time.Second || d > 90*time.Second {
		t.Fatalf("HTTP-date Retry-After gave %v", d)
	}

	// SendGrid's own rate-limit header when there is no Retry-After.
	reset := time.Now().Add(30 * time.Second).Unix()
	fake.Next(providertest.Behavior{Status: 429, Header: http.Header{"X-Ratelimit-Reset": {itoa(reset)}}})
	_, err = send(t, c)
	if d := providers.RetryAfter(err); d < 25*time.Second || d > 30*time.Second {
		t.Fatalf("X-RateLimit-Reset gave %v", d)
	}
}

func TestInvalidAddressIsPermanent(t *testing.T) {
	fake := providertest.NewSendGrid()
	defer fake.Close()
	fake.Next(fake.InvalidAddress())

	_, err := send(t, newClient(t, fake.URL, nil))
	pe, ok := providers.AsError(err)
	if !ok || !pe.Permanent || pe.Code != "invalid_address" || !strings.Contains(pe.Reason, "valid address") {
		t.Fatalf("err = %#v", err)
	}
}

func TestRevokedKeyIsPermanent(t *testing.T) {
	fake := providertest.NewSendGrid()
	defer fake.Close()
	fake.APIKey = "SG.other"
	_, err := send(t, newClient(t, fake.URL, nil))
	pe, ok := providers.AsError(err)
	if !ok || !pe.Permanent || pe.StatusCode != 401 {
		t.Fatalf("err = %#v", err)
	}
}

func TestTimeoutAndConnectionErrorsAreRetryable(t *testing.T) {
	fake := providertest.NewSendGrid()
	fake.Next(providertest.Slow(2 * time.Second))
	c := newClient(t, fake.URL, &http.Client{Timeout: 200 * time.Millisecond})
	_, err := send(t, c)
	pe, ok := providers.AsError(err)
	if !ok || pe.Permanent || pe.Code != "timeout" {
		t.Fatalf("slow provider: err = %#v", err)
	}
	fake.Close()

	_, err = send(t, c) // server gone: connection refused
	pe, ok = providers.AsError(err)
	if !ok || pe.Permanent || pe.Code != "connection" {
		t.Fatalf("closed server: err = %#v", err)
	}
}

func TestMissingRecipientIsPermanentWithoutCallingSendGrid(t *testing.T) {
	fake := providertest.NewSendGrid()
	defer fake.Close()
	msg := message()
	msg.To = ""
	_, err := newClient(t, fake.URL, nil).SendEmail(context.Background(), msg, "k", tags)
	if !providers.IsPermanent(err) || fake.Calls() != 0 {
		t.Fatalf("err = %v, calls = %d", err, fake.Calls())
	}
}

func TestAcceptedWithoutMessageIDIsStillSuccess(t *testing.T) {
	// A 2xx means SendGrid has the message: never report it as a failure (that
	// would make the caller send it again).
	srv := providertest.NewSendGrid()
	defer srv.Close()
	srv.Next(providertest.Behavior{Status: http.StatusAccepted, Body: " "})
	res, err := send(t, newClient(t, srv.URL, nil))
	if err != nil || res.Provider != "sendgrid" {
		t.Fatalf("res %+v err %v", res, err)
	}
}

func TestHeldRequestCanBeAcceptedBeforeTheResponse(t *testing.T) {
	fake := providertest.NewSendGrid()
	defer fake.Close()
	hold := fake.HoldNext(true)
	done := make(chan error, 1)
	go func() { _, err := send(t, newClient(t, fake.URL, nil)); done <- err }()
	<-hold.Arrived()
	if fake.Accepted() != 1 {
		t.Fatalf("accepted = %d while held, want 1", fake.Accepted())
	}
	select {
	case err := <-done:
		t.Fatalf("send returned while held: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	hold.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if fake.Accepted() != 1 {
		t.Fatalf("accepted = %d, want 1", fake.Accepted())
	}
}

func TestErrorIsFoundThroughWrapping(t *testing.T) {
	fake := providertest.NewSendGrid()
	defer fake.Close()
	fake.Next(fake.InvalidAddress())
	_, err := send(t, newClient(t, fake.URL, nil))
	wrapped := errors.Join(errors.New("activity"), err)
	if !providers.IsPermanent(wrapped) {
		t.Fatal("IsPermanent does not see through wrapping")
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
