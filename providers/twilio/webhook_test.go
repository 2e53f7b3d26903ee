package twilio_test

import (
	"errors"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/providertest"
	"github.com/herald-notify/herald/providers/twilio"
)

// sign computes X-Twilio-Signature independently of twilio-go, as Twilio documents it.
var sign = providertest.TwilioSignature

func TestWebhookSignature(t *testing.T) {
	cb, err := twilio.StatusCallbackURL("https://herald.example.com/v1/webhooks/twilio", tags)
	if err != nil {
		t.Fatal(err)
	}
	form := url.Values{"MessageSid": {"SM0123"}, "MessageStatus": {"delivered"}, "AccountSid": {accountSID}, "To": {"+14155552671"}}
	body := []byte(form.Encode())
	sig := sign(authToken, cb, form)

	// Behind a proxy Herald sees http://10.0.0.5:8080/...; the configured public
	// base URL rebuilds what Twilio signed.
	u, _ := url.Parse(cb)
	r := httptest.NewRequest("POST", "http://10.0.0.5:8080"+u.RequestURI(), strings.NewReader(string(body)))
	full := twilio.PublicURL("https://herald.example.com/", r)
	if full != cb {
		t.Fatalf("PublicURL = %q, want %q", full, cb)
	}
	v := twilio.NewWebhookValidator(authToken)
	if err := v.Validate(full, body, sig); err != nil {
		t.Fatalf("valid signature rejected: %v", err)
	}
	// Twilio sometimes signs with the default port spelled out; both verify.
	if err := v.Validate(strings.Replace(full, "herald.example.com", "herald.example.com:443", 1), body, sig); err != nil {
		t.Fatalf("explicit :443: %v", err)
	}

	forged := url.Values{"MessageSid": {"SM0123"}, "MessageStatus": {"failed"}, "AccountSid": {accountSID}, "To": {"+14155552671"}}
	for name, c := range map[string]struct {
		url  string
		body []byte
		sig  string
	}{
		"changed body":        {full, []byte(forged.Encode()), sig},
		"changed URL":         {strings.Replace(full, "t_acme", "t_other", 1), body, sig},
		"wrong token":         {full, body, sign("ffffffffffffffffffffffffffffffff", cb, form)},
		"missing signature":   {full, body, ""},
		"http instead of TLS": {strings.Replace(full, "https://", "http://", 1), body, sig},
	} {
		if err := v.Validate(c.url, c.body, c.sig); !errors.Is(err, twilio.ErrBadSignature) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

func TestParseStatusCallback(t *testing.T) {
	cb, _ := twilio.StatusCallbackURL("https://herald.example.com/v1/webhooks/twilio?x=1", tags)
	u, _ := url.Parse(cb)
	if u.Query().Get("x") != "1" {
		t.Fatal("StatusCallbackURL dropped an existing query parameter")
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		form   url.Values
		status providers.ReceiptStatus
		reason string
	}{
		{url.Values{"MessageSid": {"SM1"}, "MessageStatus": {"queued"}}, providers.ReceiptAccepted, ""},
		{url.Values{"MessageSid": {"SM1"}, "MessageStatus": {"sent"}}, providers.ReceiptSent, ""},
		{url.Values{"MessageSid": {"SM1"}, "MessageStatus": {"delivered"}}, providers.ReceiptDelivered, ""},
		{url.Values{"SmsSid": {"SM1"}, "SmsStatus": {"read"}}, providers.ReceiptDelivered, ""},
		{url.Values{"MessageSid": {"SM1"}, "MessageStatus": {"undelivered"}, "ErrorCode": {"30006"}}, providers.ReceiptFailed, "error 30006"},
		{url.Values{"MessageSid": {"SM1"}, "MessageStatus": {"failed"}, "ErrorCode": {"30008"}, "ErrorMessage": {"Unknown error"}}, providers.ReceiptFailed, "error 30008: Unknown error"},
		{url.Values{"MessageSid": {"SM1"}, "MessageStatus": {"canceled"}}, providers.ReceiptFailed, "canceled"},
	}
	for _, c := range cases {
		r, err := twilio.ParseStatusCallback(u.Query(), c.form, now)
		if err != nil {
			t.Fatalf("%v: %v", c.form, err)
		}
		if r.Status != c.status || r.Reason != c.reason || r.ProviderMessageID != "SM1" || !r.Named() ||
			r.NotificationID != tags.NotificationID || r.TenantID != "t_acme" || r.Channel != "sms" || !r.OccurredAt.Equal(now) {
			t.Errorf("%v → %+v", c.form, r)
		}
	}
	for _, form := range []url.Values{
		{"MessageSid": {"SM1"}, "SmsStatus": {"received"}},
		{"MessageSid": {"SM1"}, "MessageStatus": {"whatever"}},
		{"MessageStatus": {"delivered"}},
	} {
		if _, err := twilio.ParseStatusCallback(u.Query(), form, now); !errors.Is(err, twilio.ErrNotDeliveryStatus) {
			t.Errorf("%v: err = %v", form, err)
		}
	}
}

func TestParseInboundKeywords(t *testing.T) {
	for body, want := range map[string]struct {
		ok, suppress bool
	}{
		"STOP": {true, true}, " stop ": {true, true}, "Stop.": {true, true}, "stopall": {true, true},
		"UNSUBSCRIBE": {true, true}, "cancel": {true, true}, "End!": {true, true}, "quit": {true, true},
		"START": {true, false}, "unstop": {true, false}, "Yes": {true, false},
		"please stop": {false, false}, "stopping": {false, false}, "": {false, false}, "hello": {false, false},
	} {
		e, ok := twilio.ParseInbound(url.Values{"From": {"+14155550100"}, "Body": {body}})
		if ok != want.ok || e.Suppress != want.suppress {
			t.Errorf("%q: ok %v suppress %v, want %v %v", body, ok, e.Suppress, want.ok, want.suppress)
		}
		if ok && (e.Address != "+14155550100" || e.Channel != "sms" || e.Reason != "stop" || e.Provider != "twilio") {
			t.Errorf("%q: event %+v", body, e)
		}
	}
	if _, ok := twilio.ParseInbound(url.Values{"Body": {"STOP"}}); ok {
		t.Error("a STOP with no sender was taken")
	}
}
