package main

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/herald-notify/herald/internal/config"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/schema"
	"github.com/herald-notify/herald/worker"
)

// connect is how the -campaign and -inbox-streams benches reach the services a
// Herald they host in-process runs on: the schema migrated, a Temporal client
// (logging through logger) with Herald's search attributes registered, and a
// pool on the database. The caller closes both.
func connect(ctx context.Context, cfg config.Config, logger *slog.Logger) (*pgxpool.Pool, client.Client, error) {
	if _, err := schema.Up(cfg.DatabaseURL); err != nil {
		return nil, nil, err
	}
	tc, err := client.Dial(client.Options{HostPort: cfg.TemporalAddress, Namespace: cfg.TemporalNamespace,
		Logger: sdklog.NewStructuredLogger(logger)})
	if err != nil {
		return nil, nil, err
	}
	if _, err := worker.EnsureSearchAttributes(ctx, tc, cfg.TemporalNamespace); err != nil {
		tc.Close()
		return nil, nil, err
	}
	pool, err := store.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		tc.Close()
		return nil, nil, err
	}
	return pool, tc, nil
}
