package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/testenv"
)

// A user's notifications are numbered 1, 2, 3 in the order they are numbered;
// numbering one again (the run after the accept path, a retry) returns its
// number and takes none; another user counts on its own; a notification
// recorded as due is numbered by the insert unless it has its number; a
// scheduled one is not numbered until AssignDue.
func TestDueSequenceNumbersOncePerNotification(t *testing.T) {
	st, ctx := txStore(t)
	tn, _ := mustTenant(t, st, ctx)
	assign := func(user, id string, want int64) {
		t.Helper()
		got, err := st.AssignDue(ctx, tn.ID, user, id)
		if err != nil || got != want {
			t.Fatalf("AssignDue(%s, %s) = %d, %v; want %d", user, id, got, err, want)
		}
	}
	assign("u1", "a", 1)
	assign("u1", "b", 2)
	assign("u1", "a", 1) // again: the same number, none taken
	assign("u2", "x", 1)
	assign("u1", "c", 3)

	record := func(id string, due bool) {
		t.Helper()
		status := herald.NotificationSending
		if !due {
			status = herald.NotificationScheduled
		}
		n := store.Notification{TenantID: tn.ID, ID: id, UserID: "u1", TemplateID: "tpl", Channels: []herald.Channel{herald.ChannelInApp},
			WorkflowID: "wf-" + id, RunID: "run", DedupKeyHash: "k", Status: status, AcceptedAt: time.Now(), Due: due}
		for range 2 { // a retried record changes nothing
			if err := st.InsertNotification(ctx, n); err != nil {
				t.Fatal(err)
			}
		}
	}
	seqOf := func(id string) int64 {
		t.Helper()
		n, err := st.GetNotification(ctx, tn.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		if n.DueSeq == nil {
			return 0
		}
		return *n.DueSeq
	}
	record("b", true) // numbered by the accept path already
	record("d", true) // not: numbered by its record
	record("s", false)
	if b, d, s := seqOf("b"), seqOf("d"), seqOf("s"); b != 2 || d != 4 || s != 0 {
		t.Fatalf("sequences b=%d d=%d s=%d, want 2 4 0 (the scheduled one unnumbered)", b, d, s)
	}
	assign("u1", "s", 5)
	if s := seqOf("s"); s != 5 {
		t.Fatalf("the scheduled notification's sequence once due = %d, want 5", s)
	}
	if seq, err := st.DueSequence(ctx, tn.ID, "never"); err != nil || seq != nil {
		t.Fatalf("DueSequence of an unknown notification = %v, %v", seq, err)
	}
}

// Concurrent numberings (each its own transaction, as the accept path's) of one
// user's notifications, some of them numbered twice at once: 1 … N, no gap, no
// repeat, each notification one number.
func TestDueSequenceConcurrentNumberingIsGapFree(t *testing.T) {
	pool := testenv.Pool(t)
	st := store.New(pool)
	ctx := context.Background()
	tn, _, err := st.CreateTenant(ctx, "due-concurrent")
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	got := make([]int64, 2*n)
	errs := make(chan error, 2*n)
	done := make(chan struct{})
	for i := range 2 * n {
		go func() {
			defer func() { done <- struct{}{} }()
			seq, err := st.AssignDue(ctx, tn.ID, "u1", fmt.Sprintf("n%03d", i%n)) // every id twice
			if err != nil {
				errs <- err
			}
			got[i] = seq
		}()
	}
	for range 2 * n {
		<-done
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	owner := map[int64]int{}
	for i := range n {
		if got[i] != got[i+n] {
			t.Fatalf("n%03d numbered twice: %d and %d", i, got[i], got[i+n])
		}
		if j, dup := owner[got[i]]; dup {
			t.Fatalf("n%03d and n%03d both have %d", i, j, got[i])
		}
		owner[got[i]] = i
	}
	for s := int64(1); s <= n; s++ {
		if _, ok := owner[s]; !ok {
			t.Fatalf("no notification has %d: a gap", s)
		}
	}
}

// Inbox items carry their notification's number; one written below the highest
// already in the inbox is late in its item.created event; the list is by number.
func TestInboxItemsCarryTheDueSequenceAndLateness(t *testing.T) {
	st, ctx := txStore(t)
	tn, _ := mustTenant(t, st, ctx)
	for _, id := range []string{"n1", "n2", "n3"} {
		newNotification(t, st, ctx, tn.ID, "u1", id)
		if _, err := st.AssignDue(ctx, tn.ID, "u1", id); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"n1", "n3", "n2"} { // n2's write was retried
		if _, err := st.DeliverToInbox(ctx, store.NewInboxItem{TenantID: tn.ID, UserID: "u1", NotificationID: id, Title: id, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	events, _, err := st.InboxEventsAfter(ctx, tn.ID, "u1", 0, 10, 1<<20)
	if err != nil || len(events) != 3 {
		t.Fatalf("events: %v %v", events, err)
	}
	for i, want := range []struct {
		id   string
		seq  int64
		late bool
	}{{"n1", 1, false}, {"n3", 3, false}, {"n2", 2, true}} {
		e := events[i]
		if *e.NotificationID != want.id || e.Item.Sequence != want.seq || e.Late == nil || *e.Late != want.late {
			t.Fatalf("event %d: %s sequence %d late %v, want %+v", i, *e.NotificationID, e.Item.Sequence, e.Late, want)
		}
	}
	items, _, err := st.ListInbox(ctx, store.InboxQuery{TenantID: tn.ID, UserID: "u1", Limit: 10})
	if err != nil || len(items) != 3 || items[0].NotificationID != "n3" || items[1].NotificationID != "n2" || items[2].NotificationID != "n1" {
		t.Fatalf("list: %+v %v", items, err)
	}
}

// Pruning a notification (retention) deletes its number with it; the user's
// counter stays, so the next notification does not reuse it.
func TestPruneNotificationsTakesTheirNumbers(t *testing.T) {
	st, ctx := txStore(t)
	tn, _ := mustTenant(t, st, ctx)
	if _, _, err := st.UpsertUser(ctx, store.User{TenantID: tn.ID, UserID: "u1"}); err != nil {
		t.Fatal(err)
	}
	n := store.Notification{TenantID: tn.ID, ID: "old", UserID: "u1", TemplateID: "tpl", Channels: []herald.Channel{herald.ChannelInApp},
		WorkflowID: "wf-old", RunID: "run", DedupKeyHash: "k", Status: herald.NotificationDelivered, AcceptedAt: time.Now().Add(-time.Hour), Due: true}
	if err := st.InsertNotification(ctx, n); err != nil {
		t.Fatal(err)
	}
	if seq, err := st.DueSequence(ctx, tn.ID, "old"); err != nil || seq == nil || *seq != 1 {
		t.Fatalf("numbered: %v %v", seq, err)
	}
	if gone, err := st.Prune(ctx, store.PruneNotifications, tn.ID, time.Now(), 100); err != nil || gone != 1 {
		t.Fatalf("prune: %d %v", gone, err)
	}
	if seq, err := st.DueSequence(ctx, tn.ID, "old"); err != nil || seq != nil {
		t.Fatalf("the pruned notification's number is still there: %v %v", seq, err)
	}
	if seq, err := st.AssignDue(ctx, tn.ID, "u1", "new"); err != nil || seq != 2 {
		t.Fatalf("the next number after pruning = %d, %v; want 2", seq, err)
	}
}
