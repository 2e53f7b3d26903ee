package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
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

// An upload answered 503 is sent again from the start when its body is a
// Seeker, and not at all when it is not (a pipe cannot be read twice).
func TestUploadRetriedOnlyWhenRewindable(t *testing.T) {
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
		if len(bodies) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":"temporarily_unavailable","message":"later"}}`))
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"list_id":"lst_1","name":"x","lines":3,"members":2,"unknown_users":0,"unknown_sample":[],"created_at":"2026-01-01T00:00:00Z"}`))
	}))
	defer srv.Close()
	c, _ := New(srv.URL, "hk_test")
	recordSleeps(c)
	const csv = "user_id\na\nb\n"
	list, err := c.UploadList(context.Background(), CSV, strings.NewReader(csv), nil)
	if err != nil || list.ListID != "lst_1" || len(bodies) != 2 || bodies[0] != csv || bodies[1] != csv {
		t.Fatalf("list %+v, err %v, bodies sent %q", list, err, bodies)
	}
	bodies = nil
	pr, pw := io.Pipe()
	go func() { _, _ = pw.Write([]byte(csv)); pw.Close() }()
	_, err = c.UploadList(context.Background(), CSV, pr, nil)
	var herr *Error
	if !errors.As(err, &herr) || herr.Status != http.StatusServiceUnavailable || len(bodies) != 1 {
		t.Fatalf("a pipe: err %v after %d sends, want the 503 after one", err, len(bodies))
	}
}

// A stream Herald refuses on reconnection (401: the user token expired) closes
// Events with that error; the events before it were delivered.
func TestInboxStreamEndsOnRefusal(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	var lastIDs []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		n := calls
		lastIDs = append(lastIDs, r.Header.Get("Last-Event-ID"))
		mu.Unlock()
		if n > 1 {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"code":"invalid_user_token","message":"expired","field":"Authorization"}}`))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(": heartbeat\n\nid: 7\nevent: ready\ndata: {\"id\":7,\"counts\":{\"total\":1,\"unread\":1,\"unseen\":1}}\n\n"))
	}))
	defer srv.Close()
	c, _ := New(srv.URL, "token")
	recordSleeps(c)
	s, err := c.StreamInbox(context.Background(), "ada", nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []InboxStreamEvent
	for ev := range s.Events {
		got = append(got, ev)
	}
	var herr *Error
	if len(got) != 1 || got[0].Type != "ready" || got[0].ID != 7 || got[0].Marker.Counts.Unread != 1 {
		t.Fatalf("events %+v", got)
	}
	if !errors.As(s.Err(), &herr) || herr.Status != http.StatusUnauthorized || herr.Code != "invalid_user_token" {
		t.Fatalf("Err() = %v, want the 401", s.Err())
	}
	if len(lastIDs) != 2 || lastIDs[0] != "" || lastIDs[1] != "7" {
		t.Fatalf("Last-Event-ID sent: %q, want none then 7", lastIDs)
	}
}
