package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/schema"
)

// The item.created event is carried by the inbox row (0155), not stored in
// inbox_events; these tests pin what a stream reads from it.

// numbered gives notification id its due sequence, as the accept path would.
func numbered(t *testing.T, tx pgx.Tx, tenantID, userID, id string, seq int64) {
	t.Helper()
	if _, err := tx.Exec(context.Background(), `INSERT INTO notification_sequences (tenant_id, notification_id, user_id, seq) VALUES ($1, $2, $3, $4)`,
		tenantID, id, userID, seq); err != nil {
		t.Fatal(err)
	}
}

func storedCreated(t *testing.T, tx pgx.Tx, tenantID, userID string) int {
	t.Helper()
	var n int
	if err := tx.QueryRow(context.Background(), `SELECT count(*) FROM inbox_events WHERE tenant_id = $1 AND user_id = $2 AND kind = $3`,
		tenantID, userID, herald.InboxItemCreated).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func seqsOf(events []store.InboxEvent) string {
	var out []string
	for _, e := range events {
		out = append(out, fmt.Sprintf("%d:%s", e.Seq, e.Kind))
	}
	return fmt.Sprint(out)
}

// A delivery writes no inbox_events row, yet the stream reads its
// item.created event with the seq, counts, late flag, time and item JSON the
// stored event had: byte for byte the JSON a client got before.
func TestInboxCreatedEventIsCarriedByItsRow(t *testing.T) {
	st, tx, ctx := txStoreWithTx(t)
	tn, _ := mustTenant(t, st, ctx)
	if err := st.InsertUsers(ctx, tn.ID, []store.User{{UserID: "u1"}}); err != nil {
		t.Fatal(err)
	}
	numbered(t, tx, tn.ID, "u1", "n1", 7)
	at := time.Date(2026, 12, 1, 9, 30, 0, 123456789, time.FixedZone("CET", 3600))
	if _, err := st.DeliverToInbox(ctx, store.NewInboxItem{TenantID: tn.ID, UserID: "u1", NotificationID: "n1", Title: "Shipped \"x\" <b>",
		Body: "Your order ✓", ActionURL: "https://shop.example/o/1", Category: "orders", CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	if n := storedCreated(t, tx, tn.ID, "u1"); n != 0 {
		t.Fatalf("%d item.created rows stored in inbox_events, want 0 (the inbox row carries it)", n)
	}
	var txTime time.Time
	if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&txTime); err != nil {
		t.Fatal(err)
	}
	events, cut, err := st.InboxEventsAfter(ctx, tn.ID, "u1", 0, 100, 1<<20)
	if err != nil || cut || len(events) != 1 {
		t.Fatalf("events %s cut %v, %v", seqsOf(events), cut, err)
	}
	url, id, late := "https://shop.example/o/1", "n1", false
	want := store.InboxEvent{Seq: 1, Kind: herald.InboxItemCreated, NotificationID: &id, Late: &late,
		Item: &store.InboxItem{NotificationID: "n1", Title: "Shipped \"x\" <b>", Body: "Your order ✓", ActionURL: &url, Category: "orders",
			CreatedAt: at.UTC().Truncate(time.Microsecond), Sequence: 7},
		Counts: store.InboxCounts{Total: 1, Unread: 1, Unseen: 1}, CreatedAt: txTime}
	got, _ := json.Marshal(events[0])
	wantJSON, _ := json.Marshal(want)
	if string(got) != string(wantJSON) {
		t.Fatalf("event\n got %s\nwant %s", got, wantJSON)
	}
	// Marked read since: the created event still shows the item as it was
	// created; the item.updated event after it carries the change.
	if _, err := st.MarkInboxRead(ctx, tn.ID, "u1", "n1"); err != nil {
		t.Fatal(err)
	}
	events, _, err = st.InboxEventsAfter(ctx, tn.ID, "u1", 0, 100, 1<<20)
	if err != nil || seqsOf(events) != "[1:item.created 2:item.updated]" {
		t.Fatalf("events %s, %v", seqsOf(events), err)
	}
	if again, _ := json.Marshal(events[0]); string(again) != string(wantJSON) {
		t.Fatalf("created event after the read\n got %s\nwant %s", again, wantJSON)
	}
	if events[1].Item.ReadAt == nil || events[1].Counts.Unread != 0 {
		t.Fatalf("updated event %+v", events[1])
	}
}

// Derived created events and stored events of every other kind come back as
// one sequence in seq order, paged by count from any id; a late item is
// marked late.
func TestInboxCreatedEventsMergeWithStoredEventsInSeqOrder(t *testing.T) {
	st, tx, ctx := txStoreWithTx(t)
	tn, _ := mustTenant(t, st, ctx)
	if err := st.InsertUsers(ctx, tn.ID, []store.User{{UserID: "u1"}}); err != nil {
		t.Fatal(err)
	}
	deliver := func(id string, due int64) {
		t.Helper()
		numbered(t, tx, tn.ID, "u1", id, due)
		if _, err := st.DeliverToInbox(ctx, store.NewInboxItem{TenantID: tn.ID, UserID: "u1", NotificationID: id, Title: id, Body: "b", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	deliver("n2", 2)                                                    // 1
	if _, err := st.MarkInboxRead(ctx, tn.ID, "u1", "n2"); err != nil { // 2
		t.Fatal(err)
	}
	deliver("n3", 3)                                                      // 3
	if _, _, err := st.MarkAllInbox(ctx, tn.ID, "u1", true); err != nil { // 4
		t.Fatal(err)
	}
	deliver("n1", 1)                                                                                    // 5: late, below n3
	if _, _, err := st.UpdateInboxItem(ctx, tn.ID, "u1", "n1", herald.InboxActionArchive); err != nil { // 6
		t.Fatal(err)
	}
	if n := storedCreated(t, tx, tn.ID, "u1"); n != 0 {
		t.Fatalf("%d item.created rows stored", n)
	}
	all := "[1:item.created 2:item.updated 3:item.created 4:all.read 5:item.created 6:item.updated]"
	for _, tc := range []struct {
		after int64
		limit int
		want  string
	}{
		{0, 100, all},
		{0, 3, "[1:item.created 2:item.updated 3:item.created]"},
		{2, 2, "[3:item.created 4:all.read]"},
		{4, 100, "[5:item.created 6:item.updated]"},
		{6, 100, "[]"},
	} {
		events, _, err := st.InboxEventsAfter(ctx, tn.ID, "u1", tc.after, tc.limit, 1<<20)
		if err != nil || seqsOf(events) != tc.want {
			t.Errorf("after %d limit %d: %s (%v), want %s", tc.after, tc.limit, seqsOf(events), err, tc.want)
		}
	}
	events, _, err := st.InboxEventsAfter(ctx, tn.ID, "u1", 0, 100, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	counts := func(e store.InboxEvent) string {
		return fmt.Sprintf("%d/%d/%d", e.Counts.Total, e.Counts.Unread, e.Counts.Unseen)
	}
	var got []string
	for _, e := range events {
		s := counts(e)
		if e.Late != nil {
			s += fmt.Sprintf(" late=%v", *e.Late)
		}
		got = append(got, s)
	}
	if want := "[1/1/1 late=false 1/0/0 2/1/1 late=false 2/0/0 3/1/1 late=true 2/0/0]"; fmt.Sprint(got) != want {
		t.Fatalf("counts %v, want %s", got, want)
	}
	if c, _, _ := st.GetInboxCounts(ctx, tn.ID, "u1"); c != events[len(events)-1].Counts {
		t.Fatalf("counts %+v, last event's %+v", c, events[len(events)-1].Counts)
	}
}

// An item written before 0155 has its item.created event stored in
// inbox_events and a NULL ev_seq: the stream reads that event once, between
// the derived events around it.
func TestInboxCreatedEventStoredBeforeTheMigrationIsReadOnce(t *testing.T) {
	st, tx, ctx := txStoreWithTx(t)
	tn, _ := mustTenant(t, st, ctx)
	if err := st.InsertUsers(ctx, tn.ID, []store.User{{UserID: "u1"}}); err != nil {
		t.Fatal(err)
	}
	deliver := func(id string) {
		t.Helper()
		if _, err := st.DeliverToInbox(ctx, store.NewInboxItem{TenantID: tn.ID, UserID: "u1", NotificationID: id, Title: id, Body: "b", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	deliver("n1") // 1, derived
	// n2 as the release before wrote it: the row without an event, the event
	// stored (0121's short form), the counts after it.
	if _, err := tx.Exec(ctx, `
		WITH s AS (UPDATE inbox_state SET seq = seq + 1, total = total + 1, unread = unread + 1, unseen = unseen + 1
		           WHERE tenant_id = $1 AND user_id = 'u1' RETURNING seq, total, unread, unseen),
		     i AS (INSERT INTO inbox (tenant_id, user_id, notification_id, title, body, created_at) VALUES ($1, 'u1', 'n2', 'n2', 'b', now()))
		INSERT INTO inbox_events (tenant_id, user_id, seq, kind, notification_id, item, total, unread, unseen)
		SELECT $1, 'u1', s.seq, 'item.created', 'n2', jsonb_build_object('t', 'n2', 'b', 'b', 'at', now()), s.total, s.unread, s.unseen FROM s`, tn.ID); err != nil {
		t.Fatal(err)
	}
	deliver("n3") // 3, derived
	if n := storedCreated(t, tx, tn.ID, "u1"); n != 1 {
		t.Fatalf("%d item.created rows stored, want n2's only", n)
	}
	events, _, err := st.InboxEventsAfter(ctx, tn.ID, "u1", 0, 100, 1<<20)
	if err != nil || seqsOf(events) != "[1:item.created 2:item.created 3:item.created]" {
		t.Fatalf("events %s, %v", seqsOf(events), err)
	}
	for i, id := range []string{"n1", "n2", "n3"} {
		if e := events[i]; *e.NotificationID != id || e.Item == nil || e.Item.NotificationID != id || e.Item.Title != id || e.Counts.Total != int64(i+1) {
			t.Fatalf("event %d: %+v %+v", e.Seq, e, e.Item)
		}
	}
}

// An item the cap removes takes its created event with it: the log has a
// hole where it was (the stream refetches on it: api
// TestInboxStreamRefetchesOverACappedAwayCreatedEvent), and the events a
// reader after it gets are the ones still true.
func TestInboxCappedItemTakesItsCreatedEvent(t *testing.T) {
	st, _, ctx := txStoreWithTx(t)
	st.SetInboxCap(2)
	tn, _ := mustTenant(t, st, ctx)
	if err := st.InsertUsers(ctx, tn.ID, []store.User{{UserID: "u1"}}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"n_b", "n_a", "n_c"} { // the feed's order: n_c, n_b, n_a
		if _, err := st.DeliverToInbox(ctx, store.NewInboxItem{TenantID: tn.ID, UserID: "u1", NotificationID: id, Title: id, Body: "b", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	// n_a (event 2) went when n_c came: items.removed 3, n_c's created 4.
	events, _, err := st.InboxEventsAfter(ctx, tn.ID, "u1", 0, 100, 1<<20)
	if err != nil || seqsOf(events) != "[1:item.created 3:items.removed 4:item.created]" {
		t.Fatalf("events %s, %v", seqsOf(events), err)
	}
	if e := events[2]; *e.NotificationID != "n_c" || e.Counts.Total != 2 {
		t.Fatalf("n_c's event %+v", e)
	}
	// A new item past the cap's edge at once is delivered, never shown, and
	// takes no seq.
	if ins, err := st.InsertInboxItems(ctx, []store.NewInboxItem{{TenantID: tn.ID, UserID: "u1", NotificationID: "n_0", Title: "old", Body: "b", CreatedAt: time.Now()}}); err != nil || !ins[0] {
		t.Fatalf("past the edge: %v %v", ins, err)
	}
	if n, _ := st.CountInbox(ctx, tn.ID, "u1", "n_0"); n != 0 {
		t.Fatalf("the item past the edge is in the inbox")
	}
	if c, seq, _ := st.GetInboxCounts(ctx, tn.ID, "u1"); seq != 4 || c.Total != 2 {
		t.Fatalf("after the item past the edge: seq %d counts %+v", seq, c)
	}
}

// Migrating down from 0155 puts the created events the inbox rows carry back
// into inbox_events, only those within the user's last InboxEventRetention
// seqs (the release before finds a hole only before a page's first event: an
// older one brought back would hide the events pruned after it), and one
// whose week partition was dropped already is left out instead of failing
// the migration.
func TestInboxCreatedEventsMigrateDownWithinTheWindow(t *testing.T) {
	ctx := context.Background()
	dbURL, pool, st, tn := databaseAt(t, 155, "created-events-down")
	if _, _, err := st.UpsertUser(ctx, store.User{TenantID: tn.ID, UserID: "ada"}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO inbox_state (tenant_id, user_id, seq, total, unread, unseen) VALUES ($1, 'ada', 3000, 3, 3, 3)`, tn.ID); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	for _, it := range []struct {
		id    string
		seq   int64
		evAt  time.Time
		title string
	}{
		{"n_old", 1500, now, "pruned by then"},                       // <= 3000 - 1000
		{"n_kept", 2500, now, "kept"},                                // within the window
		{"n_gone", 2600, now.AddDate(-3, 0, 0), "partition dropped"}, // no week partition that old
	} {
		if _, err := pool.Exec(ctx, `
			INSERT INTO inbox (tenant_id, user_id, notification_id, title, body, category, created_at, due_seq, ev_seq, ev_at, ev_total, ev_unread, ev_unseen, ev_late)
			VALUES ($1, 'ada', $2, $3, 'b', '', $4, 0, $5, $4, 1, 1, 1, false)`, tn.ID, it.id, it.title, it.evAt, it.seq); err != nil {
			t.Fatal(err)
		}
	}
	if err := schema.Down(dbURL, 1); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, `SELECT seq, notification_id, item->>'t' FROM inbox_events WHERE tenant_id = $1 AND kind = $2 ORDER BY seq`,
		tn.ID, herald.InboxItemCreated)
	if err != nil {
		t.Fatal(err)
	}
	type ev struct {
		seq   int64
		id    string
		title string
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ev, error) {
		var e ev
		return e, r.Scan(&e.seq, &e.id, &e.title)
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []ev{{2500, "n_kept", "kept"}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("created events after migrating down: %v, want %v", got, want)
	}
	var defaults int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_partition_tree('inbox_events') p JOIN pg_class c ON c.oid = p.relid
		WHERE c.relname = 'inbox_events_down_0155'`).Scan(&defaults); err != nil {
		t.Fatal(err)
	}
	if defaults != 0 {
		t.Fatal("the migration's default partition of inbox_events is still there")
	}
}
