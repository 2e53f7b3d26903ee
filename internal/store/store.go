// Package store is Herald's PostgreSQL access layer: hand-written pgx queries, one
// file per table. Every query takes the tenant ID and filters by it. A missing row
// comes back as herald.ErrNotFound (dbx.NotFound translates pgx.ErrNoRows).
package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/herald-notify/herald/internal/dbx"
	"github.com/herald-notify/herald/internal/retention"
)

// Store runs Herald's queries.
type Store struct {
	db dbx.DB
	// inboxCap is the operator's cap on a user's inbox items (SetInboxCap).
	inboxCap int
}

// New wraps a pool or a transaction (tests run a Store in a transaction they
// roll back). Its statements pass notification ids as the database keeps
// them (dbx.WithNotificationIDs).
func New(db dbx.DB) *Store {
	return &Store{db: dbx.WithNotificationIDs(db), inboxCap: retention.Defaults.InboxItems}
}

// SetInboxCap sets the operator's cap on a user's inbox items
// (HERALD_RETENTION_INBOX_ITEMS): every insert keeps the newest that many of
// the user's items, or the tenant's own smaller cap (insertInboxItems).
func (s *Store) SetInboxCap(n int) {
	if n > 0 {
		s.inboxCap = n
	}
}

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
	// Notification ids go to the database as bytes through the bytea codec
	// (dbx.WithNotificationIDs), which needs the parameters' types: the two
	// modes that do not describe a statement would send an id's 66 characters.
	switch cfg.ConnConfig.DefaultQueryExecMode {
	case pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol:
		return nil, fmt.Errorf("parse database URL: default_query_exec_mode %s is not supported (Herald needs statements described: cache_statement, cache_describe or describe_exec)",
			cfg.ConnConfig.DefaultQueryExecMode)
	}
	cfg.AfterConnect = dbx.AfterConnect
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
	inner := New(tx)
	inner.inboxCap = s.inboxCap
	if err := fn(inner); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
