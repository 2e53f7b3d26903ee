package twilio_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/providertest"
	"github.com/herald-notify/herald/providers/twilio"
)

const (
	accountSID = "AC0123456789abcdef0123456789abcdef"
	authToken  = "0123456789abcdef0123456789abcdef"
	from       = "+15005550006"
)

var tags = providers.Tags{TenantID: "t_acme", NotificationID: "ntf_01J0000000000000000000000", Channel: herald.ChannelSMS}

func newClient(t *testing.T, baseURL string, mod func(*twilio.Config)) *twilio.Client {
	t.Helper()
	cfg := twilio.Config{AccountSID: accountSID, AuthToken: authToken, From: from, BaseURL: baseURL,
		StatusCallbackURL: "https://herald.example.com/v1/webhooks/twilio"}
	if mod != nil {
		mod(&cfg)
	}
	// The fakes listen on 127.0.0.1, which the default egress policy refuses.
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if cfg.HTTPClient.Transport == nil {
		cfg.HTTPClient.Transport = providertest.Loopback().Transport()
	}
	c, err := twilio.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func send(t *testing.T, c *twilio.Client) (providers.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.SendSMS(ctx, providers.SMSMessage{To: "+14155552671", Body: "Order #1234 shipped"}, tags.IdempotencyKey(), tags)
}

func newFake() *providertest.TwilioFake {
	f := providertest.NewTwilio()
	f.AccountSID, f.AuthToken = accountSID, authToken
	return f
}

func TestSendReturnsMessageSidWithStatusCallback(t *testing.T) {
	fake := newFake()
	defer fake.Close()
	res, err := send(t, newClient(t, fake.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	acc := fake.AcceptedRequests()
	if len(acc) != 1 || res.Provider != "twilio" || res.ProviderMessageID != acc[0].MessageID || !strings.HasPrefix(res.ProviderMessageID, "SM") {
		t.Fatalf("result %+v, accepted %+v", res, acc)
	}
	f := acc[0].Form
	if f.Get("To") != "+14155552671" || f.Get("From") != from || f.Get("Body") != "Order #1234 shipped" {
		t.Fatalf("form = %v", f)
	}
	cb, err := url.Parse(f.Get("StatusCallback"))
	if err != nil {
		t.Fatal(err)
	}
	q := cb.Query()
	if cb.Host != "herald.example.com" || q.Get("tenant") != "t_acme" || q.Get("notification_id") != tags.NotificationID || q.Get("channel") != "sms" {
		t.Fatalf("StatusCallback = %s", cb)
	}
	if acc[0].Header.Get(twilio.IdempotencyHeader) != "" {
		t.Fatal("idempotency header sent without being enabled")
	}
}

func TestMessagingServiceAndIdempotencyHeader(t *testing.T) {
	fake := newFake()
	defer fake.Close()
	c := newClient(t, fake.URL, func(c *twilio.Config) {
		c.From, c.MessagingServiceSID, c.IdempotencyHeader = "", "MG0123456789abcdef0123456789abcdef", true
	})
	if _, err := send(t, c); err != nil {
		t.Fatal(err)
	}
	r := fake.AcceptedRequests()[0]
	if r.Form.Get("MessagingServiceSid") != "MG0123456789abcdef0123456789abcdef" || r.Form.Get("From") != "" {
		t.Fatalf("form = %v", r.Form)
	}
	if got := r.Header.Get(twilio.IdempotencyHeader); got != tags.IdempotencyKey() {
		t.Fatalf("%s = %q", twilio.IdempotencyHeader, got)
	}
}

func TestServerErrorIsRetryableThenSucceeds(t *testing.T) {
	fake := newFake()
	defer fake.Close()
	fake.Next(providertest.Fail500())
	c := newClient(t, fake.URL, nil)
	_, err := send(t, c)
	pe, ok := providers.AsError(err)
	if !ok || pe.Permanent || pe.StatusCode != 500 {
		t.Fatalf("err = %#v", err)
	}
	if _, err := send(t, c); err != nil {
		t.Fatal(err)
	}
	if fake.Accepted() != 1 || fake.Calls() != 2 {
		t.Fatalf("accepted %d of %d", fake.Accepted(), fake.Calls())
	}
}

func TestUndecodableErrorBodyStillClassifiedByStatus(t *testing.T) {
	fake := newFake()
	defer fake.Close()
	fake.Next(providertest.Behavior{Status: http.StatusBadGateway, Body: "<html>bad gateway</html>", Header: http.Header{"Content-Type": {"text/html"}}})
	_, err := send(t, newClient(t, fake.URL, nil))
	pe, ok := providers.AsError(err)
	if !ok || pe.Permanent || pe.StatusCode != 502 {
		t.Fatalf("err = %#v", err)
	}
}

func TestRateLimitHonoursRetryAfter(t *testing.T) {
	fake := newFake()
	defer fake.Close()
	fake.Next(providertest.Fail429("12"))
	_, err := send(t, newClient(t, fake.URL, nil))
	if providers.IsPermanent(err) || providers.RetryAfter(err) != 12*time.Second {
		t.Fatalf("err = %v, RetryAfter = %v", err, providers.RetryAfter(err))
	}
}

func TestPermanentTwilioCodes(t *testing.T) {
	fake := newFake()
	defer fake.Close()
	c := newClient(t, fake.URL, nil)
	for name, b := range map[string]providertest.Behavior{
		"21211": fake.InvalidTo(), "21610": fake.Unsubscribed(), "21614": fake.NotMobile(),
	} {
		fake.Next(b)
		_, err := send(t, c)
		pe, ok := providers.AsError(err)
		if !ok || !pe.Permanent || pe.Code != name || pe.Reason == "" || pe.DeadToken {
			t.Errorf("%s: err = %#v", name, err)
		}
	}
	if fake.Accepted() != 0 {
		t.Fatal("a rejected message was accepted")
	}
}

func TestWrongCredentialsArePermanent(t *testing.T) {
	fake := newFake()
	defer fake.Close()
	_, err := send(t, newClient(t, fake.URL, func(c *twilio.Config) { c.AuthToken = "ffffffffffffffffffffffffffffffff" }))
	pe, ok := providers.AsError(err)
	if !ok || !pe.Permanent || pe.Code != "20003" || pe.StatusCode != 401 {
		t.Fatalf("err = %#v", err)
	}
}

func TestContextAndTimeoutsAreHonoured(t *testing.T) {
	fake := newFake()
	defer fake.Close()
	fake.Next(providertest.Slow(3 * time.Second))
	c := newClient(t, fake.URL, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.SendSMS(ctx, providers.SMSMessage{To: "+14155552671", Body: "x"}, "k", tags)
	pe, ok := providers.AsError(err)
	if !ok || pe.Permanent || pe.Code != "timeout" || time.Since(start) > 2*time.Second {
		t.Fatalf("err = %#v after %v", err, time.Since(start))
	}

	fake.Next(providertest.Slow(3 * time.Second))
	c = newClient(t, fake.URL, func(c *twilio.Config) { c.HTTPClient = &http.Client{Timeout: 200 * time.Millisecond} })
	_, err = send(t, c)
	if pe, ok := providers.AsError(err); !ok || pe.Permanent || pe.Code != "timeout" {
		t.Fatalf("client timeout: err = %#v", err)
	}
}

func TestMissingNumberIsPermanentWithoutCallingTwilio(t *testing.T) {
	fake := newFake()
	defer fake.Close()
	_, err := newClient(t, fake.URL, nil).SendSMS(context.Background(), providers.SMSMessage{Body: "x"}, "k", tags)
	if !providers.IsPermanent(err) || fake.Calls() != 0 {
		t.Fatalf("err = %v calls = %d", err, fake.Calls())
	}
}

func TestConfigValidation(t *testing.T) {
	if _, err := twilio.New(twilio.Config{AccountSID: "nope", AuthToken: "x"}); err == nil {
		t.Error("bad account SID accepted")
	}
	if _, err := twilio.New(twilio.Config{AccountSID: accountSID}); err == nil {
		t.Error("empty token accepted")
	}
	if _, err := twilio.New(twilio.Config{AccountSID: accountSID, AuthToken: "x", BaseURL: "not a url"}); err == nil {
		t.Error("relative base URL accepted")
	}
}

func TestAcceptedWithUnreadableBodyIsStillSuccess(t *testing.T) {
	// A 2xx means Twilio has the message: reporting an error would send it again.
	fake := newFake()
	defer fake.Close()
	fake.Next(providertest.Behavior{Status: http.StatusCreated, Body: "not json"})
	res, err := send(t, newClient(t, fake.URL, nil))
	if err != nil || res.Provider != "twilio" || res.ProviderMessageID != "" {
		t.Fatalf("res %+v err %v", res, err)
	}
}
