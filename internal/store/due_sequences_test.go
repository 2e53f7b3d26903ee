package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
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

// A notification's due number leaves notification_sequences for the
// notification's own row when it ends, by whichever statement records the ended
// status (the run's, a receipt's recomputation, a campaign page's), and comes
// back when a status opens it again, so an inbox write then gets it. Numbering an ended notification again (the accept path's numbering,
// late) returns its number and takes none; the history shows it throughout.
func TestDueNumberMovesOntoTheNotificationWhenItEnds(t *testing.T) {
	st, tx, ctx := txStoreWithTx(t)
	tn, _ := mustTenant(t, st, ctx)
	if _, _, err := st.UpsertUser(ctx, store.User{TenantID: tn.ID, UserID: "u1"}); err != nil {
		t.Fatal(err)
	}
	v7 := func() string {
		t.Helper()
		u, err := uuid.NewV7()
		if err != nil {
			t.Fatal(err)
		}
		return u.String()
	}
	rows := func(id string) int {
		t.Helper()
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM notification_sequences WHERE tenant_id = $1 AND notification_id = $2`, tn.ID, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	shown := func(id string) int64 {
		t.Helper()
		n, err := st.GetNotification(ctx, tn.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		if n.DueSeq == nil {
			t.Fatalf("%s shows no due number", id)
		}
		return *n.DueSeq
	}
	var notes []string
	var recs []store.Notification
	for i := range 4 {
		runID := v7()
		id := ids.NotificationID(ids.IdempotencyKeyHash(fmt.Sprintf("key-%d", i)), runID)
		notes = append(notes, id)
		n := store.Notification{TenantID: tn.ID, ID: id, UserID: "u1", TemplateID: "tpl", Channels: []herald.Channel{herald.ChannelInApp},
			WorkflowID: "wf-" + id, RunID: runID, DedupKeyHash: "k", Status: herald.NotificationQueued, AcceptedAt: time.Now(), Due: true}
		recs = append(recs, n)
		if err := st.InsertNotification(ctx, n); err != nil {
			t.Fatal(err)
		}
		if got := shown(id); got != int64(i+1) || rows(id) != 1 {
			t.Fatalf("notification %d: number %d, %d sequence rows; want %d, 1", i, got, rows(id), i+1)
		}
	}

	// The run's status write: sending keeps the row, sent moves the number.
	a := notes[0]
	if err := st.SetNotificationStatus(ctx, tn.ID, a, herald.NotificationSending); err != nil {
		t.Fatal(err)
	}
	if rows(a) != 1 {
		t.Fatal("a notification still sending lost its sequence row")
	}
	if err := st.SetNotificationStatus(ctx, tn.ID, a, herald.NotificationSent); err != nil {
		t.Fatal(err)
	}
	if rows(a) != 0 || shown(a) != 1 {
		t.Fatalf("ended: %d sequence rows, number %d; want 0 and 1", rows(a), shown(a))
	}
	// Numbered again after it ended: its number, none taken.
	if seq, err := st.AssignDue(ctx, tn.ID, "u1", a); err != nil || seq != 1 {
		t.Fatalf("AssignDue of an ended notification = %d, %v; want 1", seq, err)
	}
	// Recorded again after it ended (a replayed workflow task): no number taken.
	if err := st.InsertNotification(ctx, recs[0]); err != nil {
		t.Fatal(err)
	}
	if rows(a) != 0 {
		t.Fatal("numbering or recording an ended notification again wrote a sequence row")
	}
	if seq, err := st.DueSequence(ctx, tn.ID, a); err != nil || seq == nil || *seq != 1 {
		t.Fatalf("DueSequence of an ended notification = %v, %v; want 1", seq, err)
	}

	// A redrive opens it again: the row comes back with the same number, and
	// ends again with it.
	if err := st.SetNotificationStatus(ctx, tn.ID, a, herald.NotificationSending); err != nil {
		t.Fatal(err)
	}
	if rows(a) != 1 {
		t.Fatal("reopened: no sequence row")
	}
	if _, err := st.DeliverToInbox(ctx, store.NewInboxItem{TenantID: tn.ID, UserID: "u1", NotificationID: a, Title: "a", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	items, _, err := st.ListInbox(ctx, store.InboxQuery{TenantID: tn.ID, UserID: "u1", Limit: 10})
	if err != nil || len(items) != 1 || items[0].Sequence != 1 {
		t.Fatalf("the redriven inbox item: %+v, %v; want sequence 1", items, err)
	}

	// A receipt's recomputation from the deliveries (in_app delivered above).
	if status, err := st.RecomputeNotificationStatus(ctx, tn.ID, a); err != nil || !status.Ended() {
		t.Fatalf("recomputed %q, %v; want an ended status", status, err)
	}
	if rows(a) != 0 || shown(a) != 1 {
		t.Fatalf("recomputed: %d sequence rows, number %d; want 0 and 1", rows(a), shown(a))
	}

	// A campaign page's recomputation, several at once: the ended ones move,
	// the one still in flight keeps its row.
	for _, id := range notes[1:3] {
		if _, err := st.UpdateDelivery(ctx, tn.ID, id, herald.ChannelInApp, store.DeliveryUpdate{Status: herald.DeliveryFailed}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.RecomputeNotificationStatuses(ctx, tn.ID, notes[1:]); err != nil {
		t.Fatal(err)
	}
	for i, id := range notes[1:3] {
		if rows(id) != 0 || shown(id) != int64(i+2) {
			t.Fatalf("notification %d after the page: %d sequence rows, number %d; want 0 and %d", i+1, rows(id), shown(id), i+2)
		}
	}
	if rows(notes[3]) != 1 || shown(notes[3]) != 4 {
		t.Fatalf("the pending notification: %d sequence rows, number %d; want 1 and 4", rows(notes[3]), shown(notes[3]))
	}
	// The user's next number follows: nothing was given back or taken twice.
	if seq, err := st.AssignDue(ctx, tn.ID, "u1", "next"); err != nil || seq != 5 {
		t.Fatalf("the next number = %d, %v; want 5", seq, err)
	}
}
