// Package schema holds Herald's numbered SQL migrations, embedded in the binary and
// applied with golang-migrate.
package schema

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5" // registers pgx5://
	"github.com/golang-migrate/migrate/v4/source/iofs"
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

// Up applies every pending migration. It is safe to run concurrently from several
// processes: golang-migrate holds a PostgreSQL advisory lock.
func Up(databaseURL string) (version uint, err error) {
	m, err := newMigrate(databaseURL)
	if err != nil {
		return 0, err
	}
	defer closeMigrate(m, &err)
	if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return 0, fmt.Errorf("migrate up: %w", err)
	}
	v, _, err := m.Version()
	return v, err
}

// Down rolls back the given number of migrations.
func Down(databaseURL string, steps int) (err error) {
	m, err := newMigrate(databaseURL)
	if err != nil {
		return err
	}
	defer closeMigrate(m, &err)
	if err := m.Steps(-steps); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrate down: %w", err)
	}
	return nil
}

func closeMigrate(m *migrate.Migrate, err *error) {
	srcErr, dbErr := m.Close()
	if *err == nil {
		*err = errors.Join(srcErr, dbErr)
	}
}

// To migrates up or down to version: the tests of a migration run it on a
// database at the version before it.
func To(databaseURL string, version uint) (err error) {
	m, err := newMigrate(databaseURL)
	if err != nil {
		return err
	}
	defer closeMigrate(m, &err)
	if err := m.Migrate(version); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrate to %d: %w", version, err)
	}
	return nil
}
