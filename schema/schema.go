// Package schema holds Herald's numbered SQL migrations, embedded in the binary and
// applied with golang-migrate.
package schema

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5" // registers pgx5://
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Migrations is the migration files, under migrations/ (tests read them).
var Migrations fs.FS = migrations

func newMigrate(databaseURL string) (*migrate.Migrate, error) {
	src, err := iofs.New(migrations, "migrations")
	if err != nil {
		return nil, err
	}
	m, err := migrate.NewWithSourceInstance("iofs", src, pgxURL(databaseURL))
	if err != nil {
		return nil, fmt.Errorf("open migrations: %w", err)
	}
	return m, nil
}

// pgxURL turns a postgres:// URL into the pgx5:// scheme golang-migrate's pgx driver wants.
func pgxURL(u string) string {
	for _, p := range []string{"postgres://", "postgresql://"} {
		if rest, ok := strings.CutPrefix(u, p); ok {
			return "pgx5://" + rest
		}
	}
	return u
}

// migrationLockKey is the advisory lock Up, Down and To take, polling,
// before golang-migrate takes its own. golang-migrate waits for its lock in a
// blocking pg_advisory_lock, a statement that stays active for as long as
// another process migrates; a CREATE INDEX CONCURRENTLY in that migration
// (schema/migrations/README.md#indexes-on-big-tables) waits for every active
// transaction to end, that one included, and PostgreSQL breaks the cycle
// with a deadlock error. A process waiting here is idle between tries, so
// the index build does not wait for it.
const migrationLockKey int64 = 0x6865_7261_6c64 // "herald"

// migrationLockPoll is how often a waiting process tries the lock again.
const migrationLockPoll = 100 * time.Millisecond

// withMigrate runs step on a golang-migrate instance while this process holds
// migrationLockKey, then closes the instance.
func withMigrate(databaseURL string, step func(*migrate.Migrate) error) (err error) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return fmt.Errorf("connect for the migration lock: %w", err)
	}
	// Closing the session releases the lock, whatever step did.
	defer conn.Close(ctx) //nolint:errcheck // the lock goes with the session
	for {
		var held bool
		if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, migrationLockKey).Scan(&held); err != nil {
			return fmt.Errorf("migration lock: %w", err)
		}
		if held {
			break
		}
		time.Sleep(migrationLockPoll)
	}
	m, err := newMigrate(databaseURL)
	if err != nil {
		return err
	}
	defer closeMigrate(m, &err)
	return step(m)
}

func closeMigrate(m *migrate.Migrate, err *error) {
	srcErr, dbErr := m.Close()
	if *err == nil {
		*err = errors.Join(srcErr, dbErr)
	}
}

// Up applies every pending migration. It is safe to run concurrently from
// several processes: one migrates at a time (migrationLockKey), the others
// wait and then find nothing left to do.
func Up(databaseURL string) (version uint, err error) {
	err = withMigrate(databaseURL, func(m *migrate.Migrate) error {
		if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
			return fmt.Errorf("migrate up: %w", err)
		}
		var verr error
		version, _, verr = m.Version()
		return verr
	})
	return version, err
}

// Down rolls back the given number of migrations.
func Down(databaseURL string, steps int) error {
	return withMigrate(databaseURL, func(m *migrate.Migrate) error {
		if err := m.Steps(-steps); err != nil && !errors.Is(err, migrate.ErrNoChange) {
			return fmt.Errorf("migrate down: %w", err)
		}
		return nil
	})
}

// To migrates up or down to version: the tests of a migration run it on a
// database at the version before it.
func To(databaseURL string, version uint) error {
	return withMigrate(databaseURL, func(m *migrate.Migrate) error {
		if err := m.Migrate(version); err != nil && !errors.Is(err, migrate.ErrNoChange) {
			return fmt.Errorf("migrate to %d: %w", version, err)
		}
		return nil
	})
}
