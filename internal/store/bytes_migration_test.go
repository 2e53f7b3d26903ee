package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/dbx"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/schema"
)

// smallerRowsMigration is the version before the migrations that store less
// per notification (0121 inbox event items, 0122 derived notification ids,
// 0124 the ledger's key lookup).
const smallerRowsMigration = 120

// TestSmallerRowsMigrationKeepsEveryValue: on a database at 0120, a
// notification accepted the usual way (its workflow id, run id and key hash
// spelled by its id), a campaign recipient, one whose values are not the
// derived ones, and inbox events with their items as the API's JSON; after
// migrating up the derivable columns are NULL, the others kept, every read
// (GetNotification, ListUserNotifications by user and by key hash, the
// event log) returns what was written; after migrating down again every row
// is as it was (md5 of the rows).
func TestSmallerRowsMigrationKeepsEveryValue(t *testing.T) {
	ctx := context.Background()
	dbURL, pool, st, tn := databaseAt(t, smallerRowsMigration, "smaller-rows")
	if _, _, err := st.UpsertUser(ctx, store.User{TenantID: tn.ID, UserID: "ada"}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	key := ids.IdempotencyKeyHash("order-1")
	const runID = "01a23c67-5559-774a-8330-8acdd78d1716"
	type row struct{ id, workflowID, runID, keyHash, campaignID string }
	rows := []row{
		{ids.NotificationID(key, runID), ids.NotificationWorkflowID(tn.ID, key), runID, key.String(), ""},
		{ids.CampaignNotificationID(tn.ID, "spring", "ada"), ids.CampaignWorkflowID(tn.ID, "spring"), "", "spring", "spring"},
		{"n_" + strings.Repeat("0", 64), "wf", "run", "k", ""},
	}
	for i, r := range rows {
		// The statement of the version before: every value spelled out.
		if _, err := pool.Exec(ctx, `
			INSERT INTO notifications (tenant_id, id, user_id, template_id, channels, workflow_id, run_id, dedup_key_hash, status, accepted_at, campaign_id)
			VALUES ($1, $2, 'ada', 'tpl', '{in_app}', $3, $4, $5, 'delivered', $6, NULLIF($7, ''))`,
			tn.ID, r.id, r.workflowID, r.runID, r.keyHash, now.Add(-time.Duration(i)*time.Minute), r.campaignID); err != nil {
			t.Fatal(err)
		}
	}
	// Inbox events as the version before wrote them: the item's API JSON.
	action := "https://example.com/o/1"
	items := []store.InboxItem{
		{NotificationID: rows[0].id, Title: "Shipped", Body: "Your order", ActionURL: &action, Category: "orders", CreatedAt: now, Sequence: 1},
		{NotificationID: rows[0].id, Title: "Shipped", Body: "Your order", ActionURL: &action, Category: "orders", CreatedAt: now, Sequence: 1, ReadAt: &now, SeenAt: &now},
		{NotificationID: rows[1].id, Title: "", Body: "b", CreatedAt: now},
	}
	for i, it := range items {
		raw, err := json.Marshal(it)
		if err != nil {
			t.Fatal(err)
		}
		kind := herald.InboxItemCreated
		if it.ReadAt != nil {
			kind = herald.InboxItemUpdated
		}
		if _, err := pool.Exec(ctx, `INSERT INTO inbox_events (tenant_id, user_id, seq, kind, notification_id, item, total, unread, unseen)
			VALUES ($1, 'ada', $2, $3, $4, $5, 1, 1, 1)`, tn.ID, i+1, kind, it.NotificationID, raw); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO inbox_events (tenant_id, user_id, seq, kind, total, unread, unseen)
		VALUES ($1, 'ada', 4, $2, 0, 0, 0)`, tn.ID, herald.InboxItemsRemoved); err != nil {
		t.Fatal(err)
	}
	snapshot := func() string {
		var sum string
		if err := pool.QueryRow(ctx, `SELECT md5(string_agg(r::text, '|' ORDER BY r::text)) FROM (
			SELECT tenant_id, id, workflow_id, run_id, dedup_key_hash, campaign_id FROM notifications
			UNION ALL SELECT tenant_id, notification_id, kind, item::text, seq::text, NULL FROM inbox_events) r`).Scan(&sum); err != nil {
			t.Fatal(err)
		}
		return sum
	}
	before := snapshot()

	if _, err := schema.Up(dbURL); err != nil {
		t.Fatal(err)
	}
	pool.Reset()
	var nulls []bool
	if err := pool.QueryRow(ctx, `SELECT array_agg(workflow_id IS NULL AND run_id IS NULL AND dedup_key_hash IS NULL ORDER BY accepted_at DESC) FROM notifications`).
		Scan(&nulls); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(nulls) != "[true true false]" {
		t.Fatalf("derived columns NULL: %v, want the usual and the campaign row's only", nulls)
	}
	for _, r := range rows {
		n, err := st.GetNotification(ctx, tn.ID, r.id)
		if err != nil || n.WorkflowID != r.workflowID || n.RunID != r.runID || n.DedupKeyHash != r.keyHash {
			t.Fatalf("GetNotification(%s) = %q %q %q (%v), want %q %q %q", r.id, n.WorkflowID, n.RunID, n.DedupKeyHash, err, r.workflowID, r.runID, r.keyHash)
		}
		found, err := st.ListUserNotifications(ctx, tn.ID, store.UserNotificationFilter{KeyHash: r.keyHash, Limit: 10})
		if err != nil || len(found) != 1 || found[0].ID != r.id || found[0].WorkflowID != r.workflowID || found[0].RunID != r.runID {
			t.Fatalf("by key hash %s: %+v (%v)", r.keyHash, found, err)
		}
	}
	byUser, err := st.ListUserNotifications(ctx, tn.ID, store.UserNotificationFilter{UserID: "ada", Limit: 10})
	if err != nil || len(byUser) != len(rows) {
		t.Fatalf("by user: %d (%v)", len(byUser), err)
	}
	// A key hash that only prefixes an id finds nothing.
	if found, err := st.ListUserNotifications(ctx, tn.ID, store.UserNotificationFilter{KeyHash: key.String()[:30], Limit: 10}); err != nil || len(found) != 0 {
		t.Fatalf("by a prefix of the key hash: %d (%v)", len(found), err)
	}
	events, _, err := st.InboxEventsAfter(ctx, tn.ID, "ada", 0, 10, 1<<20)
	if err != nil || len(events) != 4 {
		t.Fatalf("%d events (%v)", len(events), err)
	}
	for i, it := range items {
		got, _ := json.Marshal(events[i].Item)
		want, _ := json.Marshal(it)
		if string(got) != string(want) {
			t.Errorf("event %d item %s, want %s", i+1, got, want)
		}
	}
	if events[3].Item != nil || events[3].Kind != herald.InboxItemsRemoved {
		t.Errorf("the removal event: %+v", events[3])
	}
	var stored int
	if err := pool.QueryRow(ctx, `SELECT max(octet_length(item::text)) FROM inbox_events`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	// The short form drops the notification id (66 bytes), the null fields and
	// most of the keys' letters.
	if full, _ := json.Marshal(items[1]); stored+120 > len(full) {
		t.Errorf("the largest stored item is %d bytes, its API JSON %d: not the short form", stored, len(full))
	}

	// New writes: the usual notification stores no derivable value either.
	key2 := ids.IdempotencyKeyHash("order-2")
	n2 := store.Notification{TenantID: tn.ID, ID: ids.NotificationID(key2, runID), UserID: "ada", TemplateID: "tpl",
		Channels: []herald.Channel{herald.ChannelInApp}, WorkflowID: ids.NotificationWorkflowID(tn.ID, key2), RunID: runID,
		DedupKeyHash: key2.String(), Status: herald.NotificationQueued, AcceptedAt: now}
	if err := st.InsertNotification(ctx, n2); err != nil {
		t.Fatal(err)
	}
	var derived bool
	if err := dbx.WithNotificationIDs(pool).QueryRow(ctx, `SELECT workflow_id IS NULL AND run_id IS NULL AND dedup_key_hash IS NULL FROM notifications WHERE id = $1`, n2.ID).
		Scan(&derived); err != nil || !derived {
		t.Fatalf("a new notification's derivable columns: NULL %v (%v)", derived, err)
	}
	if got, err := st.GetNotification(ctx, tn.ID, n2.ID); err != nil || got.WorkflowID != n2.WorkflowID || got.RunID != runID || got.DedupKeyHash != key2.String() {
		t.Fatalf("GetNotification(new) = %+v (%v)", got, err)
	}
	// The ledger (0124) finds a key's rows by their ids, and a row whose id
	// does not spell its key by the partial index: both answer as before.
	body := []byte("body-hash")
	until := now.Add(time.Hour)
	n2.Dedup = &store.Dedup{BodyHash: body, FirstSeenAt: now, DedupUntil: &until}
	if err := st.InsertNotification(ctx, n2); err != nil {
		t.Fatal(err)
	}
	// Since 0174 the row of an id that spells its key stores neither the key
	// nor a last_seen_at equal to first_seen_at; both read as before.
	var storedKey, storedLast *string
	if err := dbx.WithNotificationIDs(pool).QueryRow(ctx, `SELECT key_hash, last_seen_at::text FROM notification_dedup WHERE notification_id = $1`, n2.ID).
		Scan(&storedKey, &storedLast); err != nil || storedKey != nil || storedLast != nil {
		t.Fatalf("a new ledger row stores key_hash %v and last_seen_at %v (%v), want both NULL", storedKey, storedLast, err)
	}
	if d, err := st.GetDedup(ctx, tn.ID, n2.ID); err != nil || d.KeyHash != key2.String() || !d.LastSeenAt.Equal(now) || !d.FirstSeenAt.Equal(now) {
		t.Fatalf("GetDedup(new) = %+v (%v), want key %s, first and last seen %v", d, err, key2.String(), now)
	}
	// A first duplicate seen (by its API host's clock) before the original's
	// start is not shown as last seen before the first submission.
	if _, err := st.RecordDuplicate(ctx, store.RecordDuplicateParams{TenantID: tn.ID, NotificationID: n2.ID, KeyHash: key2.String(),
		BodyHash: body, SeenAt: now.Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	if d, err := st.GetDedup(ctx, tn.ID, n2.ID); err != nil || d.Duplicates != 1 || !d.LastSeenAt.Equal(now) {
		t.Fatalf("after a duplicate seen a second early: %+v (%v), want one duplicate, last seen %v", d, err, now)
	}
	// A row written before 0174 (its key spelled out) and a row whose id does
	// not spell its key.
	odd, old := rows[2], rows[0]
	for _, r := range []row{odd, old} {
		if _, err := dbx.WithNotificationIDs(pool).Exec(ctx, `INSERT INTO notification_dedup (tenant_id, notification_id, key_hash, body_hash, first_seen_at, last_seen_at, dedup_until)
			VALUES ($1, $2, $3, $4, $5, $5, $6)`, tn.ID, r.id, r.keyHash, body, now, until); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []struct{ id, key string }{{n2.ID, key2.String()}, {odd.id, odd.keyHash}, {old.id, old.keyHash}} {
		byKey, err := st.NotificationsByKey(ctx, tn.ID, want.key, 10)
		if err != nil || fmt.Sprint(byKey) != fmt.Sprint([]string{want.id}) {
			t.Fatalf("NotificationsByKey(%s) = %v (%v), want %s", want.key, byKey, err, want.id)
		}
		a, err := st.AnswerFromLedger(ctx, store.AnswerFromLedgerParams{TenantID: tn.ID, KeyHash: want.key, BodyHash: body, SeenAt: now})
		if err != nil || a.Outcome != store.LedgerDuplicate || a.NotificationID != want.id {
			t.Fatalf("AnswerFromLedger(%s) = %+v (%v), want a duplicate of %s", want.key, a, err, want.id)
		}
	}
	if byKey, err := st.NotificationsByKey(ctx, tn.ID, key2.String()[:31]+"0", 10); err != nil || len(byKey) != 0 {
		t.Fatalf("another key found %v (%v)", byKey, err)
	}
	if _, err := dbx.WithNotificationIDs(pool).Exec(ctx, `DELETE FROM notifications WHERE id = $1`, n2.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM notification_dedup WHERE tenant_id = $1`, tn.ID); err != nil {
		t.Fatal(err)
	}

	if err := schema.To(dbURL, smallerRowsMigration); err != nil {
		t.Fatal(err)
	}
	pool.Reset()
	if after := snapshot(); after != before {
		t.Fatalf("after migrating down the rows differ: md5 %s, before %s", after, before)
	}
}
