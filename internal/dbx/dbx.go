// Package dbx is the database handle Herald's PostgreSQL code runs on (the
// store, the provider store, the sandbox recorder and the rate limiter), the
// one place pgx.ErrNoRows becomes herald.ErrNotFound, and the one place a
// notification id becomes the 32 bytes the database keeps
// (notification_ids.go). It imports nothing of Herald's but the domain words
// and the ids, so every layer that touches the database can take the same
// handle without an import cycle.
package dbx

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/herald-notify/herald/internal/herald"
)

// DB is what *pgxpool.Pool, *pgxpool.Conn and pgx.Tx all offer, so one query
// layer runs on a pool in production and in a transaction that a test rolls
// back. Begin on a transaction starts a savepoint.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
}

// NotFound turns pgx.ErrNoRows into herald.ErrNotFound and returns any other
// error unchanged. Callers for whom a missing row is an answer (a zero value, a
// refusal) test pgx.ErrNoRows themselves instead.
func NotFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return herald.ErrNotFound
	}
	return err
}
