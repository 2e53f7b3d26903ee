package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/herald-notify/herald/internal/dbx"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/retention"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/testenv"
)

// The partition tests work on days three weeks back, which no other test
// writes to, and drop with cut-offs two weeks back: a test of another
// package running at the same time (one shared database) cuts off at least
// three days back, so it may drop these days early only where nothing holds
// them, and never a day these tests expect to be held.
const partitionTestCutoff = 15 * retention.Day

// partitionTestTenant makes a tenant, the three notification history tables'
// partitions of days, and a cleanup that deletes the tenant's rows there and
// drops the partitions left empty.
func partitionTestTenant(t *testing.T, name string, days ...time.Time) (*store.Store, *pgxpool.Pool, string) {
	t.Helper()
	ctx := context.Background()
	pool := testenv.Pool(t)
	st := store.New(pool)
	tn, _, err := st.CreateTenant(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	for _, pt := range store.PartitionedTables[:3] {
		for _, d := range days {
			if _, err := st.EnsurePartitions(ctx, pt, pt.Start(d), 0, &store.DDLStats{}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() {
		ctx := context.Background()
		for _, table := range []string{"notifications", "deliveries", "delivery_attempts", "dead_letters"} {
			if _, err := pool.Exec(ctx, `DELETE FROM `+table+` WHERE tenant_id = $1`, tn.ID); err != nil {
				t.Error(err)
			}
		}
		now := time.Now()
		for _, pt := range store.PartitionedTables[:3] {
			if _, _, err := st.DropPartitions(ctx, pt, now.Add(-partitionTestCutoff), now.Add(-retention.Defaults.DeadLetters), &store.DDLStats{}, nil); err != nil {
				t.Error(err)
			}
		}
	})
	return st, pool, tn.ID
}

// insertEnded writes a notification accepted at accepted with status, ended
// (updated_at) at ended, and an email attempt at attemptAt. Another test's
// maintenance run may drop a partition of these days while it is still
// empty: it is created again and the write retried.
func insertEnded(t *testing.T, st *store.Store, pool *pgxpool.Pool, tenantID, id string, status herald.NotificationStatus, accepted, ended, attemptAt time.Time) {
	t.Helper()
	ctx := context.Background()
	retry := func(write func() error) {
		t.Helper()
		for attempt := 0; ; attempt++ {
			err := write()
			if err == nil {
				return
			}
			if attempt == 5 || !strings.Contains(err.Error(), "no partition of relation") {
				t.Fatal(err)
			}
			for _, pt := range store.PartitionedTables[:3] {
				for _, d := range []time.Time{accepted, attemptAt} {
					if _, err := st.EnsurePartitions(ctx, pt, pt.Start(d), 0, &store.DDLStats{}, nil); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	retry(func() error {
		return st.InsertNotification(ctx, store.Notification{TenantID: tenantID, ID: id, UserID: "ada", TemplateID: "order_shipped",
			Channels: []herald.Channel{herald.ChannelEmail}, WorkflowID: "wf", RunID: "r", DedupKeyHash: "k", Status: status, AcceptedAt: accepted})
	})
	if _, err := dbx.WithNotificationIDs(pool).Exec(ctx, `UPDATE notifications SET updated_at = $3 WHERE tenant_id = $1 AND id = $2`, tenantID, id, ended); err != nil {
		t.Fatal(err)
	}
	retry(func() error {
		_, err := pool.Exec(ctx, `INSERT INTO delivery_attempts (tenant_id, notification_id, channel, attempt, provider, outcome, at)
			VALUES ($1, $2, 'email', 1, 'sandbox', 'accepted', $3)`, tenantID, id, attemptAt)
		return err
	})
}

// partitionGone reports whether the table has no partition named name (this
// test dropped it, or another test's run at the same moment did).
func partitionGone(t *testing.T, st *store.Store, pt store.PartitionedTable, name string) bool {
	t.Helper()
	have, err := st.Partitions(context.Background(), pt)
	if err != nil {
		t.Fatal(err)
	}
	return !slices.ContainsFunc(have, func(p store.Partition) bool { return p.Name == name })
}

// An open dead letter holds its notification's day partitions only while it
// is younger than the dead-letter retention, counted from its created_at:
// one older holds nothing, the day drops, and the dead letter is then pruned
// as one whose notification is gone. Unbounded, one open dead letter a day
// (one failing tenant's) kept every day of the history forever.
func TestOpenDeadLetterHoldsItsPartitionsForABoundedTime(t *testing.T) {
	ctx := context.Background()
	now := time.Now().UTC()
	oldDay := store.PartitionedTables[0].Start(now.Add(-21 * retention.Day))
	youngDay := oldDay.Add(retention.Day)
	st, pool, tenantID := partitionTestTenant(t, "dl-hold", oldDay, youngDay)
	deadLetter := func(id string, created time.Time) int64 {
		t.Helper()
		d, err := st.PutDeadLetter(ctx, store.DeadLetter{TenantID: tenantID, NotificationID: id, Channel: herald.ChannelEmail,
			TemplateID: "order_shipped", Attempts: 1, LastError: "provider refused", Payload: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `UPDATE dead_letters SET created_at = $2 WHERE id = $1`, d.ID, created); err != nil {
			t.Fatal(err)
		}
		return d.ID
	}
	// Both failed at once (ended a minute after they were accepted): only
	// their open dead letters could hold their days.
	for _, n := range []struct {
		id  string
		day time.Time
	}{{"n_old_dl", oldDay}, {"n_young_dl", youngDay}} {
		accepted := n.day.Add(2 * time.Hour)
		insertEnded(t, st, pool, tenantID, n.id, herald.NotificationFailed, accepted, accepted.Add(time.Minute), accepted.Add(time.Minute))
	}
	deadLetterCutoff := now.Add(-10 * retention.Day)
	oldDL := deadLetter("n_old_dl", now.Add(-12*retention.Day))    // past the dead-letter retention
	youngDL := deadLetter("n_young_dl", now.Add(-5*retention.Day)) // within it

	for _, pt := range store.PartitionedTables[:3] {
		dropped, held, err := st.DropPartitions(ctx, pt, now.Add(-partitionTestCutoff), deadLetterCutoff, &store.DDLStats{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if name := pt.PartitionName(oldDay); !partitionGone(t, st, pt, name) {
			t.Errorf("%s, held only by a dead letter past the dead-letter retention, is not dropped: dropped %v, held %v", name, dropped, held)
		}
		if name := pt.PartitionName(youngDay); !slices.Contains(held, name) {
			t.Errorf("%s, whose dead letter is open and within the dead-letter retention, is not held: dropped %v, held %v", name, dropped, held)
		}
	}
	if _, err := st.GetNotification(ctx, tenantID, "n_young_dl"); err != nil {
		t.Fatalf("n_young_dl: %v", err)
	}
	// The old dead letter's notification is gone: it is pruned as today.
	if n, err := st.Prune(ctx, store.PruneOldDeadLetters, tenantID, deadLetterCutoff, 500); err != nil || n != 1 {
		t.Fatalf("pruned %d expired dead letters, %v; want 1 (the old one)", n, err)
	}
	if _, err := st.GetDeadLetter(ctx, tenantID, oldDL); err == nil {
		t.Fatal("the old dead letter is still there after the prune")
	}
	if _, err := st.GetDeadLetter(ctx, tenantID, youngDL); err != nil {
		t.Fatalf("the young dead letter: %v", err)
	}
}

// An attempt may be stamped up to AttemptClockSkew before its notification's
// accepted_at (ListAttemptsOf reads it): the attempts' day before the
// notification's is held while the notification is, not dropped from under
// it.
func TestAttemptsPartitionHeldAcrossTheClockSkew(t *testing.T) {
	ctx := context.Background()
	now := time.Now().UTC()
	attemptDay := store.PartitionedTables[2].Start(now.Add(-24 * retention.Day))
	acceptDay := attemptDay.Add(retention.Day)
	st, pool, tenantID := partitionTestTenant(t, "skew-hold", attemptDay, acceptDay)
	// Scheduled far ahead (not ended: held), accepted at 02:00 on one day;
	// its attempt stamped by a clock three hours behind, on the day before.
	accepted := acceptDay.Add(2 * time.Hour)
	insertEnded(t, st, pool, tenantID, "n_skew", herald.NotificationScheduled, accepted, accepted, accepted.Add(-3*time.Hour))

	attempts := store.PartitionedTables[2]
	dropped, held, err := st.DropPartitions(ctx, attempts, now.Add(-partitionTestCutoff), now.Add(-retention.Defaults.DeadLetters), &store.DDLStats{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if name := attempts.PartitionName(attemptDay); !slices.Contains(held, name) {
		t.Fatalf("%s, holding an attempt of a notification not ended (accepted 3 h after it, within AttemptClockSkew), is not held: dropped %v, held %v",
			name, dropped, held)
	}
	got, err := st.ListAttemptsOf(ctx, tenantID, "n_skew", accepted)
	if err != nil || len(got[herald.ChannelEmail]) != 1 {
		t.Fatalf("n_skew's attempts: %v, %v; want its one", got, err)
	}
}

// A closed partition's indexes are rebuilt packed once: the random ids'
// primary key and delivery guard shrink, every index stays valid and
// attached to its parent, each is marked and not rebuilt again, and what an
// interrupted rebuild left (an invalid …_ccnew index) is dropped. Its
// notifications are open, so no other test's maintenance drops the day once
// they are in; another package's run may compact it (then the checks hold
// all the same, but for the size check if that run comes in the instant
// between the inserts and the first sizes) or drop it while it is still
// empty (then it is made again).
func TestClosedPartitionIndexesAreCompacted(t *testing.T) {
	ctx := context.Background()
	day := store.PartitionedTables[0].Start(time.Now().Add(-27 * retention.Day))
	st, pool, tenantID := partitionTestTenant(t, "compact", day)
	notifications, deliveries := store.PartitionedTables[0].PartitionName(day), store.PartitionedTables[1].PartitionName(day)
	insertOpenDay(t, st, pool, tenantID, day, 3000)
	// An interrupted rebuild's leftover: an invalid index named as REINDEX
	// CONCURRENTLY names its new one (a unique index over duplicates fails).
	leftover := notifications + "_pkey_ccnew"
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Conn().PgConn().Exec(ctx, `CREATE UNIQUE INDEX CONCURRENTLY `+leftover+` ON `+notifications+` (template_id)`).ReadAll()
	conn.Release()
	if err == nil {
		t.Fatal("the leftover index was built valid")
	}
	type index struct {
		size             int64
		valid, compacted bool
		parent           string
	}
	indexes := func(partition string) map[string]index {
		t.Helper()
		rows, err := pool.Query(ctx, `
			SELECT c.relname, pg_relation_size(c.oid), i.indisvalid, COALESCE(obj_description(c.oid, 'pg_class'), '') <> '',
				COALESCE((SELECT h.inhparent::regclass::text FROM pg_inherits h WHERE h.inhrelid = c.oid), '')
			FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = $1::regclass`, partition)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]index{}
		for rows.Next() {
			var name string
			var i index
			if err := rows.Scan(&name, &i.size, &i.valid, &i.compacted, &i.parent); err != nil {
				t.Fatal(err)
			}
			out[name] = i
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	before := map[string]index{}
	maps.Copy(before, indexes(notifications))
	maps.Copy(before, indexes(deliveries))
	delete(before, leftover) // (another package's run may have dropped it already)
	compact := func() []store.CompactedIndex {
		t.Helper()
		res := compactWhenFree(t, st, store.CompactLimits{Budget: time.Hour})
		if res.Unfinished {
			t.Fatalf("left unfinished: %+v", res)
		}
		return res.Indexes
	}
	compact()
	after := map[string]index{}
	maps.Copy(after, indexes(notifications))
	maps.Copy(after, indexes(deliveries))
	if _, ok := after[leftover]; ok {
		t.Fatalf("the interrupted rebuild's index is still there: %v", after)
	}
	for name, b := range before {
		a, ok := after[name]
		if !ok || !a.valid || !a.compacted || a.parent != b.parent || b.parent == "" {
			t.Fatalf("%s after compaction: %+v (before %+v)", name, a, b)
		}
		// The random ids' keys (the primary key, the delivery guard) sat in
		// pages ~70 % full.
		if strings.HasSuffix(name, "_pkey") || strings.HasSuffix(name, "_key") {
			if float64(a.size) > 0.85*float64(b.size) {
				t.Errorf("%s: %d bytes before, %d after: not packed", name, b.size, a.size)
			}
		}
	}
	for _, c := range compact() {
		if _, ok := before[c.Name]; ok {
			t.Errorf("%s rebuilt a second time", c.Name)
		}
	}
	// The rebuilt keys still find every row.
	var found int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM notifications n JOIN deliveries d
		ON d.tenant_id = n.tenant_id AND d.notification_id = n.id AND d.channel = 'email' AND d.accepted_at = n.accepted_at
		WHERE n.tenant_id = $1`, tenantID).Scan(&found); err != nil || found != 3000 {
		t.Fatalf("found %d (%v), want 3000", found, err)
	}
}

// insertOpenDay writes n open (queued) notifications of tenantID accepted on
// day, with random ids, and their in-app and email deliveries; then it
// removes the compaction mark from the day's partitions' indexes (another
// package's run may have compacted the day while it was empty: unmarked, it
// is rebuilt with its rows). Another package's run may drop the day while
// it is still empty: it is made again and the write retried.
func insertOpenDay(t *testing.T, st *store.Store, pool *pgxpool.Pool, tenantID string, day time.Time, n int) {
	t.Helper()
	ctx := context.Background()
	for attempt := 0; ; attempt++ {
		_, err := pool.Exec(ctx, `
			WITH n AS (
				INSERT INTO notifications (tenant_id, id, user_id, template_id, status, accepted_at)
				SELECT $1, decode(md5(random()::text) || md5(random()::text), 'hex'), 'user-' || i % 500, 'order_shipped', 'queued',
					$2::timestamptz + i * interval '10 ms'
				FROM generate_series(1, $3::int) i
				RETURNING tenant_id, id, accepted_at)
			INSERT INTO deliveries (tenant_id, notification_id, channel, status, accepted_at)
			SELECT n.tenant_id, n.id, c, 'queued', n.accepted_at FROM n, unnest(ARRAY['in_app', 'email']) c`, tenantID, day, n)
		if err == nil {
			break
		}
		if attempt == 5 || !strings.Contains(err.Error(), "no partition of relation") {
			t.Fatal(err)
		}
		for _, pt := range store.PartitionedTables[:3] {
			if _, err := st.EnsurePartitions(ctx, pt, day, 0, &store.DDLStats{}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	testenv.UncommentIndexes(t, pool, store.PartitionedTables[0].PartitionName(day), store.PartitionedTables[1].PartitionName(day))
}

// compactWhenFree runs CompactPartitions over the closed partitions, waiting
// while another package's maintenance run is compacting (the same days: then
// this one finds them done).
func compactWhenFree(t *testing.T, st *store.Store, limits store.CompactLimits) store.CompactResult {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		res, err := st.CompactPartitions(context.Background(), time.Now().Add(-store.CompactAfter), limits, &store.DDLStats{}, nil, nil)
		if err == nil {
			return res
		}
		if !errors.Is(err, store.ErrCompactionBusy) || time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A rebuild that a transaction older than it holds up past the lock
// timeout is deferred: the run stops there, leaving the index unmarked and
// the rebuild's invalid …_ccnew behind; once the transaction ends, the next
// run drops the leftover and compacts the day.
func TestCompactionDefersARebuildHeldUpByAnOldTransaction(t *testing.T) {
	ctx := context.Background()
	day := store.PartitionedTables[0].Start(time.Now().Add(-28 * retention.Day))
	st, pool, tenantID := partitionTestTenant(t, "compact-defer", day)
	insertOpenDay(t, st, pool, tenantID, day, 1000)
	// A snapshot older than any rebuild: REINDEX … CONCURRENTLY waits for
	// it to end before the new index may be used.
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT count(*) FROM tenants`); err != nil {
		t.Fatal(err)
	}
	res := compactWhenFree(t, st, store.CompactLimits{LockTimeout: time.Second})
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	last := res.Indexes[len(res.Indexes)-1:]
	if !res.Unfinished || len(last) == 0 || !last[0].Deferred {
		t.Fatalf("want the run stopped at a deferred rebuild: %+v", res)
	}
	for _, c := range res.Indexes[:len(res.Indexes)-1] {
		if c.Deferred {
			t.Fatalf("the run went on past a deferred rebuild: %+v", res)
		}
	}
	var leftover bool
	// (A long name is cut to fit before its _ccnew.)
	if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE i.indrelid = (SELECT indrelid FROM pg_index WHERE indexrelid = $1::regclass) AND NOT i.indisvalid
			AND c.relname LIKE '%\_ccnew')`, pgx.Identifier{last[0].Name}.Sanitize()).Scan(&leftover); err != nil || !leftover {
		t.Fatalf("no invalid …_ccnew left by the deferred rebuild of %s (%v)", last[0].Name, err)
	}
	if res := compactWhenFree(t, st, store.CompactLimits{Budget: time.Hour}); res.Unfinished {
		t.Fatalf("the next run: %+v", res)
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE i.indrelid IN ($1::regclass, $2::regclass) AND (NOT i.indisvalid OR COALESCE(obj_description(c.oid, 'pg_class'), '') <> $3)`,
		store.PartitionedTables[0].PartitionName(day), store.PartitionedTables[1].PartitionName(day), store.CompactedComment).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d indexes of the day invalid or not compacted after the next run", left)
	}
}
