package providers_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/providers"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true},
		{"120", 2 * time.Minute, true},
		{" 5 ", 5 * time.Second, true},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{"Thu, 01 Jan 2026 12:01:30 GMT", 90 * time.Second, true},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0, true},
		{"", 0, false},
		{"-3", 0, false},
		{"soon", 0, false},
	}
	for _, c := range cases {
		got, ok := providers.ParseRetryAfter(c.in, now)
		if got != c.want || ok != c.ok {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestHTTPErrorClassification(t *testing.T) {
	for status, permanent := range map[int]bool{400: true, 401: true, 403: true, 404: true, 413: true, 422: true,
		408: false, 409: false, 425: false, 429: false, 500: false, 502: false, 503: false, 504: false} {
		pe := providers.HTTPError("x", status, nil, "", "")
		if pe.Permanent != permanent || pe.StatusCode != status || pe.Code != fmt.Sprintf("http_%d", status) || pe.Reason == "" {
			t.Errorf("status %d: %+v", status, pe)
		}
	}
	pe := providers.HTTPError("x", 429, http.Header{"Retry-After": {"30"}}, "rate", "slow down")
	if pe.RetryAfter != 30*time.Second || pe.Code != "rate" || pe.Reason != "slow down" {
		t.Errorf("429: %+v", pe)
	}
	if s := pe.Error(); !strings.Contains(s, "retryable") || !strings.Contains(s, "30s") {
		t.Errorf("Error() = %q", s)
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

var _ net.Error = timeoutErr{}

func TestTransportErrorsAreRetryable(t *testing.T) {
	for err, code := range map[error]string{
		context.Canceled: "canceled",
		fmt.Errorf("post: %w", context.DeadlineExceeded): "timeout",
		timeoutErr{}:                     "timeout",
		errors.New("connection refused"): "connection",
	} {
		pe := providers.TransportError("x", err)
		if pe.Permanent || pe.Code != code || !errors.Is(pe, err) {
			t.Errorf("%v: %+v", err, pe)
		}
	}
}

func TestHelpersSeeThroughWrapping(t *testing.T) {
	base := &providers.Error{Provider: "fcm", Permanent: true, DeadToken: true, RetryAfter: time.Second}
	err := fmt.Errorf("activity: %w", base)
	if !providers.IsPermanent(err) || !providers.IsDeadToken(err) || providers.RetryAfter(err) != time.Second {
		t.Fatal("helpers do not unwrap")
	}
	plain := errors.New("boom")
	if providers.IsPermanent(plain) || providers.IsDeadToken(plain) || providers.RetryAfter(plain) != 0 {
		t.Fatal("a plain error is not a provider error")
	}
	if _, ok := providers.AsError(plain); ok {
		t.Fatal("AsError on a plain error")
	}
}

func TestTags(t *testing.T) {
	tags := providers.Tags{TenantID: "t", NotificationID: "n", Channel: "sms"}
	if tags.Validate() != nil || tags.IdempotencyKey() != "n:sms" {
		t.Fatal(tags)
	}
	for _, bad := range []providers.Tags{{NotificationID: "n", Channel: "c"}, {TenantID: "t", Channel: "c"}, {TenantID: "t", NotificationID: "n"}} {
		if bad.Validate() == nil {
			t.Errorf("%+v validated", bad)
		}
	}
}
