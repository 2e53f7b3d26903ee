package testenv

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The benches' shared scaffolding: a size from the environment, seed
// statements, and what a piece of work wrote to the WAL.

// EnvInt returns the environment variable name as an integer, def when it is
// unset; a value that is not an integer fails the test.
func EnvInt(t testing.TB, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return n
}

// Seed runs each statement on pool with the first of args it names up to
// the highest ($1, $2, …: one naming $2 gets the first two, and must name $1
// too) and returns the rows they wrote. A statement without parameters may
// be several (ANALYZE a; ANALYZE b).
func Seed(t testing.TB, pool *pgxpool.Pool, args []any, statements ...string) int64 {
	t.Helper()
	var rows int64
	for _, q := range statements {
		used := len(args)
		for used > 0 && !strings.Contains(q, "$"+strconv.Itoa(used)) {
			used--
		}
		tag, err := pool.Exec(context.Background(), q, args[:used]...)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		rows += tag.RowsAffected()
	}
	return rows
}

// InOneTx runs the statements, each with args, in one transaction and
// returns how long it took to commit them: the benches' floor, the same rows
// removed by unbounded statements.
func InOneTx(t testing.TB, pool *pgxpool.Pool, args []any, statements ...string) time.Duration {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after the commit: nothing to roll back
	for _, q := range statements {
		if _, err := tx.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return time.Since(start)
}

// WAL runs work and returns how long it took and how many bytes of WAL the
// database wrote meanwhile (pg_current_wal_lsn before and after: everything
// the cluster wrote, so run it alone).
func WAL(t testing.TB, pool *pgxpool.Pool, work func()) (time.Duration, int64) {
	t.Helper()
	ctx := context.Background()
	var lsn string
	if err := pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	work()
	took := time.Since(start)
	var wal int64
	if err := pool.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint`, lsn).Scan(&wal); err != nil {
		t.Fatal(err)
	}
	return took, wal
}
