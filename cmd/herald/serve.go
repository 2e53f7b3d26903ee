package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	"github.com/herald-notify/herald/api"
	"github.com/herald-notify/herald/internal/app"
	"github.com/herald-notify/herald/internal/config"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/tracing"
)

// runServices runs the API and/or the worker until ctx is cancelled, then drains
// them (see app.App.Run).
func runServices(ctx context.Context, cfg config.Config, logger *slog.Logger, withAPI, withWorker bool) error {
	pool, err := store.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped (SIGTERM) while connecting: nothing ran, nothing to drain
		}
		return err
	}
	defer pool.Close()
	tc, err := client.Dial(client.Options{
		HostPort: cfg.TemporalAddress, Namespace: cfg.TemporalNamespace,
		Logger: log.NewStructuredLogger(logger.With("component", "temporal")),
	})
	if err != nil {
		return fmt.Errorf("connect to Temporal at %s: %w", cfg.TemporalAddress, err)
	}
	defer tc.Close()
	service := "herald"
	switch {
	case withAPI && !withWorker:
		service = "herald-api"
	case withWorker && !withAPI:
		service = "herald-worker"
	}
	tr, shutdownTracing, err := tracing.FromEnv(ctx, service)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdownTracing(sctx); err != nil {
			logger.Warn("flushing traces failed", "error", err)
		}
	}()
	a, err := app.New(cfg, pool, tc, app.Options{Logger: logger, Tracing: tr})
	if err != nil {
		return err
	}
	defer a.Close()
	return a.Run(ctx, app.Services{API: withAPI, Worker: withWorker})
}

func runTenant(ctx context.Context, cfg config.Config, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errUsage
	}
	pool, err := store.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	st := store.New(pool)
	switch args[0] {
	case "create":
		fs := newFlagSet("tenant create")
		name := fs.String("name", "", "tenant name (required)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if strings.TrimSpace(*name) == "" {
			return fmt.Errorf("tenant create needs --name")
		}
		t, key, err := st.CreateTenant(ctx, *name)
		if err != nil {
			return err
		}
		// Recorded after the fact (the log is per tenant, and the tenant did not
		// exist before): a failure to record is reported, the tenant stays.
		if err := audited(ctx, st, t.ID, api.AuditTenantCreate, "tenant_id="+t.ID, map[string]any{"name": t.Name}, func() error { return nil }); err != nil {
			return fmt.Errorf("tenant %s created, but recording it in its audit log failed: %w", t.ID, err)
		}
		fmt.Fprintf(stdout, "tenant %s (%s) created\nAPI key (shown once, only its SHA-256 is stored): %s\n", t.ID, t.Name, key)
		return nil
	case "limits":
		return runTenantLimits(ctx, st, args[1:], stdout)
	case "delete":
		return runTenantDelete(ctx, cfg, st, args[1:], stdout)
	case "list":
		ts, err := st.ListTenants(ctx)
		if err != nil {
			return err
		}
		for _, t := range ts {
			fmt.Fprintf(stdout, "%s\t%s\t%s\n", t.ID, t.Name, t.CreatedAt.UTC().Format(time.RFC3339))
		}
		return nil
	default:
		return errUsage
	}
}
