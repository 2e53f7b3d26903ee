package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/testenv"
)

// BenchmarkEraseUser erases a user with HERALD_BENCH_ERASE_INBOX inbox items
// (default 100,000, as many inbox events) and a fifth as many notifications
// (two deliveries and a sandbox copy each), against a floor measured in the
// same run on an identical user: the same rows removed by unbounded
// statements in one transaction (the cascade from the profile, one UPDATE of
// the notifications, one DELETE of the sandbox copies). It reports the
// erasure's time, the floor's, their ratio, and the rows per statement the
// erasure never exceeds (store.EraseBatch).
//
//	go test -run '^$' -bench BenchmarkEraseUser -benchtime 1x ./internal/store/
func BenchmarkEraseUser(b *testing.B) {
	n := testenv.EnvInt(b, "HERALD_BENCH_ERASE_INBOX", 100_000)
	ctx := context.Background()
	pool := testenv.Pool(b)
	st := store.New(pool)
	for b.Loop() {
		tn, _, err := st.CreateTenant(ctx, "erase-bench")
		if err != nil {
			b.Fatal(err)
		}
		for _, u := range []string{"floor", "erased"} {
			seedUser(b, pool, tn.ID, u, n)
		}

		floor := testenv.InOneTx(b, pool, []any{tn.ID, "floor"},
			`DELETE FROM sandbox_messages WHERE tenant_id = $1 AND notification_id IN (SELECT id FROM notifications WHERE tenant_id = $1 AND user_id = $2)`,
			`UPDATE notifications SET user_id = 'erased_floor' WHERE tenant_id = $1 AND user_id = $2`,
			`DELETE FROM inbox_events WHERE tenant_id = $1 AND user_id = $2`,
			`DELETE FROM users WHERE tenant_id = $1 AND user_id = $2`)

		start := time.Now()
		res, err := st.EraseUser(ctx, tn.ID, "erased", store.ErasedUserID([]byte("bench"), tn.ID, "erased"), 0)
		if err != nil {
			b.Fatal(err)
		}
		erase := time.Since(start)
		if res.Deleted["inbox"] != int64(n) || res.Anonymised["notifications"] != int64(n/5) {
			b.Fatalf("erased %v / %v", res.Deleted, res.Anonymised)
		}
		b.ReportMetric(erase.Seconds(), "erase-s")
		b.ReportMetric(floor.Seconds(), "floor-s")
		b.ReportMetric(erase.Seconds()/floor.Seconds(), "erase/floor")
		b.ReportMetric(float64(res.Statements), "statements")
		b.ReportMetric(float64(n)/erase.Seconds(), "inbox-rows/s")
		b.Logf("%d inbox items, %d inbox events, %d notifications: erased in %s in %d statements of at most %d rows; the floor (one unbounded transaction) %s",
			n, res.Deleted["inbox_events"], n/5, erase.Round(time.Millisecond), res.Statements, store.EraseBatch, floor.Round(time.Millisecond))
	}
}

// seedUser writes a user with n inbox items and events and n/5 notifications
// (in_app and email deliveries, a sandbox copy each) by plain INSERT … SELECT.
func seedUser(b *testing.B, pool *pgxpool.Pool, tenantID, userID string, n int) {
	b.Helper()
	testenv.Seed(b, pool, []any{tenantID, userID, n},
		`INSERT INTO users (tenant_id, user_id, email, phone) VALUES ($1, $2, $2 || '@example.com', '+14155550100')`,
		`INSERT INTO inbox (tenant_id, user_id, notification_id, title, body, category, created_at)
			SELECT $1, $2, decode(md5($2 || '_' || i) || md5('r' || $2 || '_' || i), 'hex'), 'Hello ' || $2, 'A body of about sixty characters for ' || $2 || ' number ' || i, 'general', now()
			FROM generate_series(1, $3::int) i`,
		`INSERT INTO inbox_events (tenant_id, user_id, seq, kind, notification_id, item, total, unread, unseen, created_at)
			SELECT $1, $2, i, 'created', decode(md5($2 || '_' || i) || md5('r' || $2 || '_' || i), 'hex'), jsonb_build_object('title', 'Hello ' || $2), i, i, i, now()
			FROM generate_series(1, $3::int) i`,
		`INSERT INTO notifications (tenant_id, id, user_id, template_id, channels, workflow_id, run_id, dedup_key_hash, status, accepted_at)
			SELECT $1, decode(md5($2 || '_' || i) || md5('r' || $2 || '_' || i), 'hex'), $2, 'order', ARRAY['in_app', 'email'], 'wf', 'run', md5($2 || i), 'delivered', now()
			FROM generate_series(1, $3::int / 5) i`,
		`INSERT INTO deliveries (tenant_id, notification_id, channel, status, accepted_at)
			SELECT $1, decode(md5($2 || '_' || i) || md5('r' || $2 || '_' || i), 'hex'), ch, 'delivered', now() FROM generate_series(1, $3::int / 5) i, unnest(ARRAY['in_app', 'email']) ch`,
		`INSERT INTO sandbox_messages (tenant_id, notification_id, channel, idempotency_key, recipient, subject, body, payload)
			SELECT $1, decode(md5($2 || '_' || i) || md5('r' || $2 || '_' || i), 'hex'), 'email', 'k_' || $2 || '_' || i, $2 || '@example.com', 'Hello', 'Body', '{}'
			FROM generate_series(1, $3::int / 5) i`,
		`ANALYZE inbox; ANALYZE inbox_events; ANALYZE notifications`)
}
