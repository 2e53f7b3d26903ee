// Package store is Herald's PostgreSQL access layer: hand-written pgx queries, one
// file per table. Every query takes the tenant ID and filters by it. pgx.ErrNoRows is
// translated into herald.ErrNotFound here, once.
package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// herald.ErrNotFound is returned when a row does not exist for the tenant.

// DBTX is what both *pgxpool.Pool and pgx.Tx offer; tests run a Store in a
// transaction they roll back.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Store runs Herald's queries.
type Store struct {
	db DBTX
}

// New wraps a pool or a transaction.
func New(db DBTX) *Store { return &Store{db: db} }

// Connect opens a pool and checks it answers.
func Connect(ctx context.Context, databaseURL string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	// pgxpool's default (4 connections on 2 CPUs) queues the API behind the worker;
	// a URL's pool_max_conns still wins.
	if !strings.Contains(databaseURL, "pool_max_conns") {
		cfg.MaxConns = max(16, cfg.MaxConns)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	return pool, nil
}

// Ping checks the database answers (readiness).
func (s *Store) Ping(ctx context.Context) error {
	var one int
	return s.db.QueryRow(ctx, "SELECT 1").Scan(&one)
}

// InTx runs fn in a transaction (a savepoint when the Store already wraps one).
func (s *Store) InTx(ctx context.Context, fn func(*Store) error) error {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	if err := fn(New(tx)); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func notFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return herald.ErrNotFound
	}
	return err
}
