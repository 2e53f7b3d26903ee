package schema_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-notify/herald/internal/testenv"
	"github.com/herald-notify/herald/schema"
)

// Processes that migrate one database at the same moment (several test
// packages, or a worker and an API started together) all succeed: the one
// that waits does not hold up the other's CREATE INDEX CONCURRENTLY into a
// deadlock.
func TestConcurrentMigrationsAllSucceed(t *testing.T) {
	dbURL := testenv.FreshDatabase(t, "herald_migrate")
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := schema.Up(dbURL)
			errs <- err
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatalf("a concurrent migration failed: %v", err)
		}
	}
}

// A migration that failed half way leaves the version dirty, and
// golang-migrate then refuses to go on: `herald migrate force N-1` after
// undoing what it did, then `herald migrate`, finishes it (the recovery
// schema/migrations/README.md gives for a failed CREATE INDEX CONCURRENTLY).
func TestForceRecoversADirtyVersion(t *testing.T) {
	dbURL := testenv.FreshDatabase(t, "herald_migrate")
	latest, err := schema.Up(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// The last index build (0140) failed: no index, the version dirty. The
	// version to force is the file before it (0136: golang-migrate refuses a
	// version no file has).
	const index, failed, before = "dead_letters_unresolved_created_idx", 140, 136
	if _, err := conn.Exec(ctx, `DROP INDEX `+index); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `UPDATE schema_migrations SET version = $1, dirty = true`, failed); err != nil {
		t.Fatal(err)
	}
	if v, dirty, err := schema.Version(dbURL); err != nil || v != failed || !dirty {
		t.Fatalf("version = %d, dirty %t, %v; want %d, dirty", v, dirty, err, failed)
	}
	if _, err := schema.Up(dbURL); err == nil {
		t.Fatal("migrate up on a dirty version succeeded")
	}
	if err := schema.Force(dbURL, before); err != nil {
		t.Fatal(err)
	}
	if v, err := schema.Up(dbURL); err != nil || v != latest {
		t.Fatalf("migrate up after force: version %d, %v", v, err)
	}
	var valid bool
	if err := conn.QueryRow(ctx, `SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = $1`, index).Scan(&valid); err != nil || !valid {
		t.Fatalf("%s after force and up: valid %t, %v", index, valid, err)
	}
	if v, dirty, err := schema.Version(dbURL); err != nil || v != latest || dirty {
		t.Fatalf("version = %d, dirty %t, %v; want %d, clean", v, dirty, err, latest)
	}
}

// A migrator that cannot get the lock names the backend holding it and gives
// up after MigrationLockWait instead of waiting silently for ever.
func TestMigrationLockWaitNamesTheHolder(t *testing.T) {
	dbURL := testenv.FreshDatabase(t, "herald_migrate")
	ctx := context.Background()
	holder, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	var pid int64
	if err := holder.QueryRow(ctx, `SELECT pg_backend_pid() FROM (SELECT pg_advisory_lock(x'686572616c64'::bigint)) l`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	old := schema.MigrationLockWait
	schema.MigrationLockWait = 300 * time.Millisecond
	defer func() { schema.MigrationLockWait = old }()
	_, err = schema.Up(dbURL)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("backend %d", pid)) {
		t.Fatalf("migrate up while another holds the lock: %v; want an error naming backend %d", err, pid)
	}
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_unlock(x'686572616c64'::bigint)`); err != nil {
		t.Fatal(err)
	}
	if _, err := schema.Up(dbURL); err != nil {
		t.Fatalf("migrate up once the lock is free: %v", err)
	}
}
