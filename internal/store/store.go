// Package store is Herald's PostgreSQL access layer: hand-written pgx queries, one
// file per table. Every query takes the tenant ID and filters by it. A missing row
// comes back as herald.ErrNotFound (dbx.NotFound translates pgx.ErrNoRows).
package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/herald-notify/herald/internal/dbx"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Store runs Herald's queries.
type Store struct {
	db dbx.DB
}

// New wraps a pool or a transaction (tests run a Store in a transaction they
// roll back).
func New(db dbx.DB) *Store { return &Store{db: db} }

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
