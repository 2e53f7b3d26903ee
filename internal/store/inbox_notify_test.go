package store_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/store"
)

// A batch of any size is announced with payloads that each fit a NOTIFY and
// together name exactly its users: no "wake everyone" fallback.
func TestInboxNotifyPayloadsNameExactlyTheUsers(t *testing.T) {
	for _, tc := range []struct {
		name          string
		tenants, n    int
		idLen         int
		wantPayloads  int
		wantAtLeastPs bool
	}{
		{"500 short ids of one tenant", 1, 500, 8, 1, false},
		{"500 ids of 255 bytes", 1, 500, 255, 16, true},
		{"3 tenants, 700 ids", 3, 700, 40, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tenants, users []string
			want := map[string]bool{}
			for i := range tc.n {
				tn := fmt.Sprintf("t_%d", i%tc.tenants)
				u := fmt.Sprintf("%0*d", tc.idLen, i)
				tenants, users = append(tenants, tn), append(users, u)
				want[store.NotifyKey(tn, u)] = true
			}
			ps := store.InboxNotifyPayloads(tenants, users)
			if tc.wantAtLeastPs && len(ps) < tc.wantPayloads || !tc.wantAtLeastPs && len(ps) != tc.wantPayloads {
				t.Fatalf("%d payloads, want %d", len(ps), tc.wantPayloads)
			}
			got := map[string]bool{}
			for _, p := range ps {
				if len(p) >= 8000 {
					t.Fatalf("a payload of %d bytes does not fit NOTIFY", len(p))
				}
				if strings.TrimSpace(p) == "*" {
					t.Fatal("a payload wakes everyone")
				}
				store.DecodeInboxNotify(p, func(tn, u string) { got[store.NotifyKey(tn, u)] = true })
			}
			if len(got) != len(want) {
				t.Fatalf("decoded %d users, want %d", len(got), len(want))
			}
			for k := range want {
				if !got[k] {
					t.Fatalf("%q not named", k)
				}
			}
		})
	}
}

// A stream's page of the event log is bounded in bytes as well as in events,
// measured in PostgreSQL: a prefix of the events after `after` whose items fit
// maxBytes (the first always), and cut says more were left out for the budget.
func TestInboxEventsPageIsBoundedInBytes(t *testing.T) {
	st, ctx := txStore(t)
	tn, _ := mustTenant(t, st, ctx)
	if err := st.InsertUsers(ctx, tn.ID, []store.User{{UserID: "u1"}}); err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("x", 10_000) // each item's JSON is a little over 10 KB
	var items []store.NewInboxItem
	for i := range 10 {
		items = append(items, store.NewInboxItem{TenantID: tn.ID, UserID: "u1", NotificationID: fmt.Sprintf("n%d", i), Title: "t", Body: body, CreatedAt: time.Now()})
	}
	if _, err := st.InsertInboxItems(ctx, items); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		after           int64
		limit, maxBytes int
		want            []int64
		cut             bool
	}{
		{0, 100, 35_000, []int64{1, 2, 3}, true},       // three fit, the fourth would not
		{3, 100, 35_000, []int64{4, 5, 6}, true},       // the next page
		{0, 100, 5_000, []int64{1}, true},              // one larger than the budget still comes, alone
		{0, 2, 1 << 20, []int64{1, 2}, false},          // the event count bounds it; nothing left out for bytes
		{6, 100, 1 << 20, []int64{7, 8, 9, 10}, false}, // the rest
		{10, 100, 1 << 20, nil, false},
	} {
		events, cut, err := st.InboxEventsAfter(ctx, tn.ID, "u1", tc.after, tc.limit, tc.maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, e := range events {
			got = append(got, e.Seq)
			if e.Item == nil || len(e.Item.Body) != len(body) {
				t.Fatalf("event %d lost its item", e.Seq)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) || cut != tc.cut {
			t.Errorf("after %d, %d events, %d bytes: %v cut %v; want %v cut %v", tc.after, tc.limit, tc.maxBytes, got, cut, tc.want, tc.cut)
		}
	}
}

// An event written by the release before the short stored form (0121) — its
// processes run against the new schema during a rolling deploy — reaches the
// stream as the same item, not as a blank one.
func TestInboxEventInTheFormerStoredFormKeepsItsItem(t *testing.T) {
	st, tx, ctx := txStoreWithTx(t)
	tn, _ := mustTenant(t, st, ctx)
	if err := st.InsertUsers(ctx, tn.ID, []store.User{{UserID: "u1"}}); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
	if _, err := st.InsertInboxItems(ctx, []store.NewInboxItem{{TenantID: tn.ID, UserID: "u1", NotificationID: "n1", Title: "Shipped", Body: "Your order", CreatedAt: at}}); err != nil {
		t.Fatal(err)
	}
	url := "https://shop.example/o/1"
	former, err := json.Marshal(store.InboxItem{NotificationID: "n1", Title: "Shipped (former)", Body: "Your order", ActionURL: &url, Category: "orders", CreatedAt: at, Sequence: 7})
	if err != nil {
		t.Fatal(err)
	}
	// Its item.created event as that release stored it: a row of its own
	// (the inbox row carries none).
	if _, err := tx.Exec(ctx, `
		WITH i AS (UPDATE inbox SET ev_seq = NULL, ev_at = NULL, ev_total = NULL, ev_unread = NULL, ev_unseen = NULL, ev_late = NULL
		           WHERE tenant_id = $1 AND user_id = $2 RETURNING notification_id)
		INSERT INTO inbox_events (tenant_id, user_id, seq, kind, notification_id, item, total, unread, unseen)
		SELECT $1, $2, 1, 'item.created', notification_id, $3, 1, 1, 1 FROM i`, tn.ID, "u1", former); err != nil {
		t.Fatal(err)
	}
	events, _, err := st.InboxEventsAfter(ctx, tn.ID, "u1", 0, 10, 1<<20)
	if err != nil || len(events) != 1 || events[0].Item == nil {
		t.Fatalf("events %+v, %v", events, err)
	}
	it := events[0].Item
	if it.Title != "Shipped (former)" || it.Body != "Your order" || !it.CreatedAt.Equal(at) || it.ActionURL == nil || *it.ActionURL != url ||
		it.Category != "orders" || it.Sequence != 7 || it.NotificationID != "n1" {
		t.Fatalf("item %+v", it)
	}
}
