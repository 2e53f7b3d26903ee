package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/testenv"
)

// recordDue records a notification as the accept path and RecordAccepted do
// (due now: numbered by the insert; scheduled: not), twice (a retry).
func recordDue(t *testing.T, st *store.Store, ctx context.Context, tenantID, user, id string, due bool, at time.Time) {
	t.Helper()
	status := herald.NotificationSending
	if !due {
		status = herald.NotificationScheduled
	}
	n := store.Notification{TenantID: tenantID, ID: id, UserID: user, TemplateID: "tpl", Channels: []herald.Channel{herald.ChannelInApp},
		WorkflowID: "wf-" + id, RunID: "run", DedupKeyHash: "k", Status: status, AcceptedAt: at, Due: due}
	for range 2 { // a retried record (or the run after the accept path) changes nothing
		if err := st.InsertNotification(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
}

// A user's notifications are numbered 1, 2, 3 in the order they are numbered,
// on their rows (migration 0160: no notification_sequences row); recording or
// numbering one again (the run after the accept path, a retry) keeps its
// number and takes none; another user counts on its own; a scheduled one is
// not numbered until AssignDue; a notification numbered before 0160 (its
// number in notification_sequences) keeps that number.
func TestDueSequenceNumbersOncePerNotification(t *testing.T) {
	st, tx, ctx := txStoreWithTx(t)
	tn, _ := mustTenant(t, st, ctx)
	now := time.Now()
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
	assign := func(user, id string, want int64) {
		t.Helper()
		got, err := st.AssignDue(ctx, tn.ID, user, id)
		if err != nil || got != want {
			t.Fatalf("AssignDue(%s, %s) = %d, %v; want %d", user, id, got, err, want)
		}
	}
	recordDue(t, st, ctx, tn.ID, "u1", "a", true, now)
	recordDue(t, st, ctx, tn.ID, "u1", "b", true, now)
	recordDue(t, st, ctx, tn.ID, "u2", "x", true, now)
	recordDue(t, st, ctx, tn.ID, "u1", "s", false, now)
	recordDue(t, st, ctx, tn.ID, "u1", "c", true, now.Add(-time.Minute))
	if a, b, c, s, x := seqOf("a"), seqOf("b"), seqOf("c"), seqOf("s"), seqOf("x"); a != 1 || b != 2 || c != 3 || s != 0 || x != 1 {
		t.Fatalf("sequences a=%d b=%d c=%d s=%d x=%d, want 1 2 3 0 1 (the scheduled one unnumbered)", a, b, c, s, x)
	}
	assign("u1", "a", 1) // numbered already: the same number, none taken
	assign("u1", "s", 4)
	assign("u1", "s", 4)
	if s := seqOf("s"); s != 4 {
		t.Fatalf("the scheduled notification's sequence once due = %d, want 4", s)
	}
	if seq, err := st.DueSequence(ctx, tn.ID, "c"); err != nil || seq == nil || *seq != 3 {
		t.Fatalf("DueSequence(c) = %v, %v; want 3", seq, err)
	}
	var legacy int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM notification_sequences WHERE tenant_id = $1`, tn.ID).Scan(&legacy); err != nil || legacy != 0 {
		t.Fatalf("notification_sequences rows written: %d, %v; want none", legacy, err)
	}
	// Numbered before 0160: its number is in notification_sequences, and
	// neither a retried record nor AssignDue numbers it again.
	if _, err := tx.Exec(ctx, `INSERT INTO notification_sequences (tenant_id, notification_id, user_id, seq) VALUES ($1, 'old', 'u1', 5)`, tn.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE due_sequences SET seq = 5 WHERE tenant_id = $1 AND user_id = 'u1'`, tn.ID); err != nil {
		t.Fatal(err)
	}
	recordDue(t, st, ctx, tn.ID, "u1", "old", true, now)
	assign("u1", "old", 5)
	if old := seqOf("old"); old != 5 {
		t.Fatalf("the notification numbered before 0160 reads %d, want 5", old)
	}
	recordDue(t, st, ctx, tn.ID, "u1", "d", true, now)
	if d := seqOf("d"); d != 6 {
		t.Fatalf("the next number = %d, want 6", d)
	}
	if seq, err := st.DueSequence(ctx, tn.ID, "never"); err != nil || seq != nil {
		t.Fatalf("DueSequence of an unknown notification = %v, %v", seq, err)
	}
	if seq, err := st.AssignDue(ctx, tn.ID, "u1", "never"); err != nil || seq != 0 {
		t.Fatalf("AssignDue of an unrecorded notification = %d, %v; want 0", seq, err)
	}
}

// Concurrent numberings (each its own transaction) of one user's
// notifications: each due one written twice at once (the accept path and its
// run's first activity), each scheduled one numbered twice at once (AssignDue
// and its retry), and campaign batches: 1 … N, no gap, no repeat, each
// notification one number.
func TestDueSequenceConcurrentNumberingIsGapFree(t *testing.T) {
	pool := testenv.Pool(t)
	st := store.New(pool)
	ctx := context.Background()
	tn, _, err := st.CreateTenant(ctx, "due-concurrent")
	if err != nil {
		t.Fatal(err)
	}
	const due, scheduled, batches, perBatch = 120, 60, 6, 10
	at := time.Now()
	// The scheduled ones are recorded first, unnumbered.
	for i := range scheduled {
		recordDue(t, st, ctx, tn.ID, "u1", fmt.Sprintf("s%03d", i), false, at)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4*(due+scheduled+batches))
	run := func(f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil {
				errs <- err
			}
		}()
	}
	for i := range due {
		n := store.Notification{TenantID: tn.ID, ID: fmt.Sprintf("n%03d", i), UserID: "u1", TemplateID: "tpl",
			Channels: []herald.Channel{herald.ChannelInApp}, WorkflowID: "wf", RunID: "run", DedupKeyHash: "k",
			Status: herald.NotificationSending, AcceptedAt: at.Add(time.Duration(i) * time.Microsecond), Due: true}
		for range 2 { // the API and the activity
			run(func() error { return st.InsertNotification(ctx, n) })
		}
	}
	for i := range scheduled {
		for range 2 {
			run(func() error { _, err := st.AssignDue(ctx, tn.ID, "u1", fmt.Sprintf("s%03d", i)); return err })
		}
	}
	for b := range batches {
		c := store.CampaignNotifications{TenantID: tn.ID, CampaignID: fmt.Sprintf("c%d", b), TemplateID: "tpl", WorkflowID: "wf",
			Channels: []herald.Channel{herald.ChannelInApp}, AcceptedAt: at}
		for i := range perBatch {
			c.NotificationIDs = append(c.NotificationIDs, fmt.Sprintf("c%d-%02d", b, i))
			c.UserIDs = append(c.UserIDs, "u1")
		}
		for range 2 { // a batch and its re-run
			run(func() error { return st.InsertCampaignNotifications(ctx, c) })
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, `SELECT id, due_seq FROM notifications WHERE tenant_id = $1`, tn.ID)
	if err != nil {
		t.Fatal(err)
	}
	owner := map[int64]string{}
	count := 0
	for rows.Next() {
		var id string
		var seq *int64
		if err := rows.Scan(&id, &seq); err != nil {
			t.Fatal(err)
		}
		count++
		if seq == nil {
			t.Fatalf("%s has no number", id)
		}
		if other, dup := owner[*seq]; dup {
			t.Fatalf("%s and %s both have %d", id, other, *seq)
		}
		owner[*seq] = id
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	total := due + scheduled + batches*perBatch
	if count != total {
		t.Fatalf("%d notification rows, want %d", count, total)
	}
	for s := int64(1); s <= int64(total); s++ {
		if _, ok := owner[s]; !ok {
			t.Fatalf("no notification has %d: a gap", s)
		}
	}
	var counter int64
	if err := pool.QueryRow(ctx, `SELECT seq FROM due_sequences WHERE tenant_id = $1 AND user_id = 'u1'`, tn.ID).Scan(&counter); err != nil || counter != int64(total) {
		t.Fatalf("the counter is at %d, %v; want %d (one step per notification)", counter, err, total)
	}
}

// Inbox items carry their notification's number; one written below the highest
// already in the inbox is late in its item.created event; the list is by number.
func TestInboxItemsCarryTheDueSequenceAndLateness(t *testing.T) {
	st, ctx := txStore(t)
	tn, _ := mustTenant(t, st, ctx)
	if _, _, err := st.UpsertUser(ctx, store.User{TenantID: tn.ID, UserID: "u1"}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"n1", "n2", "n3"} {
		recordDue(t, st, ctx, tn.ID, "u1", id, true, time.Now())
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
	recordDue(t, st, ctx, tn.ID, "u1", "new", true, time.Now())
	if seq, err := st.DueSequence(ctx, tn.ID, "new"); err != nil || seq == nil || *seq != 2 {
		t.Fatalf("the next number after pruning = %v, %v; want 2", seq, err)
	}
}
