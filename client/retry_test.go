package client

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// recordSleeps makes c's backoff waits instant and records them.
func recordSleeps(c *Client) *[]time.Duration {
	var mu sync.Mutex
	waits := &[]time.Duration{}
	c.sleep = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		*waits = append(*waits, d)
		return ctx.Err()
	}
	return waits
}

// A send answered 429 (Retry-After: 7) then 503 then 202 is sent three times
// with the same generated idempotency key, waiting 7 s after the 429.
func TestSendRetriesWithOneIdempotencyKey(t *testing.T) {
	var keys []string
	answers := []func(w http.ResponseWriter){
		func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"error":{"code":"rate_limited","message":"slow down"}}`))
		},
		func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":"temporarily_unavailable","message":"later"}}`))
		},
		func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte(`{"notification_id":"n_1","status":"queued","dedup":"new"}`))
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body CreateNotificationRequest
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.IdempotencyKey == nil {
			t.Errorf("request %d: no idempotency key (%v)", len(keys), err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		keys = append(keys, *body.IdempotencyKey)
		answers[len(keys)-1](w)
	}))
	defer srv.Close()
	c, err := New(srv.URL, "hk_test")
	if err != nil {
		t.Fatal(err)
	}
	waits := recordSleeps(c)
	sent, err := c.CreateNotification(context.Background(), CreateNotificationRequest{UserID: "ada", TemplateID: "welcome"})
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 3 || keys[0] != keys[1] || keys[1] != keys[2] || keys[0] == "" {
		t.Fatalf("keys sent: %q, want the same generated key three times", keys)
	}
	if sent.IdempotencyKey != keys[0] || sent.NotificationID != "n_1" || sent.Duplicate {
		t.Fatalf("answer %+v", sent)
	}
	if len(*waits) != 2 || (*waits)[0] != 7*time.Second || (*waits)[1] <= 0 || (*waits)[1] > DefaultRetries.InitialBackoff*2 {
		t.Fatalf("waits %v, want [7s, a backoff up to %s]", *waits, DefaultRetries.InitialBackoff*2)
	}
}

// A 4xx other than 429 is not retried and comes back as a typed *Error.
func TestErrorIsTypedAndNotRetried(t *testing.T) {
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.Header().Set("X-Request-Id", "req-1")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":{"code":"invalid_field","message":"bad window","field":"steps[3].window"}}`))
	}))
	defer srv.Close()
	c, _ := New(srv.URL, "hk_test")
	recordSleeps(c)
	_, err := c.GetUser(context.Background(), "ada")
	var herr *Error
	if !errors.As(err, &herr) {
		t.Fatalf("error %T %v, want *Error", err, err)
	}
	if herr.Status != 400 || herr.Code != "invalid_field" || herr.Field != "steps[3].window" || herr.RequestID != "req-1" || calls != 1 {
		t.Fatalf("got %+v after %d calls", herr, calls)
	}
}

// A network error is retried for a read and for a send (it carries its key), not
// for a POST that would create something twice; retries stop at MaxAttempts.
func TestNetworkErrorsRetriedOnlyWhenSafe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := 0
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			accepted++
			conn.Close() // no answer: a network error
		}
	}()
	defer ln.Close()
	c, _ := New("http://"+ln.Addr().String(), "hk_test", WithRetry(Retries{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}))
	waits := recordSleeps(c)
	ctx := context.Background()
	if _, err := c.GetCampaign(ctx, "c1"); err == nil {
		t.Fatal("GetCampaign: no error")
	}
	if len(*waits) != 2 {
		t.Fatalf("GetCampaign: %d retries, want 2", len(*waits))
	}
	*waits = nil
	if _, err := c.CreateAPIKey(ctx, CreateAPIKeyRequest{}); err == nil {
		t.Fatal("CreateAPIKey: no error")
	}
	if len(*waits) != 0 {
		t.Fatalf("CreateAPIKey: retried %d times after a network error", len(*waits))
	}
	*waits = nil
	if _, err := c.CreateCampaign(ctx, CreateCampaignRequest{TemplateID: "t"}); err == nil {
		t.Fatal("CreateCampaign: no error")
	}
	if len(*waits) != 2 {
		t.Fatalf("CreateCampaign: %d retries, want 2", len(*waits))
	}
}

// A Retry-After longer than MaxRetryAfter ends the call with the *Error at once.
func TestLongRetryAfterIsReturned(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"error":{"code":"quota_exceeded","message":"daily quota"}}`))
	}))
	defer srv.Close()
	c, _ := New(srv.URL, "hk_test")
	waits := recordSleeps(c)
	_, err := c.ListTemplates(context.Background(), nil)
	var herr *Error
	if !errors.As(err, &herr) || herr.RetryAfter != time.Hour || len(*waits) != 0 {
		t.Fatalf("err %v, waits %v", err, *waits)
	}
}
