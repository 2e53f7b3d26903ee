// Package testenv connects integration tests to the PostgreSQL and Temporal servers
// that `make test` starts. A missing service fails the test with the command that
// starts it; integration tests never skip silently.
package testenv

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/schema"
)

const howToStart = "start the test services with `make test` (or `scripts/test-services.sh start` and export the variables it prints)"

var migrateOnce sync.Once
var migrateErr error

// DatabaseURL returns HERALD_TEST_DATABASE_URL, migrated to the latest schema.
func DatabaseURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv("HERALD_TEST_DATABASE_URL")
	if url == "" {
		t.Fatalf("HERALD_TEST_DATABASE_URL is not set: %s", howToStart)
	}
	migrateOnce.Do(func() { _, migrateErr = schema.Up(url) })
	if migrateErr != nil {
		t.Fatalf("migrating %s: %v (%s)", url, migrateErr, howToStart)
	}
	return url
}

// Pool opens a pool on the test database, closed when the test ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := store.Connect(ctx, DatabaseURL(t))
	if err != nil {
		t.Fatalf("%v (%s)", err, howToStart)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TemporalAddress returns HERALD_TEST_TEMPORAL_ADDRESS.
func TemporalAddress(t testing.TB) string {
	t.Helper()
	addr := os.Getenv("HERALD_TEST_TEMPORAL_ADDRESS")
	if addr == "" {
		t.Fatalf("HERALD_TEST_TEMPORAL_ADDRESS is not set: %s", howToStart)
	}
	return addr
}

// TemporalClient dials the test Temporal server, closed when the test ends.
func TemporalClient(t testing.TB) client.Client {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: TemporalAddress(t), Namespace: "default",
		Logger: log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))})
	if err != nil {
		t.Fatalf("dial Temporal at %s: %v (%s)", TemporalAddress(t), err, howToStart)
	}
	t.Cleanup(c.Close)
	return c
}

// UniqueName returns a name unique to this test run, for tenants and task queues.
func UniqueName(t testing.TB, prefix string) string {
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	return prefix + "-" + name + "-" + time.Now().UTC().Format("150405.000000000")
}

// FreshDatabase creates an empty database (no migration) beside the test
// database, named prefix and a unique suffix, dropped when the test ends, and
// returns its URL: for tests of migrations and of what is global to a
// database (maintenance_runs, partitions), which the shared one mixes with
// other tests'.
func FreshDatabase(t testing.TB, prefix string) string {
	t.Helper()
	ctx := context.Background()
	admin := Pool(t)
	name := fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano())
	// CREATE DATABASE copies template1, which another creation going on at
	// the same moment (another test binary) holds: try again.
	for attempt := 0; ; attempt++ {
		_, err := admin.Exec(ctx, `CREATE DATABASE `+name)
		if err == nil {
			break
		}
		if attempt == 20 || !strings.Contains(err.Error(), "being accessed by other users") {
			t.Fatal(err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec(context.Background(), `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(DatabaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// FreshPool is a pool on a FreshDatabase migrated to version (0: the latest),
// closed when the test ends, and the database's URL.
func FreshPool(t testing.TB, prefix string, version uint) (*pgxpool.Pool, string) {
	t.Helper()
	dbURL := FreshDatabase(t, prefix)
	var err error
	if version == 0 {
		_, err = schema.Up(dbURL)
	} else {
		err = schema.To(dbURL, version)
	}
	if err != nil {
		t.Fatal(err)
	}
	pool, err := store.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, dbURL
}

// UncommentIndexes removes the comment of every index of the tables: the
// compaction step's mark (store.CompactedComment), so its next run rebuilds
// them (a test's day another package's run compacted while it was empty).
func UncommentIndexes(t testing.TB, pool *pgxpool.Pool, tables ...string) {
	t.Helper()
	for _, table := range tables {
		if _, err := pool.Exec(context.Background(), `
			DO $$ DECLARE i regclass; BEGIN
				FOR i IN SELECT indexrelid::regclass FROM pg_index WHERE indrelid = '`+table+`'::regclass LOOP
					EXECUTE format('COMMENT ON INDEX %s IS NULL', i);
				END LOOP;
			END $$`); err != nil {
			t.Fatal(err)
		}
	}
}
