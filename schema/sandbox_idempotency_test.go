package schema_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5" // registers pgx5://
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/herald-notify/herald/internal/testenv"
	"github.com/herald-notify/herald/schema"
)

// migrateTo moves the database at dbURL to version v (up or down).
func migrateTo(t *testing.T, dbURL string, v uint) {
	t.Helper()
	src, err := iofs.New(os.DirFS("migrations"), ".")
	if err != nil {
		t.Fatal(err)
	}
	m, err := migrate.NewWithSourceInstance("iofs", src, "pgx5://"+strings.TrimPrefix(dbURL, "postgres://"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Migrate(v); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		t.Fatalf("migrate to %d: %v", v, err)
	}
}

type sandboxRow struct {
	rows, calls int
	first       int64
}

// sandboxRows is, per tenant/key/recipient, the number of rows, the calls they
// count (the rows before 0042, which has no calls column) and the lowest id.
func sandboxRows(t *testing.T, db *pgx.Conn, withCalls bool) map[string]sandboxRow {
	t.Helper()
	calls := "count(*)"
	if withCalls {
		calls = "sum(calls)"
	}
	rows, err := db.Query(context.Background(), `
		SELECT tenant_id || ' ' || idempotency_key || ' ' || recipient, count(*), `+calls+`, min(id)
		FROM sandbox_messages GROUP BY tenant_id, idempotency_key, recipient`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]sandboxRow{}
	for rows.Next() {
		var k string
		var r sandboxRow
		if err := rows.Scan(&k, &r.rows, &r.calls, &r.first); err != nil {
			t.Fatal(err)
		}
		out[k] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSandboxIdempotencyMigration: 0042 merges the duplicate sandbox messages
// recorded before it into their oldest row (their number in calls) and makes
// (tenant, idempotency key, recipient) unique; its down migration gives every
// call its row back; up again merges them again.
func TestSandboxIdempotencyMigration(t *testing.T) {
	dbURL := testenv.FreshDatabase(t, "herald_migrate")
	migrateTo(t, dbURL, 41)
	ctx := context.Background()
	db, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	insert := func(tenant, notification, channel, recipient string) {
		t.Helper()
		if _, err := db.Exec(ctx, `
			INSERT INTO sandbox_messages (tenant_id, notification_id, channel, idempotency_key, recipient, body, payload)
			VALUES ($1, $2, $3, $2 || ':' || $3, $4, 'b', '{}')`, tenant, notification, channel, recipient); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(ctx, `INSERT INTO tenants (id, name) VALUES ('t1', 'x'), ('t2', 'y')`); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		insert("t1", "n1", "email", "a@example.com") // sent three times
	}
	insert("t1", "n1", "sms", "+14155552671")
	insert("t1", "n1", "push", "tok-1") // two devices, one key
	insert("t1", "n1", "push", "tok-2")
	insert("t1", "n1", "push", "tok-1") // the first device again
	insert("t2", "n1", "email", "a@example.com")
	before := sandboxRows(t, db, false)

	migrateTo(t, dbURL, 42)
	after := sandboxRows(t, db, true)
	if len(after) != len(before) {
		t.Fatalf("after 0042: %v, want the keys of %v", after, before)
	}
	for k, b := range before {
		if a := after[k]; a.rows != 1 || a.calls != b.rows || a.first != b.first {
			t.Errorf("after 0042, %s: %+v; want 1 row, the oldest (%d), counting %d calls", k, a, b.first, b.rows)
		}
	}
	var pgErr *pgconn.PgError
	if _, err := db.Exec(ctx, `
		INSERT INTO sandbox_messages (tenant_id, notification_id, channel, idempotency_key, recipient, body, payload)
		VALUES ('t1', 'n1', 'email', 'n1:email', 'a@example.com', 'b', '{}')`); !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		t.Fatalf("a second row for a key and recipient: %v, want a unique violation", err)
	}

	migrateTo(t, dbURL, 41)
	down := sandboxRows(t, db, false)
	for k, b := range before {
		if d := down[k]; d.rows != b.rows || d.first != b.first {
			t.Errorf("after 0042 down, %s: %+v; want %d rows again, the oldest %d", k, d, b.rows, b.first)
		}
	}
	insert("t1", "n1", "email", "a@example.com") // no unique index any more

	if _, err := schema.Up(dbURL); err != nil {
		t.Fatal(err)
	}
	again := sandboxRows(t, db, true)
	if a := again["t1 n1:email a@example.com"]; a.rows != 1 || a.calls != 4 || a.first != before["t1 n1:email a@example.com"].first {
		t.Errorf("0042 up again: %+v, want 1 row counting 4 calls", a)
	}
	if len(again) != len(before) {
		t.Errorf("0042 up again: %v", again)
	}
}
