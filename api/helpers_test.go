package api_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/herald"
)

func tenantOfKey(t *testing.T, h *apitest.Harness, key string) string {
	t.Helper()
	tn, err := h.Store.TenantByAPIKey(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return tn.ID
}

func countRequest(query string) *workflowservice.CountWorkflowExecutionsRequest {
	return &workflowservice.CountWorkflowExecutionsRequest{Namespace: "default", Query: query}
}

// createUser creates a user with an email address, locale en-GB and time zone
// Europe/London.
func createUser(h *apitest.Harness, key, userID string) {
	h.T.Helper()
	h.PutUser(key, userID, map[string]any{"email": userID + "@example.com", "locale": "en-GB", "timezone": "Europe/London"})
}

var keySeq atomic.Int64

// freshKey returns an idempotency key no other submission of the test binary uses.
func freshKey(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano(), keySeq.Add(1))
}

// accept submits a notification with a fresh idempotency key and returns its id.
func accept(t *testing.T, h *apitest.Harness, key, userID, templateID string, data map[string]any, channels ...string) string {
	t.Helper()
	body := map[string]any{"user_id": userID, "template_id": templateID, "data": data, "idempotency_key": freshKey("gate")}
	if len(channels) > 0 {
		body["channels"] = channels
	}
	return h.Accept(key, body)
}

// waitDelivered waits up to 20 s for a notification to be delivered.
func waitDelivered(h *apitest.Harness, key, id string) apitest.Response {
	h.T.Helper()
	return h.AwaitStatus(key, id, herald.NotificationDelivered, 20*time.Second)
}

// statusOf is a notification status response's overall status.
func statusOf(r apitest.Response) herald.NotificationStatus {
	return herald.NotificationStatus(r.Str("status"))
}

// channelOf returns a channel of a notification status response.
func channelOf(t *testing.T, r apitest.Response, channel herald.Channel) map[string]any {
	t.Helper()
	c := r.Channels()[channel]
	if c == nil {
		t.Fatalf("no channel %s in %s", channel, r.Body)
	}
	return c
}

// concurrently runs f(0) … f(n-1) on n goroutines released at once and waits
// for all of them.
func concurrently(n int, f func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			f(i)
		}()
	}
	close(start)
	wg.Wait()
}
