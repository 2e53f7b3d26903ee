package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/retention"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/testenv"
)

// BenchmarkPruneUnpartitioned measures what the batched deletes of the tables
// that are not time-partitioned cost (docs/retention.md#why-these-tables-are-not-partitioned):
// HERALD_BENCH_PRUNE_ROWS (default 100,000) expired rows each of sandbox
// messages, webhook messages with an attempt each, and inbox items (100 a
// user) of one tenant, deleted by the maintenance's statements (store.Prune,
// store.PruneInboxAge) 500 a batch, against the floor measured in the same
// run: as many delivery attempts in a day partition, detached and dropped
// (store.DropPartitions). It reports each kind's rows per second, WAL per
// 1,000 rows, and its time over the floor's.
//
//	go test -run '^$' -bench BenchmarkPruneUnpartitioned -benchtime 1x ./internal/store/
func BenchmarkPruneUnpartitioned(b *testing.B) {
	n := testenv.EnvInt(b, "HERALD_BENCH_PRUNE_ROWS", 100_000)
	ctx := context.Background()
	pool := testenv.Pool(b)
	st := store.New(pool)
	old := time.Now().Add(-400 * retention.Day)
	attempts := store.PartitionedTables[2]
	for b.Loop() {
		tn, _, err := st.CreateTenant(ctx, "prune-bench")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := st.EnsurePartitions(ctx, attempts, old, 0, &store.DDLStats{}, nil); err != nil {
			b.Fatal(err)
		}
		testenv.Seed(b, pool, []any{tn.ID, n, old},
			`INSERT INTO sandbox_messages (tenant_id, notification_id, channel, idempotency_key, recipient, subject, body, payload, created_at)
				SELECT $1, decode(md5('n' || i) || md5('r' || i), 'hex'), 'email', 'k_' || i, 'u' || i || '@example.com', 'Your order shipped', 'Order o-123 is on its way.',
					'{"to": "u@example.com", "subject": "Your order shipped"}', $3 FROM generate_series(1, $2::int) i`,
			`INSERT INTO webhook_endpoints (tenant_id, id, url, secret_sealed) VALUES ($1, 'we_bench', 'https://127.0.0.1/hook', '\x00')`,
			`INSERT INTO webhook_messages (tenant_id, endpoint_id, msg_id, event_key, event_type, notification_id, payload, status, attempts, created_at, updated_at)
				SELECT $1, 'we_bench', 'msg_' || i, 'n_' || i || ':delivered', 'notification.delivered', 'n_' || i,
					'{"type": "notification.delivered", "notification_id": "n_1"}', 'delivered', 1, $3, $3 FROM generate_series(1, $2::int) i`,
			`INSERT INTO webhook_attempts (tenant_id, endpoint_id, message_id, attempt, status_code, outcome, duration_ms, at)
				SELECT $1, 'we_bench', id, 1, 200, 'delivered', 40, created_at FROM webhook_messages WHERE tenant_id = $1`,
			`INSERT INTO users (tenant_id, user_id) SELECT $1, 'u' || i FROM generate_series(0, $2::int / 100) i`,
			`INSERT INTO inbox (tenant_id, user_id, notification_id, title, body, category, created_at)
				SELECT $1, 'u' || (i / 100), decode(md5('n' || i) || md5('r' || i), 'hex'), 'Your order shipped', 'Order o-123 is on its way.', 'general', $3 FROM generate_series(1, $2::int) i`,
			`INSERT INTO inbox_state (tenant_id, user_id, total, unread, unseen, oldest_at)
				SELECT $1, user_id, count(*), count(*), count(*), min(created_at) FROM inbox WHERE tenant_id = $1 GROUP BY user_id`,
			`INSERT INTO delivery_attempts (tenant_id, notification_id, channel, attempt, provider, outcome, at)
				SELECT $1, decode(md5('n' || i) || md5('r' || i), 'hex'), 'email', 1, 'sandbox', 'accepted', $3 FROM generate_series(1, $2::int) i`,
			`ANALYZE sandbox_messages; ANALYZE webhook_messages; ANALYZE webhook_attempts; ANALYZE inbox; ANALYZE delivery_attempts`)
		cutoff := old.Add(retention.Day)
		measure := func(name string, run func() (int64, bool, error)) (time.Duration, int64) {
			var rows int64
			took, wal := testenv.WAL(b, pool, func() {
				for {
					n, more, err := run()
					if err != nil {
						b.Fatalf("%s: %v", name, err)
					}
					rows += n
					if !more {
						return
					}
				}
			})
			return took, wal
		}
		floor, floorWAL := measure("partition drop", func() (int64, bool, error) {
			_, _, err := st.DropPartitions(ctx, attempts, cutoff.Add(store.LateEnd), cutoff, &store.DDLStats{}, nil)
			return int64(n), false, err
		})
		b.ReportMetric(floor.Seconds(), "floor-s")
		b.Logf("floor: %d delivery attempts in a day partition dropped in %s, %.1f kB of WAL", n, floor.Round(time.Millisecond), float64(floorWAL)/1e3)
		kinds := []struct {
			name string
			run  func() (int64, bool, error)
		}{
			{"sandbox_messages", func() (int64, bool, error) {
				d, err := st.Prune(ctx, store.PruneSandbox, tn.ID, cutoff, 500)
				return d, d == 500, err
			}},
			{"webhook_attempts", func() (int64, bool, error) {
				d, err := st.Prune(ctx, store.PruneWebhookAttempts, tn.ID, cutoff, 500)
				return d, d == 500, err
			}},
			{"webhook_messages", func() (int64, bool, error) {
				d, err := st.Prune(ctx, store.PruneWebhookMessages, tn.ID, cutoff, 500)
				return d, d == 500, err
			}},
			{"inbox_age", func() (int64, bool, error) {
				return st.PruneInboxAge(ctx, tn.ID, cutoff, 5) // 5 users of 100 items: 500 rows a batch
			}},
		}
		for _, k := range kinds {
			took, wal := measure(k.name, k.run)
			b.ReportMetric(float64(n)/took.Seconds(), k.name+"-rows/s")
			b.ReportMetric(float64(wal)/float64(n)*1000/1e3, k.name+"-WAL-kB/1k-rows")
			b.ReportMetric(took.Seconds()/floor.Seconds(), k.name+"/floor")
			b.Logf("%s: %d rows in %s (%.0f rows/s), %.0f kB of WAL per 1,000 rows, %.0fx the partition drop's time",
				k.name, n, took.Round(time.Millisecond), float64(n)/took.Seconds(), float64(wal)/float64(n), took.Seconds()/floor.Seconds())
		}
		var left int
		if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM sandbox_messages WHERE tenant_id = $1) + (SELECT count(*) FROM webhook_messages WHERE tenant_id = $1)
			+ (SELECT count(*) FROM inbox WHERE tenant_id = $1)`, tn.ID).Scan(&left); err != nil || left != 0 {
			b.Fatalf("%d rows left, %v", left, err)
		}
	}
}
