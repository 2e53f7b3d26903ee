package main

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/herald-notify/herald/internal/config"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/testenv"
)

// BenchmarkTenantDelete removes a tenant of HERALD_BENCH_TENANT_USERS users
// (default 20,000), each with one notification (two deliveries, a sandbox
// copy), one inbox item and event, and one audit entry, with `herald tenant
// delete` (batches of 1,000), against a floor measured in the same run on an
// identical tenant: one unbounded DELETE per table, in the same order, in one
// transaction. It reports rows per second of both and their ratio.
//
//	go test -run '^$' -bench BenchmarkTenantDelete -benchtime 1x ./cmd/herald/
func BenchmarkTenantDelete(b *testing.B) {
	n := testenv.EnvInt(b, "HERALD_BENCH_TENANT_USERS", 20_000)
	ctx := context.Background()
	pool := testenv.Pool(b)
	st := store.New(pool)
	cfg := config.Config{DatabaseURL: testenv.DatabaseURL(b)}
	for b.Loop() {
		floorT, _, err := st.CreateTenant(ctx, "delete-bench-floor")
		if err != nil {
			b.Fatal(err)
		}
		cliT, _, err := st.CreateTenant(ctx, "delete-bench")
		if err != nil {
			b.Fatal(err)
		}
		rows := seedTenant(b, pool, floorT.ID, n)
		seedTenant(b, pool, cliT.ID, n)

		tables, err := st.TenantTables(ctx)
		if err != nil {
			b.Fatal(err)
		}
		var floorSQL []string
		for _, t := range tables {
			if t.Key == "" {
				floorSQL = append(floorSQL, fmt.Sprintf(`DELETE FROM %q WHERE tenant_id = $1`, t.Name))
			}
		}
		floor := testenv.InOneTx(b, pool, []any{floorT.ID}, append(floorSQL, `DELETE FROM tenants WHERE id = $1`)...)

		var out bytes.Buffer
		start := time.Now()
		if err := runTenantDelete(ctx, cfg, st, []string{"--confirm", cliT.ID, "--skip-temporal", cliT.ID}, &out); err != nil {
			b.Fatalf("%v\n%s", err, out.String())
		}
		took := time.Since(start)
		b.ReportMetric(float64(rows)/took.Seconds(), "rows/s")
		b.ReportMetric(float64(rows)/floor.Seconds(), "floor-rows/s")
		b.ReportMetric(took.Seconds()/floor.Seconds(), "delete/floor")
		b.Logf("%d rows: herald tenant delete %s (%.0f rows/s), one unbounded transaction %s (%.0f rows/s)\n%s",
			rows, took.Round(time.Millisecond), float64(rows)/took.Seconds(), floor.Round(time.Millisecond), float64(rows)/floor.Seconds(), out.String())
	}
}

// seedTenant writes n users with a notification each (two deliveries, a
// sandbox copy), an inbox item and event and an audit entry, and returns the
// rows written.
func seedTenant(b *testing.B, pool *pgxpool.Pool, tenantID string, n int) int64 {
	b.Helper()
	return testenv.Seed(b, pool, []any{tenantID, n},
		`INSERT INTO users (tenant_id, user_id, email) SELECT $1, 'u' || i, 'u' || i || '@example.com' FROM generate_series(1, $2::int) i`,
		`INSERT INTO notifications (tenant_id, id, user_id, template_id, channels, workflow_id, run_id, dedup_key_hash, status, accepted_at)
			SELECT $1, decode(md5($1 || '_' || i) || md5('r' || $1 || '_' || i), 'hex'), 'u' || i, 'order', ARRAY['in_app', 'email'], 'wf', 'run', md5($1 || i), 'delivered', now()
			FROM generate_series(1, $2::int) i`,
		`INSERT INTO deliveries (tenant_id, notification_id, channel, status, accepted_at)
			SELECT $1, decode(md5($1 || '_' || i) || md5('r' || $1 || '_' || i), 'hex'), ch, 'delivered', now() FROM generate_series(1, $2::int) i, unnest(ARRAY['in_app', 'email']) ch`,
		`INSERT INTO sandbox_messages (tenant_id, notification_id, channel, idempotency_key, recipient, subject, body, payload)
			SELECT $1, decode(md5($1 || '_' || i) || md5('r' || $1 || '_' || i), 'hex'), 'email', 'k_' || i, 'u' || i || '@example.com', 'Hello', 'Body', '{}' FROM generate_series(1, $2::int) i`,
		`INSERT INTO inbox (tenant_id, user_id, notification_id, title, body, category, created_at)
			SELECT $1, 'u' || i, decode(md5($1 || '_' || i) || md5('r' || $1 || '_' || i), 'hex'), 'Hello', 'A body', 'general', now() FROM generate_series(1, $2::int) i`,
		`INSERT INTO inbox_events (tenant_id, user_id, seq, kind, notification_id, item, total, unread, unseen, created_at)
			SELECT $1, 'u' || i, 1, 'created', decode(md5($1 || '_' || i) || md5('r' || $1 || '_' || i), 'hex'), '{}', 1, 1, 1, now() FROM generate_series(1, $2::int) i`,
		`INSERT INTO audit_log (tenant_id, api_key_id, action, target, status, details)
			SELECT $1, 'k', 'user.put', 'user_id=u' || i, 200, '{}' FROM generate_series(1, $2::int) i`,
		`ANALYZE users; ANALYZE notifications; ANALYZE deliveries; ANALYZE inbox`)
}
