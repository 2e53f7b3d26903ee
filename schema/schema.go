// Package schema holds Herald's numbered SQL migrations, embedded in the binary and
// applied with golang-migrate.
package schema

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"time"

	"github.com/golang-migrate/migrate/v4"
	pgxmigrate "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Migrations is the migration files, under migrations/ (tests read them).
var Migrations fs.FS = migrations

// migrationLockKey is the advisory lock Up, Down, To and Force take, polling,
// before golang-migrate takes its own. golang-migrate waits for its lock in a
// blocking pg_advisory_lock, a statement that stays active for as long as
// another process migrates; a CREATE INDEX CONCURRENTLY in that migration
// (schema/migrations/README.md#indexes-on-big-tables) waits for every active
// transaction to end, that one included, and PostgreSQL breaks the cycle
// with a deadlock error. A process waiting here is idle between tries, so
// the index build does not wait for it. (A migrator of a release before this
// lock, run at the same time, still waits the blocking way: run one release's
// migrator at a time, schema/migrations/README.md.)
const migrationLockKey int64 = 0x6865_7261_6c64 // "herald"

// migrationLockPoll is how often a waiting process tries the lock again, and
// migrationLockReport how often it says it is still waiting, naming the
// holder's backend.
const (
	migrationLockPoll   = 100 * time.Millisecond
	migrationLockReport = 10 * time.Second
)

// MigrationLockWait bounds how long Up, Down, To and Force wait for another
// migrator (a long CREATE INDEX CONCURRENTLY on a big table takes minutes;
// a migrator stuck for longer than this is for an operator to look at).
var MigrationLockWait = 30 * time.Minute

// withMigrate runs step on a golang-migrate instance while this process holds
// migrationLockKey, then closes the instance. The lock and every statement
// of golang-migrate share one session (a database/sql pool of one
// connection, handed to golang-migrate's driver): the lock cannot outlive, or
// be lost apart from, the session that migrates, and it goes with it.
func withMigrate(databaseURL string, step func(*migrate.Migrate) error) (err error) {
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	driverOwnsDB := false
	defer func() {
		if !driverOwnsDB {
			_ = db.Close()
		}
	}()
	if err := takeMigrationLock(ctx, db); err != nil {
		return err
	}
	src, err := iofs.New(migrations, "migrations")
	if err != nil {
		return err
	}
	driver, err := pgxmigrate.WithInstance(db, &pgxmigrate.Config{})
	if err != nil {
		return fmt.Errorf("open migrations: %w", err)
	}
	driverOwnsDB = true // the driver's Close closes its session and db
	m, err := migrate.NewWithInstance("iofs", src, "pgx5", driver)
	if err != nil {
		_ = driver.Close()
		return fmt.Errorf("open migrations: %w", err)
	}
	defer closeMigrate(m, &err)
	return step(m)
}

// takeMigrationLock polls migrationLockKey on db's one session until it is
// held, saying every migrationLockReport which backend holds it, and gives
// up after MigrationLockWait.
func takeMigrationLock(ctx context.Context, db *sql.DB) error {
	start, reported := time.Now(), time.Now()
	for {
		var held bool
		if err := db.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1)`, migrationLockKey).Scan(&held); err != nil {
			return fmt.Errorf("migration lock: %w", err)
		}
		if held {
			return nil
		}
		if waited := time.Since(start); waited > MigrationLockWait {
			return fmt.Errorf("migration lock: another migrator (backend %s) has held it for over %s", migrationLockHolder(ctx, db), MigrationLockWait)
		}
		if time.Since(reported) >= migrationLockReport {
			reported = time.Now()
			slog.Info("waiting for the migration lock", "holder_backend", migrationLockHolder(ctx, db), "waited", time.Since(start).Round(time.Second))
		}
		time.Sleep(migrationLockPoll)
	}
}

// migrationLockHolder is the pid of the backend holding migrationLockKey, or
// "unknown".
func migrationLockHolder(ctx context.Context, db *sql.DB) string {
	var pid int64
	// An advisory lock on a bigint key is stored as its high and low halves.
	// Advisory locks are per database: the holder is this database's.
	err := db.QueryRowContext(ctx, `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND classid = ($1::bigint >> 32)::oid AND objid = ($1::bigint & 4294967295)::oid AND objsubid = 1 LIMIT 1`, migrationLockKey).Scan(&pid)
	if err != nil {
		return "unknown"
	}
	return fmt.Sprint(pid)
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

// Force sets the recorded version to version and clears the dirty flag,
// without running any migration: the way out after a migration failed half
// way (a CREATE INDEX CONCURRENTLY cancelled or failed leaves the version
// dirty, and golang-migrate refuses up and down on a dirty version). The
// operator first undoes what the failed migration did (for an index build:
// DROP INDEX CONCURRENTLY IF EXISTS the invalid index), then forces the
// version before it, then migrates up again (schema/migrations/README.md).
func Force(databaseURL string, version int) error {
	return withMigrate(databaseURL, func(m *migrate.Migrate) error {
		if err := m.Force(version); err != nil {
			return fmt.Errorf("migrate force %d: %w", version, err)
		}
		return nil
	})
}

// Version is the recorded version and whether it is dirty (0, false: none).
func Version(databaseURL string) (version uint, dirty bool, err error) {
	err = withMigrate(databaseURL, func(m *migrate.Migrate) error {
		var verr error
		version, dirty, verr = m.Version()
		if errors.Is(verr, migrate.ErrNilVersion) {
			return nil
		}
		return verr
	})
	return version, dirty, err
}
