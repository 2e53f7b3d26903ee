package api_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/herald-notify/herald/activities"
	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/testenv"
	"github.com/herald-notify/herald/workflows"
)

// TestDigestEventConcurrentDuplicatesAcceptedOnce: an event of a digest-first
// flow has no workflow of its own, so Layer 1 is its key's row: 20 concurrent
// submissions of one key are one event (one 202, the others duplicates with its
// id, one row in the digest).
func TestDigestEventConcurrentDuplicatesAcceptedOnce(t *testing.T) {
	t.Parallel()
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	tenantID, key := h.Tenant("digest-accept-dups")
	h.Template(key, commentDigestTemplate())
	h.PutUser(key, "ada", map[string]any{})
	h.MustDo(http.StatusCreated, http.MethodPut, "/v1/flows/comments", key, commentsFlow)
	body := map[string]any{"user_id": "ada", "flow_id": "comments", "idempotency_key": "same", "data": map[string]any{"text": "x"}}
	const n = 20
	statuses := make([]int, n)
	idsOf := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := h.Do(http.MethodPost, "/v1/notifications", key, body)
			statuses[i], idsOf[i] = r.Status, r.Str("notification_id")
		}()
	}
	wg.Wait()
	accepted := 0
	for i := range n {
		switch statuses[i] {
		case http.StatusAccepted:
			accepted++
		case http.StatusOK:
		default:
			t.Fatalf("submission %d: %d", i, statuses[i])
		}
		if idsOf[i] != idsOf[0] || idsOf[i] == "" {
			t.Fatalf("ids differ: %q and %q", idsOf[i], idsOf[0])
		}
	}
	if accepted != 1 {
		t.Fatalf("%d submissions accepted, want 1", accepted)
	}
	var rows int
	if err := testenv.Pool(t).QueryRow(context.Background(), `SELECT count(*) FROM digest_events WHERE tenant_id = $1`, tenantID).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 1 {
		t.Fatalf("%d digest rows, want 1", rows)
	}
}

// TestDigestEventSweptAfterACrashBeforeItsSignal: the API committed an event's
// rows and died before signalling its digest (or Temporal refused the signal
// and the client never retried). The sweeper signals the digest; the event is
// sent with it and its status shows it, and a sweep after that has nothing to do.
func TestDigestEventSweptAfterACrashBeforeItsSignal(t *testing.T) {
	t.Parallel()
	h := apitest.Start(t, apitest.Options{})
	tenantID, key := h.Tenant("digest-accept-sweep")
	h.Template(key, commentDigestTemplate())
	h.PutUser(key, "ada", map[string]any{})
	h.MustDo(http.StatusCreated, http.MethodPut, "/v1/flows/comments", key, commentsFlow)
	ctx := context.Background()
	// What the API's accept path commits before its signal, and nothing more.
	k := ids.IdempotencyKeyHash("crashed")
	runID := "0b0e5c1e-0000-4000-8000-000000000001"
	id := ids.NotificationID(k, runID)
	at := time.Now().Add(-time.Minute).UTC().Truncate(time.Microsecond)
	acc, err := h.Store.AcceptDigestEvent(ctx, store.AcceptDigestEventParams{TenantID: tenantID, UserID: "ada", FlowID: "comments",
		FlowVersion: 1, Category: "comments", KeyHash: k.String(), NotificationID: id, WorkflowID: ids.NotificationWorkflowID(tenantID, k),
		RunID: runID, DigestKey: workflows.DigestWorkflowID(tenantID, "comments", "ada", ""), StepPath: "0",
		Data: map[string]any{"text": "lost?"}, AcceptedAt: at, BodyHash: k[:], DedupUntil: at.Add(time.Hour)})
	if err != nil || acc.Duplicate {
		t.Fatalf("accept: %+v %v", acc, err)
	}
	if r := h.MustDo(http.StatusOK, http.MethodGet, "/v1/notifications/"+id, key, nil); r.Str("status") != "digested" || digestOf(r)["status"] != "open" {
		t.Fatalf("before the sweep: %s", r.Body)
	}
	// The sweep is global (other tests' rows may be overdue too): what counts
	// is that this tenant's row was overdue before and is not after.
	overdue := func(olderThan time.Time) int {
		t.Helper()
		all, err := h.Store.OverdueDigests(ctx, olderThan, 10000)
		if err != nil {
			t.Fatal(err)
		}
		mine := 0
		for _, d := range all {
			if d.TenantID == tenantID {
				mine++
			}
		}
		return mine
	}
	if got := overdue(time.Now().Add(-activities.DigestSweepGrace)); got != 1 {
		t.Fatalf("%d overdue digests of the tenant before the sweep, want 1", got)
	}
	if n, err := activities.SweepDigestEvents(ctx, h.Activities(), time.Now().Add(-activities.DigestSweepGrace)); err != nil || n < 1 {
		t.Fatalf("sweep: %d digests signalled, %v; want at least 1", n, err)
	}
	// The commentsFlow digest has a 5 s window: the swept event is sent with it.
	h.Eventually(30*time.Second, "the swept event's digest sent", func() bool {
		r := h.MustDo(http.StatusOK, http.MethodGet, "/v1/notifications/"+id, key, nil)
		return digestOf(r)["sent"] == true
	})
	if got := overdue(time.Now()); got != 0 {
		t.Fatalf("%d overdue digests of the tenant after its digest was sent, want 0", got)
	}
}
