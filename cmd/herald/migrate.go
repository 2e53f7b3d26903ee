package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	"github.com/herald-notify/herald/internal/config"
	"github.com/herald-notify/herald/internal/retention"
	"github.com/herald-notify/herald/schema"
	"github.com/herald-notify/herald/worker"
	"github.com/herald-notify/herald/workflows"
)

// runMigrate is `herald migrate [--temporal-wait D] [up | down N | force N | version | search-attributes]`:
//
//   - up (the default) applies the schema migrations, then, when
//     HERALD_TEMPORAL_ADDRESS is set, registers Herald's search attributes
//     (workflows.SearchAttributes) on HERALD_TEMPORAL_NAMESPACE;
//   - down N rolls back N schema migrations (Temporal is left alone);
//   - force N records version N as applied and clean, running nothing: the
//     way out of a dirty version after a migration failed half way
//     (schema/migrations/README.md);
//   - version says the recorded version and whether it is dirty;
//   - search-attributes registers the search attributes only (no database).
//
// --temporal-wait retries the registration that long while Temporal does not
// answer yet (a container starting next to it); 0 tries once.
func runMigrate(ctx context.Context, cfg config.Config, args []string, stdout io.Writer, logger *slog.Logger) error {
	fs := newFlagSet("migrate")
	wait := fs.Duration("temporal-wait", 0, "keep trying to reach Temporal this long before giving up (0: try once)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	args = fs.Args()
	switch {
	case len(args) == 0 || args[0] == "up":
		if err := migrateSchema(cfg, stdout); err != nil {
			return err
		}
		if os.Getenv(config.EnvTemporalAddress) == "" {
			fmt.Fprintf(stdout, "search attributes: not registered (%s is not set)\n", config.EnvTemporalAddress)
			fmt.Fprintf(stdout, "namespace retention and maintenance schedule: not set (%s is not set)\n", config.EnvTemporalAddress)
			return nil
		}
		if err := registerSearchAttributes(ctx, cfg, stdout, logger, *wait); err != nil {
			return err
		}
		return prepareNamespace(ctx, cfg, stdout, logger)
	case args[0] == "search-attributes" && len(args) == 1:
		return registerSearchAttributes(ctx, cfg, stdout, logger, *wait)
	case args[0] == "down" && len(args) == 2:
		n, err := strconv.Atoi(args[1])
		if err != nil || n < 1 {
			return fmt.Errorf("migrate down takes a positive number of steps")
		}
		return schema.Down(cfg.DatabaseURL, n)
	case args[0] == "force" && len(args) == 2:
		n, err := strconv.Atoi(args[1])
		if err != nil || n < 0 {
			return fmt.Errorf("migrate force takes a version number (0 or more)")
		}
		if err := schema.Force(cfg.DatabaseURL, n); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "schema version recorded as %d, not dirty; nothing was run (run herald migrate to apply what follows)\n", n)
		return nil
	case args[0] == "version" && len(args) == 1:
		v, dirty, err := schema.Version(cfg.DatabaseURL)
		if err != nil {
			return err
		}
		state := "clean"
		if dirty {
			state = "dirty: the migration of that version failed half way (herald migrate force N; schema/migrations/README.md)"
		}
		fmt.Fprintf(stdout, "schema at version %d, %s\n", v, state)
		return nil
	default:
		return errUsage
	}
}

// migrateSchema applies every schema migration and says which version that is.
func migrateSchema(cfg config.Config, stdout io.Writer) error {
	v, err := schema.Up(cfg.DatabaseURL)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "schema at version %d\n", v)
	return nil
}

// registerSearchAttributes registers every search attribute of
// workflows.SearchAttributes missing from the configured namespace and says
// which it added; it retries for up to wait while Temporal does not answer.
func registerSearchAttributes(ctx context.Context, cfg config.Config, stdout io.Writer, logger *slog.Logger, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		added, err := ensureSearchAttributes(ctx, cfg, logger)
		if err == nil {
			where := fmt.Sprintf("namespace %s at %s", cfg.TemporalNamespace, cfg.TemporalAddress)
			if len(added) == 0 {
				fmt.Fprintf(stdout, "search attributes: all %d already registered (%s)\n", len(workflows.SearchAttributes), where)
			} else {
				fmt.Fprintf(stdout, "search attributes: registered %s (%s)\n", strings.Join(added, ", "), where)
			}
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		logger.Info("waiting for Temporal", "address", cfg.TemporalAddress, "namespace", cfg.TemporalNamespace,
			"error", err, "gives_up_in", time.Until(deadline).Round(time.Second))
		select {
		case <-ctx.Done():
			return err
		case <-time.After(2 * time.Second):
		}
	}
}

// prepareNamespace sets the namespace's workflow retention to the
// notification history's (HERALD_RETENTION_NOTIFICATIONS; Temporal keeps
// nothing under a day) and creates or updates the maintenance Schedule
// (docs/retention.md), saying what it did.
func prepareNamespace(ctx context.Context, cfg config.Config, stdout io.Writer, logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tc, err := client.DialContext(ctx, client.Options{
		HostPort: cfg.TemporalAddress, Namespace: cfg.TemporalNamespace,
		Logger: log.NewStructuredLogger(logger.With("component", "temporal")),
	})
	if err != nil {
		return fmt.Errorf("connect to Temporal at %s: %w", cfg.TemporalAddress, err)
	}
	defer tc.Close()
	keep := cfg.Retention.Notifications
	if keep <= 0 {
		keep = retention.Defaults.Notifications
	}
	before, after, err := worker.SetNamespaceRetention(ctx, tc, cfg.TemporalNamespace, keep)
	if err != nil {
		return err
	}
	how := "unchanged"
	if before != after {
		how = "was " + before.String()
	}
	note := ""
	if after != keep {
		note = fmt.Sprintf("; Temporal keeps at least a day, the notification history %s", keep)
	}
	fmt.Fprintf(stdout, "namespace %s: workflow retention %s (%s), matching the notification history's retention (HERALD_RETENTION_NOTIFICATIONS)%s\n",
		cfg.TemporalNamespace, after, how, note)
	created, err := worker.EnsureMaintenanceSchedule(ctx, tc, cfg.TaskQueue, cfg.MaintenanceEvery)
	if err != nil {
		return err
	}
	verb := "updated"
	if created {
		verb = "created"
	}
	fmt.Fprintf(stdout, "maintenance schedule %s: %s (every %s, task queue %s, one run at a time)\n",
		workflows.MaintenanceScheduleID, verb, cmp.Or(cfg.MaintenanceEvery, config.DefaultMaintenanceEvery), cfg.TaskQueue)
	return nil
}

// ensureSearchAttributes is one attempt of registerSearchAttributes.
func ensureSearchAttributes(ctx context.Context, cfg config.Config, logger *slog.Logger) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tc, err := client.DialContext(ctx, client.Options{
		HostPort: cfg.TemporalAddress, Namespace: cfg.TemporalNamespace,
		Logger: log.NewStructuredLogger(logger.With("component", "temporal")),
	})
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s: %w", cfg.TemporalAddress, err)
	}
	defer tc.Close()
	return worker.EnsureSearchAttributes(ctx, tc, cfg.TemporalNamespace)
}
