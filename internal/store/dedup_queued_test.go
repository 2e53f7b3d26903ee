package store_test

import (
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/internal/store"
)

// The ledger answers a duplicate from PostgreSQL alone only once the run has
// recorded its notification: a row still queued was written by the accept
// path before its 202 (migration 0160), and its run may never record it
// (terminated, or failing before its first activity), so the workflow start
// decides; once the row is sending, the ledger answers.
func TestLedgerLeavesAQueuedOriginalToTheStart(t *testing.T) {
	st, _, ctx := txStoreWithTx(t)
	tn, _ := mustTenant(t, st, ctx)
	now := time.Now().UTC().Truncate(time.Microsecond)
	key := ids.IdempotencyKeyHash("queued-original")
	id := ids.NotificationID(key, v7(now, "0123456789abcdef0q"))
	body := []byte("body-hash")
	until := now.Add(time.Hour)
	n := store.Notification{TenantID: tn.ID, ID: id, UserID: "u1", TemplateID: "t", Channels: []herald.Channel{herald.ChannelInApp},
		WorkflowID: ids.NotificationWorkflowID(tn.ID, key), DedupKeyHash: key.String(), Status: herald.NotificationQueued, AcceptedAt: now,
		Dedup: &store.Dedup{KeyHash: key.String(), BodyHash: body, FirstSeenAt: now, DedupUntil: &until}}
	if err := st.InsertNotification(ctx, n); err != nil {
		t.Fatal(err)
	}
	ask := func() store.LedgerAnswer {
		t.Helper()
		a, err := st.AnswerFromLedger(ctx, store.AnswerFromLedgerParams{TenantID: tn.ID, KeyHash: key.String(), BodyHash: body, SeenAt: now})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	if a := ask(); a.Outcome != "" {
		t.Fatalf("a queued original: the ledger answered %+v, want no answer (the start decides)", a)
	}
	n.Status = herald.NotificationSending // the run's RecordAccepted
	if err := st.InsertNotification(ctx, n); err != nil {
		t.Fatal(err)
	}
	if a := ask(); a.Outcome != store.LedgerDuplicate || a.NotificationID != id {
		t.Fatalf("a recorded original: the ledger answered %+v, want a duplicate of %s", a, id)
	}
}
