package activities_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
)

// TestOrderedBurstSurvivesWorkerSIGKILL SIGKILLs a real worker process twice
// while it delivers an ordered burst to one user and checks, after a fresh
// worker finished, that the provider got every notification once, in accept
// order. The tenant has no provider: the worker's sandbox fallback records the
// sends (with an idempotency key, so a send repeated after a crash shows as a
// second call of one message, not a second message).
func TestOrderedBurstSurvivesWorkerSIGKILL(t *testing.T) {
	bin, f, h := crashHarness(t, apitest.Options{})
	tenantID, key := h.TenantWith("crash-order", "order_shipped")
	h.PutUser(key, "ada", map[string]any{"email": "ada@example.com"})
	w := startWorkerProcess(t, bin, h, f, "HERALD_SANDBOX_FALLBACK=true")

	const n = 40
	var ids []string
	for i := range n {
		ids = append(ids, sendOrdered(h, key, "order_shipped", "ada", fmt.Sprintf("crash #%02d", i), "user"))
	}
	ctx := context.Background()
	recorded := func() int {
		ms, err := h.Sandbox.List(ctx, tenantID, 500)
		if err != nil {
			t.Fatal(err)
		}
		return len(ms)
	}
	for _, at := range []int{8, 20} {
		h.Eventually(90*time.Second, fmt.Sprintf("%d sends before the kill", at), func() bool { return recorded() >= at })
		w.kill()
		t.Logf("killed the worker with %d of %d sent", recorded(), n)
		w.start()
	}
	for _, id := range ids {
		h.AwaitChannel(key, id, "email", "sent", "", 120*time.Second)
	}
	ms, err := h.Sandbox.List(ctx, tenantID, 500)
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(ms) // oldest first
	var got []string
	repeats := 0
	for _, m := range ms {
		got = append(got, m.NotificationID)
		repeats += m.Calls - 1
	}
	if !slices.Equal(got, ids) {
		t.Fatalf("after two SIGKILLs the provider got %d messages, want the %d in accept order:\n got %v\nwant %v", len(got), n, got, ids)
	}
	t.Logf("%d messages in accept order, 0 lost, 0 sent twice (%d sends repeated after a kill, answered by the idempotency key)", len(got), repeats)
}
