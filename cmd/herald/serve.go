package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"golang.org/x/sync/errgroup"

	"github.com/herald-notify/herald/activities"
	"github.com/herald-notify/herald/api"
	"github.com/herald-notify/herald/internal/config"
	"github.com/herald-notify/herald/internal/ratelimit"
	"github.com/herald-notify/herald/internal/secrets"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/unsubscribe"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/registry"
	"github.com/herald-notify/herald/providers/resolver"
	"github.com/herald-notify/herald/providers/sandbox"
	"github.com/herald-notify/herald/schema"
	"github.com/herald-notify/herald/worker"
)

// runServices runs the API and/or the worker until ctx is cancelled, then drains them.
func runServices(ctx context.Context, cfg config.Config, logger *slog.Logger, withAPI, withWorker bool) error {
	pool, err := store.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	st := store.New(pool)
	keys, err := secrets.FromEnv()
	if err != nil {
		return err
	}
	provStore := providers.NewStore(pool, keys)
	limiter := ratelimit.New(pool)
	sandboxRec := sandbox.NewPGRecorder(pool)

	tc, err := client.Dial(client.Options{
		HostPort: cfg.TemporalAddress, Namespace: cfg.TemporalNamespace,
		Logger: log.NewStructuredLogger(logger.With("component", "temporal")),
	})
	if err != nil {
		return fmt.Errorf("connect to Temporal at %s: %w", cfg.TemporalAddress, err)
	}
	defer tc.Close()

	g, ctx := errgroup.WithContext(ctx)
	if withWorker {
		acts := &activities.Activities{Store: st, Providers: provStore, Senders: resolver.New(provStore, resolver.Process{
			SendGridBaseURL: cfg.SendGridBaseURL, TwilioBaseURL: cfg.TwilioBaseURL, FCMBaseURL: cfg.FCMBaseURL,
			FCMTokenURL: cfg.FCMTokenURL, Egress: cfg.Egress,
			PublicBaseURL: cfg.PublicBaseURL, HTTPClient: &http.Client{Timeout: 20 * time.Second},
		}, sandboxRec),
			Unsubscribe: unsubscribe.FromEnv(), PublicBaseURL: cfg.PublicBaseURL,
			Limiter: limiter,
		}
		lanes := worker.NewLanes(tc, cfg.TaskQueue, acts)
		for _, w := range lanes {
			if err := w.Start(); err != nil {
				return fmt.Errorf("start worker: %w", err)
			}
		}
		logger.Info("worker started", "task_queue", cfg.TaskQueue, "lanes", len(lanes))
		g.Go(func() error {
			<-ctx.Done()
			for _, w := range lanes {
				w.Stop() // waits for running activities up to WorkerStopTimeout
			}
			return nil
		})
	}
	if withAPI {
		apiCfg := api.Config{
			TaskQueue: cfg.TaskQueue, DefaultDedupWindow: cfg.DefaultDedupWindow, AuthCacheTTL: 30 * time.Second,
			Providers: provStore, Registry: registry.New(), PublicBaseURL: cfg.PublicBaseURL, WebhookTolerance: cfg.WebhookTolerance,
			Unsubscribe: unsubscribe.FromEnv(),
			Limiter:     limiter, TenantLimits: api.TenantLimits{RatePerSecond: cfg.TenantRatePerSecond, Burst: cfg.TenantBurst, DailyQuota: cfg.TenantDailyQuota},
		}
		if cfg.SandboxAPI {
			apiCfg.Sandbox = sandboxRec
		}
		srv := &http.Server{
			Addr:              cfg.HTTPAddr,
			Handler:           api.New(st, tc, apiCfg, logger).Handler(),
			ReadHeaderTimeout: 10 * time.Second,
		}
		ln, err := net.Listen("tcp", cfg.HTTPAddr)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
		}
		logger.Info("API listening", "addr", "http://"+ln.Addr().String())
		g.Go(func() error {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
		g.Go(func() error {
			<-ctx.Done()
			shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
			defer cancel()
			return srv.Shutdown(shutdownCtx)
		})
	}
	return g.Wait()
}

func runMigrate(cfg config.Config, args []string, stdout io.Writer) error {
	switch {
	case len(args) == 0 || args[0] == "up":
		v, err := schema.Up(cfg.DatabaseURL)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "schema at version %d\n", v)
		return nil
	case args[0] == "down" && len(args) == 2:
		n, err := strconv.Atoi(args[1])
		if err != nil || n < 1 {
			return fmt.Errorf("migrate down takes a positive number of steps")
		}
		return schema.Down(cfg.DatabaseURL, n)
	default:
		return errUsage
	}
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
		fmt.Fprintf(stdout, "tenant %s (%s) created\nAPI key (shown once, only its SHA-256 is stored): %s\n", t.ID, t.Name, key)
		return nil
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
