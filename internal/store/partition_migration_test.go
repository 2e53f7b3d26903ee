package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/testenv"
	"github.com/herald-notify/herald/schema"
)

// partitionMigration is the migration that partitions the high-volume tables.
const partitionMigration = 102

// migratedTables are the tables the partition migration rebuilds, with the
// columns they had before it (deliveries gains accepted_at).
var migratedTables = map[string]string{
	"notifications":     "tenant_id, id, user_id, template_id, channels, workflow_id, run_id, dedup_key_hash, status, accepted_at, updated_at, template_version, category, campaign_id",
	"deliveries":        "tenant_id, notification_id, channel, status, provider, provider_message_id, attempts, last_error, sent_at, delivered_at, updated_at, reason, campaign_id",
	"delivery_attempts": "id, tenant_id, notification_id, channel, attempt, provider, outcome, error, at",
	"inbox_events":      "tenant_id, user_id, seq, kind, notification_id, item, total, unread, unseen, created_at",
	"audit_log":         "tenant_id, id, at, api_key_id, action, target, status, details",
}

// databaseAt is a fresh database migrated to version, a pool and a store on
// it, and a tenant named name: where a migration's test writes rows as the
// version before it did.
func databaseAt(t *testing.T, version uint, name string) (string, *pgxpool.Pool, *store.Store, store.Tenant) {
	t.Helper()
	ctx := context.Background()
	pool, dbURL := testenv.FreshPool(t, "herald_mig", version)
	st := store.New(pool)
	tn, _, err := st.CreateTenant(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return dbURL, pool, st, tn
}

// TestPartitionMigrationKeepsEveryRowAndQuery: on a database at the version
// before the partition migration, rows are written as that version wrote
// them (notifications and deliveries by its statements, the rest through the
// store), some of them days and weeks old; after the migration every row of
// every rebuilt table is there with the same values, each delivery carries
// its notification's accepted_at, the store's reads find them, the delivery
// guard still refuses a second row for the same (notification, channel), and
// the id sequences go on above the old ids.
func TestPartitionMigrationKeepsEveryRowAndQuery(t *testing.T) {
	ctx := context.Background()
	dbURL, pool, st, tn := databaseAt(t, partitionMigration-1, "before-partitions")
	now := time.Now().UTC().Truncate(time.Microsecond)
	type sent struct {
		id string
		at time.Time
	}
	var notes []sent
	for i, age := range []time.Duration{0, time.Hour, 26 * time.Hour, 3 * 24 * time.Hour, 20 * 24 * time.Hour} {
		user := fmt.Sprintf("u%d", i%2)
		if _, _, err := st.UpsertUser(ctx, store.User{TenantID: tn.ID, UserID: user}); err != nil {
			t.Fatal(err)
		}
		n := sent{fmt.Sprintf("n_%064d", i), now.Add(-age)}
		notes = append(notes, n)
		// The statements of the version before: no accepted_at on deliveries.
		if _, err := pool.Exec(ctx, `
			WITH n AS (
				INSERT INTO notifications (tenant_id, id, user_id, template_id, channels, workflow_id, run_id, dedup_key_hash, status, accepted_at)
				VALUES ($1, $2, $3, 'tpl', '{in_app,email}', 'wf', 'run', 'k', 'delivered', $4)
			)
			INSERT INTO deliveries (tenant_id, notification_id, channel, status) VALUES ($1, $2, 'in_app', 'delivered'), ($1, $2, 'email', 'sent')`,
			tn.ID, n.id, user, n.at); err != nil {
			t.Fatal(err)
		}
		if err := st.RecordAttempt(ctx, tn.ID, n.id, herald.ChannelEmail, store.Attempt{Attempt: 1, Provider: "sandbox", Outcome: "accepted"}); err != nil {
			t.Fatal(err)
		}
		// The inbox row and its item.created event as the version before
		// wrote them (today's store carries the event on the row, 0155).
		if _, err := pool.Exec(ctx, `
			WITH s AS (
				INSERT INTO inbox_state (tenant_id, user_id, seq, total, unread, unseen) VALUES ($1, $2, 1, 1, 1, 1)
				ON CONFLICT (tenant_id, user_id) DO UPDATE SET seq = inbox_state.seq + 1, total = inbox_state.total + 1,
					unread = inbox_state.unread + 1, unseen = inbox_state.unseen + 1
				RETURNING seq, total, unread, unseen
			), i AS (
				INSERT INTO inbox (tenant_id, user_id, notification_id, title, body, created_at) VALUES ($1, $2, $3, 't', 'b', $4)
			)
			INSERT INTO inbox_events (tenant_id, user_id, seq, kind, notification_id, item, total, unread, unseen)
			SELECT $1, $2, s.seq, 'item.created', $3, jsonb_build_object('notification_id', $3::text, 'title', 't', 'body', 'b', 'created_at', $4::timestamptz),
				s.total, s.unread, s.unseen FROM s`, tn.ID, user, n.id, n.at); err != nil {
			t.Fatal(err)
		}
		id, err := st.BeginAudit(ctx, tn.ID, store.AuditEntry{APIKeyID: "k", Action: "template.put", Target: n.id})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.FinishAudit(ctx, tn.ID, id, 200, true); err != nil {
			t.Fatal(err)
		}
		// The rows' own times, as old as their notification.
		for _, q := range []string{`UPDATE delivery_attempts SET at = $3 WHERE tenant_id = $1 AND notification_id = $2`,
			`UPDATE inbox_events SET created_at = $3 WHERE tenant_id = $1 AND notification_id = $2`,
			`UPDATE audit_log SET at = $3 WHERE tenant_id = $1 AND target = $2`} {
			if _, err := pool.Exec(ctx, q, tn.ID, n.id, n.at); err != nil {
				t.Fatal(err)
			}
		}
	}
	snapshot := func() map[string]string {
		out := map[string]string{}
		for table, cols := range migratedTables {
			var n int
			var sum string
			if err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT count(*), COALESCE(md5(string_agg(r::text, '|' ORDER BY r::text)), '') FROM (SELECT %s FROM %s) r`, cols, table)).
				Scan(&n, &sum); err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				t.Fatalf("%s is empty before the migration", table)
			}
			out[table] = fmt.Sprintf("%d rows, md5 %s", n, sum)
		}
		return out
	}
	before := snapshot()
	var maxAudit, maxAttempt int64
	if err := pool.QueryRow(ctx, `SELECT (SELECT max(id) FROM audit_log), (SELECT max(id) FROM delivery_attempts)`).Scan(&maxAudit, &maxAttempt); err != nil {
		t.Fatal(err)
	}

	if err := schema.To(dbURL, partitionMigration); err != nil {
		t.Fatal(err)
	}
	pool.Reset() // the tables' OIDs changed under cached statements
	after := snapshot()
	for table, b := range before {
		if after[table] != b {
			t.Errorf("%s: before %s, after %s", table, b, after[table])
		}
	}
	for table := range migratedTables {
		var kind string
		if err := pool.QueryRow(ctx, `SELECT relkind::text FROM pg_class WHERE oid = $1::regclass`, table).Scan(&kind); err != nil || kind != "p" {
			t.Errorf("%s: relkind %q (%v), want a partitioned table", table, kind, err)
		}
	}
	var mismatched int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM deliveries d LEFT JOIN notifications n ON n.tenant_id = d.tenant_id AND n.id = d.notification_id
		WHERE n.accepted_at IS DISTINCT FROM d.accepted_at`).Scan(&mismatched); err != nil || mismatched != 0 {
		t.Fatalf("%d deliveries without their notification's accepted_at (%v)", mismatched, err)
	}

	// The store's reads find every row, with the code of today: on the
	// latest schema (later migrations read the rebuilt tables' rows too).
	if _, err := schema.Up(dbURL); err != nil {
		t.Fatal(err)
	}
	pool.Reset()
	latest := snapshot() // ids are bytes since 0175: their text differs
	for _, n := range notes {
		got, err := st.GetNotification(ctx, tn.ID, n.id)
		if err != nil || !got.AcceptedAt.Equal(n.at) || len(got.Deliveries) != 2 || got.Deliveries[0].Channel != herald.ChannelEmail {
			t.Fatalf("GetNotification(%s) = %+v, %v", n.id, got, err)
		}
		attempts, err := st.ListAttempts(ctx, tn.ID, n.id)
		if err != nil || len(attempts[herald.ChannelEmail]) != 1 {
			t.Fatalf("attempts of %s: %v %v", n.id, attempts, err)
		}
		// The guard: the same notification written again (an activity retry)
		// adds no row.
		if err := st.InsertNotification(ctx, store.Notification{TenantID: tn.ID, ID: n.id, UserID: "u0", TemplateID: "tpl",
			Channels: []herald.Channel{herald.ChannelInApp, herald.ChannelEmail}, WorkflowID: "wf", RunID: "run", DedupKeyHash: "k",
			Status: herald.NotificationSending, AcceptedAt: n.at}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.UpdateDelivery(ctx, tn.ID, n.id, herald.ChannelEmail, store.DeliveryUpdate{Status: herald.DeliveryDelivered}); err != nil {
			t.Fatal(err)
		}
	}
	if after := snapshot(); after["notifications"] != latest["notifications"] {
		t.Fatalf("a retried insert changed notifications: %s", after["notifications"])
	}
	var deliveries int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE tenant_id = $1`, tn.ID).Scan(&deliveries); err != nil || deliveries != 2*len(notes) {
		t.Fatalf("%d deliveries after the retried inserts, want %d (%v)", deliveries, 2*len(notes), err)
	}
	entries, err := st.ListAudit(ctx, tn.ID, store.AuditFilter{Limit: 100})
	if err != nil || len(entries) != len(notes) || entries[0].Target != notes[0].id || entries[len(entries)-1].Target != notes[len(notes)-1].id {
		t.Fatalf("audit log after the migration: %d entries, %v", len(entries), err)
	}
	for _, u := range []string{"u0", "u1"} {
		events, _, err := st.InboxEventsAfter(ctx, tn.ID, u, 0, 100, 1<<20)
		items, _, ierr := st.ListInbox(ctx, store.InboxQuery{TenantID: tn.ID, UserID: u, Limit: 100})
		if err != nil || ierr != nil || len(events) == 0 || len(events) != len(items) {
			t.Fatalf("%s: %d events, %d items (%v, %v)", u, len(events), len(items), err, ierr)
		}
	}
	// New rows go on above the old ids.
	id, err := st.BeginAudit(ctx, tn.ID, store.AuditEntry{APIKeyID: "k", Action: "template.put"})
	if err != nil || id <= maxAudit {
		t.Fatalf("new audit id %d after %d (%v)", id, maxAudit, err)
	}
	if err := st.RecordAttempt(ctx, tn.ID, notes[0].id, herald.ChannelEmail, store.Attempt{Attempt: 2, Provider: "sandbox", Outcome: "accepted"}); err != nil {
		t.Fatal(err)
	}
	var newest int64
	if err := pool.QueryRow(ctx, `SELECT max(id) FROM delivery_attempts`).Scan(&newest); err != nil || newest <= maxAttempt {
		t.Fatalf("new attempt id %d after %d (%v)", newest, maxAttempt, err)
	}
	// And back: the down migration keeps every row too.
	if err := schema.To(dbURL, partitionMigration-1); err != nil {
		t.Fatal(err)
	}
}

// 0176 turns the ids of a day partition made but never attached into bytes
// too (store.EnsurePartitions attaches it later, and only a table of its
// parent's column types).
func TestIDBytesMigrationConvertsAnUnattachedPartition(t *testing.T) {
	ctx := context.Background()
	const idBytesMigration = 176
	dbURL, pool, _, _ := databaseAt(t, idBytesMigration-1, "unattached-ids")
	if _, err := pool.Exec(ctx, `CREATE TABLE notifications_p20991231 (LIKE notifications INCLUDING DEFAULTS INCLUDING CONSTRAINTS)`); err != nil {
		t.Fatal(err)
	}
	if err := schema.To(dbURL, idBytesMigration); err != nil {
		t.Fatal(err)
	}
	pool.Reset()
	var typ string
	if err := pool.QueryRow(ctx, `SELECT format_type(atttypid, atttypmod) FROM pg_attribute
		WHERE attrelid = 'notifications_p20991231'::regclass AND attname = 'id'`).Scan(&typ); err != nil || typ != "bytea" {
		t.Fatalf("the unattached partition's id: %s (%v), want bytea", typ, err)
	}
	if _, err := pool.Exec(ctx, `ALTER TABLE notifications ATTACH PARTITION notifications_p20991231
		FOR VALUES FROM ('2099-12-31 00:00:00+00') TO ('2100-01-01 00:00:00+00')`); err != nil {
		t.Fatalf("attaching it: %v", err)
	}
}
