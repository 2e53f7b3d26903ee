package store_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/retention"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/testenv"
)

// The inbox keeps exactly the newest cap items of a user while deliveries
// race: 16 writers insert 15 items each (every item its own transaction, as
// DeliverToInbox does) into one inbox capped at 100; the 100 kept are the 100
// newest, and the counters equal a recount.
func TestInboxKeepsExactlyTheNewestCapUnderConcurrentDeliveries(t *testing.T) {
	ctx := context.Background()
	st := store.New(testenv.Pool(t))
	st.SetInboxCap(100)
	tn, _, err := st.CreateTenant(ctx, "inbox-cap")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.UpsertUser(ctx, store.User{TenantID: tn.ID, UserID: "ada"}); err != nil {
		t.Fatal(err)
	}
	const writers, each = 16, 15
	base := time.Now().Add(-time.Hour).UTC().Truncate(time.Microsecond)
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				// Positions in the feed interleave across writers, so a late
				// writer often inserts an item older than items already kept.
				// (Items written without a due sequence order by their id.)
				pos := ((w*each + i) * 7919) % (writers * each)
				_, err := st.InsertInboxItems(ctx, []store.NewInboxItem{{TenantID: tn.ID, UserID: "ada",
					NotificationID: fmt.Sprintf("n_%04d", pos), Title: "t", Body: "b",
					CreatedAt: base.Add(time.Duration(pos) * time.Millisecond)}})
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	items, _, err := st.ListInbox(ctx, store.InboxQuery{TenantID: tn.ID, UserID: "ada", Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 100 {
		t.Fatalf("%d items kept, want exactly 100", len(items))
	}
	// The newest 100 created times are offsets 140..239 ms.
	for _, it := range items {
		if off := it.CreatedAt.Sub(base); off < 140*time.Millisecond {
			t.Fatalf("item %s at +%s kept, older than the newest 100", it.NotificationID, off)
		}
	}
	counts, _, err := st.GetInboxCounts(ctx, tn.ID, "ada")
	if err != nil {
		t.Fatal(err)
	}
	recount, err := st.RecountInbox(ctx, tn.ID, "ada")
	if err != nil || counts != recount || counts.Total != 100 {
		t.Fatalf("counters %+v, recount %+v (%v)", counts, recount, err)
	}
}

// A tenant's own smaller cap wins over the operator's; the walk applies a cap
// lowered after the items arrived, with the counts kept; the age limit drops
// older items only.
func TestInboxCapWalkAndAgeLimit(t *testing.T) {
	st, ctx := txStore(t)
	st.SetInboxCap(100)
	tn, _ := mustTenant(t, st, ctx)
	if _, _, err := st.UpsertUser(ctx, store.User{TenantID: tn.ID, UserID: "ada"}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	var ids []string
	for i := range 20 {
		id := fmt.Sprintf("n_%02d", i)
		ids = append(ids, id)
		if _, err := st.InsertInboxItems(ctx, []store.NewInboxItem{{TenantID: tn.ID, UserID: "ada", NotificationID: id,
			Title: "t", Body: "b", CreatedAt: now.Add(time.Duration(i-20) * time.Minute)}}); err != nil {
			t.Fatal(err)
		}
	}
	// The tenant lowers its cap to 12: the walk deletes the 8 oldest.
	if err := st.UpdateTenantSettings(ctx, tn.ID, func(ts *store.TenantSettings) { ts.Retention = retention.Tenant{InboxItems: 12} }); err != nil {
		t.Fatal(err)
	}
	n, next, more, err := st.PruneInboxCaps(ctx, tn.ID, "", 500, 500)
	if err != nil || n != 8 || next != "" || more {
		t.Fatalf("cap walk: %d deleted, next %q (more %v), %v", n, next, more, err)
	}
	// The age limit: items older than 5 minutes go (the 4 from -8 to -6 min… of the 12 kept, those before -5m).
	n, more, err = st.PruneInboxAge(ctx, tn.ID, now.Add(-5*time.Minute), 500)
	if err != nil || n != 7 || !more {
		t.Fatalf("age: %d deleted (more %v), %v", n, more, err)
	}
	if n, more, err := st.PruneInboxAge(ctx, tn.ID, now.Add(-5*time.Minute), 500); err != nil || n != 0 || more {
		t.Fatalf("age again: %d deleted (more %v), %v", n, more, err)
	}
	items, _, err := st.ListInbox(ctx, store.InboxQuery{TenantID: tn.ID, UserID: "ada", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range items {
		got = append(got, it.NotificationID)
	}
	slices.Sort(got)
	if want := ids[15:]; !slices.Equal(got, want) {
		t.Fatalf("kept %v, want %v", got, want)
	}
	counts, _, _ := st.GetInboxCounts(ctx, tn.ID, "ada")
	recount, _ := st.RecountInbox(ctx, tn.ID, "ada")
	if counts != recount || counts.Total != 5 {
		t.Fatalf("counters %+v, recount %+v", counts, recount)
	}
	// Each prune told the streams: an items.removed event with the counts.
	events, _, err := st.InboxEventsAfter(ctx, tn.ID, "ada", 20, 10, 1<<20)
	if err != nil || len(events) != 2 || events[0].Kind != herald.InboxItemsRemoved || events[1].Counts.Total != 5 {
		t.Fatalf("events after the inserts: %+v, %v", events, err)
	}
}

// A cap lowered from 100 to 10 leaves 90 items too many: the next delivery
// deletes InboxCapPerWrite of them (not all, in its own transaction), the list
// shows the newest 10 meanwhile, and the walk deletes the rest in batches of
// its size, the counters equal to a recount all along.
func TestLoweredInboxCapIsDeletedInBoundedBatches(t *testing.T) {
	st, ctx := txStore(t)
	st.SetInboxCap(100)
	tn, _ := mustTenant(t, st, ctx)
	if _, _, err := st.UpsertUser(ctx, store.User{TenantID: tn.ID, UserID: "ada"}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	item := func(i int) store.NewInboxItem {
		return store.NewInboxItem{TenantID: tn.ID, UserID: "ada", NotificationID: fmt.Sprintf("n_%03d", i), Title: "t", Body: "b",
			CreatedAt: now.Add(time.Duration(i-100) * time.Minute)}
	}
	var items []store.NewInboxItem
	for i := range 100 {
		items = append(items, item(i))
	}
	if _, err := st.InsertInboxItems(ctx, items); err != nil {
		t.Fatal(err)
	}
	_, seq, _ := st.GetInboxCounts(ctx, tn.ID, "ada")
	if err := st.UpdateTenantSettings(ctx, tn.ID, func(ts *store.TenantSettings) { ts.Retention = retention.Tenant{InboxItems: 10} }); err != nil {
		t.Fatal(err)
	}
	consistent := func(wantRows int64) {
		t.Helper()
		counts, _, _ := st.GetInboxCounts(ctx, tn.ID, "ada")
		recount, _ := st.RecountInbox(ctx, tn.ID, "ada")
		if counts != recount || counts.Total != wantRows {
			t.Fatalf("counters %+v, recount %+v, want %d rows", counts, recount, wantRows)
		}
		list, _, err := st.ListInbox(ctx, store.InboxQuery{TenantID: tn.ID, UserID: "ada", Limit: 100})
		if err != nil || len(list) != 10 || list[0].NotificationID != "n_100" || list[9].NotificationID != "n_091" {
			t.Fatalf("the list shows %d items (want the newest 10, n_100 to n_091): %+v, %v", len(list), list, err)
		}
	}
	if _, err := st.InsertInboxItems(ctx, []store.NewInboxItem{item(100)}); err != nil {
		t.Fatal(err)
	}
	consistent(101 - store.InboxCapPerWrite)
	// The stream heard of the removal: items.removed, then item.created.
	events, _, err := st.InboxEventsAfter(ctx, tn.ID, "ada", seq, 10, 1<<20)
	if err != nil || len(events) != 2 || events[0].Kind != herald.InboxItemsRemoved || events[1].Kind != herald.InboxItemCreated {
		t.Fatalf("events of the write: %+v, %v", events, err)
	}
	// The walk, 30 rows a batch: back at ada until her excess is gone.
	var deleted []int64
	after, more := "", true
	for more {
		var n int64
		if n, after, more, err = st.PruneInboxCaps(ctx, tn.ID, after, 500, 30); err != nil {
			t.Fatal(err)
		}
		deleted = append(deleted, n)
	}
	if want := []int64{30, 30, 6}; !slices.Equal(deleted, want) {
		t.Fatalf("the walk deleted %v a call, want %v", deleted, want)
	}
	consistent(10)
}

// Prune deletes only the tenant's rows older than the cut-off, a batch at a
// time, and keeps notifications still in flight.
func TestPruneDeletesOnlyExpiredRowsOfTheTenant(t *testing.T) {
	st, tx, ctx := txStoreWithTx(t)
	a, _ := mustTenant(t, st, ctx)
	b, _ := mustTenant(t, st, ctx)
	old := time.Now().Add(-2 * time.Hour)
	for _, tn := range []string{a.ID, b.ID} {
		if _, _, err := st.UpsertUser(ctx, store.User{TenantID: tn, UserID: "ada"}); err != nil {
			t.Fatal(err)
		}
		for i, status := range []herald.NotificationStatus{herald.NotificationDelivered, herald.NotificationFailed, herald.NotificationSending} {
			if err := st.InsertNotification(ctx, store.Notification{TenantID: tn, ID: fmt.Sprintf("n_old%d", i), UserID: "ada", TemplateID: "tpl",
				Channels: []herald.Channel{herald.ChannelInApp}, WorkflowID: "wf", RunID: "r", DedupKeyHash: "k", Status: status, AcceptedAt: old}); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.InsertNotification(ctx, store.Notification{TenantID: tn, ID: "n_new", UserID: "ada", TemplateID: "tpl",
			Channels: []herald.Channel{herald.ChannelInApp}, WorkflowID: "wf", RunID: "r", DedupKeyHash: "k", Status: herald.NotificationDelivered, AcceptedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		// Accepted long ago and ended long ago, except n_old3 below.
		if _, err := tx.Exec(ctx, `UPDATE notifications SET updated_at = accepted_at WHERE tenant_id = $1`, tn); err != nil {
			t.Fatal(err)
		}
		// n_late: accepted long ago for a send_at far ahead, delivered just now.
		// n_dead: ended long ago, but its dead letter is still open.
		for _, id := range []string{"n_late", "n_dead"} {
			if err := st.InsertNotification(ctx, store.Notification{TenantID: tn, ID: id, UserID: "ada", TemplateID: "tpl",
				Channels: []herald.Channel{herald.ChannelEmail}, WorkflowID: "wf", RunID: "r", DedupKeyHash: "k", Status: herald.NotificationFailed, AcceptedAt: old}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE notifications SET updated_at = accepted_at WHERE tenant_id = $1 AND id = 'n_dead'`, tn); err != nil {
			t.Fatal(err)
		}
		if _, err := st.PutDeadLetter(ctx, store.DeadLetter{TenantID: tn, NotificationID: "n_dead", Channel: herald.ChannelEmail,
			TemplateID: "tpl", Attempts: 3, LastError: "refused", Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	cut := time.Now().Add(-time.Hour)
	if n, err := st.Prune(ctx, store.PruneNotifications, a.ID, cut, 1); err != nil || n != 1 {
		t.Fatalf("first batch: %d, %v", n, err)
	}
	if n, err := st.Prune(ctx, store.PruneNotifications, a.ID, cut, 500); err != nil || n != 1 {
		t.Fatalf("second batch: %d, %v", n, err)
	}
	if n, err := st.Prune(ctx, store.PruneNotifications, a.ID, cut, 500); err != nil || n != 0 {
		t.Fatalf("third batch: %d, %v", n, err)
	}
	for _, c := range []struct {
		tenant, id string
		kept       bool
	}{{a.ID, "n_old0", false}, {a.ID, "n_old1", false}, {a.ID, "n_old2", true}, {a.ID, "n_new", true},
		{a.ID, "n_late", true}, {a.ID, "n_dead", true}, {b.ID, "n_old0", true}, {b.ID, "n_new", true}} {
		_, err := st.GetNotification(ctx, c.tenant, c.id)
		if kept := err == nil; kept != c.kept {
			t.Errorf("%s/%s kept=%v, want %v (%v)", c.tenant, c.id, kept, c.kept, err)
		}
	}
	// Deliveries went with their notifications.
	if ds, err := st.ListDeliveries(ctx, a.ID, "n_old0"); err != nil || len(ds) != 0 {
		t.Fatalf("deliveries of a pruned notification: %v %v", ds, err)
	}
	for _, k := range store.PruneKinds {
		if _, err := st.Prune(ctx, k, a.ID, cut, 10); err != nil {
			t.Errorf("%s: %v", k, err)
		}
	}
}

// The age limit finds its users by their inbox_state bound (migration 0171): an
// inbox write lowers it to an older item, a visit sets it to the oldest item
// left ('infinity': none), an unknown bound ('-infinity': a row from before 0171) is
// visited once; a user whose items are all within the limit is not visited.
func TestInboxAgeLimitFindsUsersByTheirBound(t *testing.T) {
	st, tx, ctx := txStoreWithTx(t)
	tn, _ := mustTenant(t, st, ctx)
	now := time.Now().UTC().Truncate(time.Microsecond)
	bound := func(user string) *time.Time {
		t.Helper()
		var at pgtype.Timestamptz
		if err := tx.QueryRow(ctx, `SELECT oldest_at FROM inbox_state WHERE tenant_id = $1 AND user_id = $2`, tn.ID, user).Scan(&at); err != nil {
			t.Fatal(err)
		}
		if !at.Valid {
			return nil
		}
		if at.InfinityModifier == pgtype.Infinity {
			inf := time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC) // stands for 'infinity'
			return &inf
		}
		return &at.Time
	}
	put := func(user, id string, at time.Time) {
		t.Helper()
		if _, _, err := st.UpsertUser(ctx, store.User{TenantID: tn.ID, UserID: user}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.InsertInboxItems(ctx, []store.NewInboxItem{{TenantID: tn.ID, UserID: user, NotificationID: id,
			Title: "t", Body: "b", CreatedAt: at}}); err != nil {
			t.Fatal(err)
		}
	}
	put("bob", "n_b1", now)
	put("ada", "n_a1", now)
	put("ada", "n_a2", now.Add(-10*time.Minute)) // older than the bound: lowers it
	put("ada", "n_a3", now.Add(-time.Minute))    // newer: leaves it
	put("cy", "n_c1", now.Add(-20*time.Minute))
	if _, err := tx.Exec(ctx, `UPDATE inbox_state SET oldest_at = '-infinity' WHERE tenant_id = $1 AND user_id = 'cy'`, tn.ID); err != nil {
		t.Fatal(err)
	}
	if b := bound("bob"); b == nil || !b.Equal(now) {
		t.Fatalf("bob's bound %v, want his only item's %v", b, now)
	}
	if b := bound("ada"); b == nil || !b.Equal(now.Add(-10*time.Minute)) {
		t.Fatalf("ada's bound %v, want her oldest item's", b)
	}
	// One user a call: ada's old item, then cy's (bound unknown), then none;
	// bob (within the limit) is never visited.
	var total int64
	calls := 0
	for more := true; more; calls++ {
		n, m, err := st.PruneInboxAge(ctx, tn.ID, now.Add(-5*time.Minute), 1)
		if err != nil {
			t.Fatal(err)
		}
		total, more = total+n, m
		if calls > 5 {
			t.Fatal("the age limit does not end")
		}
	}
	if total != 2 || calls != 3 {
		t.Fatalf("age limit: %d deleted in %d calls, want 2 in 3 (ada's, cy's, then none)", total, calls)
	}
	if b := bound("ada"); b == nil || !b.Equal(now.Add(-time.Minute)) {
		t.Fatalf("ada's bound after the visit %v, want her oldest item left's", b)
	}
	if b := bound("cy"); b == nil || b.Year() < 9999 {
		t.Fatalf("cy's bound after the visit %v, want infinity (no item left)", b)
	}
	if b := bound("bob"); b == nil || !b.Equal(now) {
		t.Fatalf("bob's bound changed to %v", b)
	}
	for user, want := range map[string]int{"ada": 2, "bob": 1, "cy": 0} {
		items, _, err := st.ListInbox(ctx, store.InboxQuery{TenantID: tn.ID, UserID: user, Limit: 10})
		if err != nil || len(items) != want {
			t.Fatalf("%s keeps %d items (%v), want %d", user, len(items), err, want)
		}
	}
}
