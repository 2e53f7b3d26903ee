package activities_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/herald-notify/herald/activities"
	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/retention"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/testenv"
)

// TestMaintenanceWeek is the maintenance bench (docs/retention.md#measured):
// a fresh database takes a constant number of notifications a simulated day
// (HERALD_BENCH_MAINTENANCE_PER_DAY, default 50,000: each an in-app and an
// email delivery, an attempt and an inbox event, written with INSERT …
// SELECT, not the API) for 8 simulated days, with the operator's notification
// history and inbox age 3 days and one tenant of four keeping its history 2; after each day one
// maintenance run (the partitions step and the prune pass, as the workflow
// runs them, at the simulated clock). It logs each day's table sizes (they
// must stop growing once the retention is full: the test fails if the
// notification history's last day is over 1.1x its fourth; the weekly tables
// drop a week at a time) and each run's time, DDL statements,
// longest statement, lock retries, rows deleted and WAL written
// (pg_current_wal_lsn before and after). Run it with
// HERALD_BENCH_MAINTENANCE=1.
func TestMaintenanceWeek(t *testing.T) {
	if os.Getenv("HERALD_BENCH_MAINTENANCE") != "1" {
		t.Skip("set HERALD_BENCH_MAINTENANCE=1 to run the maintenance bench")
	}
	perDay := 50_000
	if v, err := strconv.Atoi(os.Getenv("HERALD_BENCH_MAINTENANCE_PER_DAY")); err == nil && v > 0 {
		perDay = v
	}
	ctx := context.Background()
	pool, _ := testenv.FreshPool(t, "herald_bench", 0)
	st := store.New(pool)
	op := retention.Defaults
	op.Notifications, op.InboxAge = 3*retention.Day, 7*retention.Day
	a := &activities.Activities{Store: st, Retention: op}
	var tenants []string
	for i := range 4 {
		tn, _, err := st.CreateTenant(ctx, fmt.Sprintf("bench-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		tenants = append(tenants, tn.ID)
		if _, err := pool.Exec(ctx, `INSERT INTO users (tenant_id, user_id) SELECT $1, 'u' || g FROM generate_series(0, 999) g`, tn.ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.UpdateTenantSettings(ctx, tenants[0], func(ts *store.TenantSettings) {
		ts.Retention = retention.Tenant{Notifications: retention.Seconds(2 * retention.Day / time.Second)}
	}); err != nil {
		t.Fatal(err)
	}
	start := store.PartitionedTables[0].Start(time.Now()).Add(10 * retention.Day) // a clock of its own, ahead of the real one
	sizes := func() (map[string]int64, int64) {
		out := map[string]int64{}
		var total int64
		for _, pt := range store.PartitionedTables {
			var n int64
			if err := pool.QueryRow(ctx, `SELECT COALESCE(sum(pg_total_relation_size(relid)), 0) FROM pg_partition_tree($1)`, pt.Table).Scan(&n); err != nil {
				t.Fatal(err)
			}
			out[pt.Table] = n
			total += n
		}
		return out, total
	}
	run := func(now time.Time) string {
		var lsn0, lsn1 string
		if err := pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn0); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		parts, err := a.MaintenancePartitions(ctx, contract.MaintenancePartitionsInput{Now: now})
		if err != nil {
			t.Fatal(err)
		}
		partsTook := time.Since(t0)
		deleted := map[string]int64{}
		from := contract.MaintenanceCursor{}
		for {
			res, err := a.MaintenancePrune(ctx, contract.MaintenancePruneInput{Now: now, From: from})
			if err != nil {
				t.Fatal(err)
			}
			for k, n := range res.Deleted {
				deleted[k] += n
			}
			if res.Done {
				break
			}
			from = res.Next
		}
		took := time.Since(t0)
		var wal int64
		if err := pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text, pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint`, lsn0).Scan(&lsn1, &wal); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("run %s (partitions %s: %d created, %d dropped, %d DDL statements, longest %s, %d lock retries; prune: %v), WAL %.1f MB",
			took.Round(time.Millisecond), partsTook.Round(time.Millisecond), len(parts.Created), len(parts.Dropped), parts.Statements,
			parts.MaxWait.Round(time.Microsecond), parts.Retries, deleted, float64(wal)/1e6)
	}
	var history []int64
	for day := range 8 {
		now := start.Add(time.Duration(day) * retention.Day)
		if day == 0 {
			run(now) // the partitions of the simulated clock
		}
		for i, tn := range tenants {
			n := perDay / len(tenants)
			// Every row spread over the simulated day's 24 hours.
			if _, err := pool.Exec(ctx, `
				WITH n AS (
					INSERT INTO notifications (tenant_id, id, user_id, template_id, channels, workflow_id, run_id, dedup_key_hash, status, accepted_at, category, updated_at)
					SELECT $1, decode(md5($2 || '_' || g) || md5('r' || $2 || '_' || g), 'hex'), 'u' || (g % 1000), 'order_shipped', '{in_app,email}', 'notification/' || $1 || '/' || md5(g::text),
						md5($2 || g::text)::uuid::text, left(md5(g::text), 32), 'delivered', $3::timestamptz + (g * interval '86399 seconds' / $4::int), 'transactional',
						$3::timestamptz + (g * interval '86399 seconds' / $4::int)
					FROM generate_series(1, $4::int) g
					RETURNING id, user_id, accepted_at
				), d AS (
					INSERT INTO deliveries (tenant_id, notification_id, channel, status, provider, provider_message_id, attempts, sent_at, delivered_at, updated_at, accepted_at)
					SELECT $1, id, ch, CASE ch WHEN 'in_app' THEN 'delivered' ELSE 'sent' END, CASE ch WHEN 'in_app' THEN 'inbox' ELSE 'sandbox' END,
						CASE ch WHEN 'email' THEN md5(id) END, 1, accepted_at, accepted_at, accepted_at, accepted_at
					FROM n CROSS JOIN unnest('{in_app,email}'::text[]) ch
				), e AS (
					INSERT INTO inbox_events (tenant_id, user_id, seq, kind, notification_id, item, total, unread, unseen, created_at)
					SELECT $1, user_id, row_number() OVER () + $5, 'item.created', id,
						jsonb_build_object('notification_id', id, 'title', 'Your order shipped', 'body', 'Order o-123 is on its way.'), 100, 3, 3, accepted_at
					FROM n
				)
				INSERT INTO delivery_attempts (tenant_id, notification_id, channel, attempt, provider, outcome, at)
				SELECT $1, id, 'email', 1, 'sandbox', 'accepted', accepted_at FROM n`,
				tn, fmt.Sprintf("d%d_%d", day, i), now, n, int64(day)*10_000_000); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := pool.Exec(ctx, `ANALYZE`); err != nil {
			t.Fatal(err)
		}
		// The day is over: the run at its end.
		line := run(now.Add(retention.Day))
		by, total := sizes()
		history = append(history, by["notifications"]+by["deliveries"]+by["delivery_attempts"])
		t.Logf("day %d: %s; tables %.1f MB %v", day+1, line, float64(total)/1e6, mb(by))
	}
	// The daily tables (the notification history) are flat once their 3
	// days are full; the weekly ones (inbox events, audit) drop a week at a
	// time and are not, within 8 days.
	if last, full := history[len(history)-1], history[3]; float64(last) > 1.1*float64(full) {
		t.Fatalf("the notification history grew from %d to %d bytes once its retention was full", full, last)
	}
}

func mb(by map[string]int64) map[string]string {
	out := map[string]string{}
	for k, v := range by {
		out[k] = fmt.Sprintf("%.1fMB", float64(v)/1e6)
	}
	return out
}
