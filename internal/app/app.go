// Package app wires Herald once: from a config.Config, a PostgreSQL pool and a
// Temporal client it builds the store, the provider config store, resolver and
// sandbox recorder, the rate limiter, the unsubscribe signer, the API handler and
// the Temporal worker lanes. cmd/herald, cmd/herald-bench and internal/apitest all
// build Herald here and differ only in the config and Options they pass.
package app

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	"golang.org/x/sync/errgroup"

	"github.com/herald-notify/herald/activities"
	"github.com/herald-notify/herald/api"
	"github.com/herald-notify/herald/internal/config"
	"github.com/herald-notify/herald/internal/dbx"
	"github.com/herald-notify/herald/internal/egress"
	"github.com/herald-notify/herald/internal/inboxlive"
	"github.com/herald-notify/herald/internal/metrics"
	"github.com/herald-notify/herald/internal/ratelimit"
	"github.com/herald-notify/herald/internal/secrets"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/tracing"
	"github.com/herald-notify/herald/internal/unsubscribe"
	"github.com/herald-notify/herald/internal/webhooks"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/breaker"
	"github.com/herald-notify/herald/providers/registry"
	"github.com/herald-notify/herald/providers/resolver"
	"github.com/herald-notify/herald/providers/sandbox"
	"github.com/herald-notify/herald/worker"
	"github.com/herald-notify/herald/workflows"
)

// AuthCacheTTL bounds how long one API process keeps honouring a key revoked
// through another process, or a deleted user (see api.Config.AuthCacheTTL); the
// process that revokes a key refuses it at once.
const AuthCacheTTL = 30 * time.Second

// ProviderHTTPTimeout bounds one provider API call when Options.ProviderHTTPClient is nil.
const ProviderHTTPTimeout = 20 * time.Second

// Options are what a caller may set besides the config. The zero Options is what
// the herald binary runs with.
type Options struct {
	// Logger logs the API's requests and errors; nil: slog.Default().
	Logger *slog.Logger
	// SecretsKey is a HERALD_SECRETS_KEY value (base64 of 32 bytes) for a process
	// that makes its own (tests, the bench); "" reads HERALD_SECRETS_KEY and
	// HERALD_SECRETS_PREVIOUS_KEYS. It seals provider credentials and signs
	// unsubscribe links.
	SecretsKey string
	// ProviderHTTPClient sends the provider API calls; nil: a client with
	// ProviderHTTPTimeout.
	ProviderHTTPClient *http.Client
	// Breaker tunes the per-account circuit breakers (zero: the defaults).
	Breaker breaker.Config
	// APIDB and APITemporal, when set, replace the pool and the Temporal client
	// under the API only (the bench times the API's queries and starts); the
	// worker keeps the plain ones.
	APIDB       dbx.DB
	APITemporal client.Client
	// AuthCacheTTL replaces the AuthCacheTTL constant (0: the constant); tests
	// shorten it to watch a revoked key be refused.
	AuthCacheTTL time.Duration
	// Metrics receives every metric (nil: a new registry per App, with the
	// config's tenant-label setting); App.Metrics serves it.
	Metrics *metrics.Metrics
	// Tracing makes the spans (nil or its zero value: tracing off);
	// tracing.FromEnv reads OTEL_EXPORTER_OTLP_ENDPOINT.
	Tracing *tracing.Tracing
	// NoDueSequence turns the per-user due sequence off for single
	// notifications (neither the accept path nor the run numbers them; campaign
	// batches still do): the due-order bench's floor, never in production,
	// where the feed's order depends on it.
	NoDueSequence bool
	// NoSignals turns metrics off (nothing recorded, GET /metrics 404) and
	// leaves the Temporal clients as given: no SDK metrics handler, no tracing
	// interceptor (the bench's -signals off).
	NoSignals bool
}

// App is one wired Herald.
type App struct {
	// Store, Providers and Sandbox are the shared stores (tests read them).
	Store     *store.Store
	Providers *providers.Store
	Sandbox   sandbox.Recorder
	// Activities is what every worker lane registers.
	Activities *activities.Activities

	// Metrics is this Herald's registry (GET /metrics).
	Metrics *metrics.Metrics

	cfg      config.Config
	temporal client.Client
	handler  http.Handler
	log      *slog.Logger
	// hub is the API's inbox stream listener (one LISTEN connection, opened on
	// the first stream).
	hub     *inboxlive.Hub
	api     *api.Server
	tracing *tracing.Tracing
	noSig   bool
	// derived are the clients made by withSignals, closed by Close.
	mu      sync.Mutex
	derived []client.Client
}

// New wires Herald. Nothing runs until Run (or the caller starts Handler and
// Workers itself).
func New(cfg config.Config, pool *pgxpool.Pool, tc client.Client, opts Options) (*App, error) {
	keys, signer, tokenKey, err := openSecrets(opts.SecretsKey)
	if err != nil {
		return nil, err
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	hc := opts.ProviderHTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: ProviderHTTPTimeout}
	}
	m := opts.Metrics
	if m == nil && !opts.NoSignals {
		m = metrics.New(metrics.Options{TenantLabels: cfg.MetricsTenantLabels})
	}
	a := &App{Store: store.New(pool), Providers: providers.NewStore(pool, keys), Sandbox: sandbox.NewPGRecorder(pool),
		Metrics: m, cfg: cfg, log: logger, tracing: opts.Tracing, noSig: opts.NoSignals}
	a.temporal = a.withSignals(tc)
	m.RegisterDeadLettersOpen(func(ctx context.Context) (float64, error) {
		n, err := a.Store.CountOpenDeadLetters(ctx)
		return float64(n), err
	}, 10*time.Second)
	limiter := ratelimit.New(pool)
	reg := registry.New()
	policy := cfg.Egress
	if policy == nil {
		policy = egress.Default()
	}
	// Tenant webhooks: the providers' allowlist, on the web's ports only.
	policy = policy.WithPorts(append([]uint16{80, 443}, cfg.WebhookPorts...)...)
	emitter := &webhooks.Emitter{Store: a.Store, Temporal: a.temporal, Log: logger, Settings: webhooks.Settings{
		TaskQueue: cfg.TaskQueue, Retry: workflows.WebhookRetry{Initial: cfg.WebhookRetryInitial,
			MaxInterval: cfg.WebhookRetryMaxInterval, For: cfg.WebhookRetryFor}}}
	webhookTimeout := cfg.WebhookTimeout
	if webhookTimeout <= 0 {
		webhookTimeout = config.DefaultWebhookTimeout
	}
	webhookClient := policy.Client(webhookTimeout)
	webhookClient.Transport = a.tracing.Transport(webhookClient.Transport)
	a.Activities = &activities.Activities{Store: a.Store, Providers: a.Providers,
		Senders: resolver.New(a.Providers, resolver.Process{
			SendGridBaseURL: cfg.SendGridBaseURL, TwilioBaseURL: cfg.TwilioBaseURL, FCMBaseURL: cfg.FCMBaseURL,
			FCMTokenURL: cfg.FCMTokenURL, Egress: cfg.Egress,
			PublicBaseURL: cfg.PublicBaseURL, HTTPClient: hc, Breaker: opts.Breaker, Registry: reg,
			SandboxFallback: cfg.SandboxFallback, WrapTransport: a.tracing.Transport,
		}, a.Sandbox),
		Unsubscribe: signer, PublicBaseURL: cfg.PublicBaseURL, Limiter: limiter, Metrics: m,
		Webhooks: emitter, WebhookSender: &webhooks.Sender{Store: a.Store, Keys: keys, Client: webhookClient},
		Digests: workflows.NewClient(a.temporal, cfg.TaskQueue), NoDueSequence: opts.NoDueSequence, Retention: cfg.Retention,
		ErasureKey: store.ErasureKeyFrom(tokenKey)}
	a.Store.SetInboxCap(cfg.Retention.InboxItems)

	apiStore, apiLimiter, apiTemporal := a.Store, limiter, a.temporal
	if opts.APIDB != nil {
		apiStore, apiLimiter = store.New(opts.APIDB), ratelimit.New(opts.APIDB)
	}
	if opts.APITemporal != nil {
		apiTemporal = opts.APITemporal
	}
	authTTL := AuthCacheTTL
	if opts.AuthCacheTTL > 0 {
		authTTL = opts.AuthCacheTTL
	}
	apiCfg := api.Config{
		NoDueSequence:      opts.NoDueSequence,
		TemporalNamespace:  cfg.TemporalNamespace,
		DefaultDedupWindow: cfg.DefaultDedupWindow, AuthCacheTTL: authTTL, PublicBaseURL: cfg.PublicBaseURL,
		OperatorKey: cfg.OperatorKey, Metrics: m, MetricsToken: cfg.MetricsToken, Unsubscribe: signer,
		Limits: api.LimitConfig{Limiter: apiLimiter,
			Tenant: api.TenantLimits{RatePerSecond: cfg.TenantRatePerSecond, Burst: cfg.TenantBurst, DailyQuota: cfg.TenantDailyQuota,
				MaxAudienceSize: cfg.CampaignMaxAudience, MaxConcurrentCampaigns: cfg.CampaignMaxConcurrent, MaxListBytes: cfg.ListMaxBytes},
			Cost: api.CostLimits{Preview: bucket(cfg.PreviewLimit), TemplateSave: bucket(cfg.TemplateSaveLimit),
				Redrive: bucket(cfg.RedriveLimit), BulkRedrive: bucket(cfg.BulkRedriveLimit), UserImport: bucket(cfg.UserImportLimit),
				CampaignCreate: bucket(cfg.CampaignCreateLimit), ListUpload: bucket(cfg.ListUploadLimit)},
			AuthFailures: api.Rate{PerSecond: cfg.AuthFailureLimit.Rate, Burst: cfg.AuthFailureLimit.Burst}},
		Users:     api.UserConfig{PushTokensPerUser: cfg.PushTokensPerUser},
		Providers: api.ProviderConfig{Store: a.Providers, Registry: reg, WebhookTolerance: cfg.WebhookTolerance},
		Inbox: api.InboxConfig{UserTokenKey: tokenKey, Secrets: keys, Heartbeat: cfg.InboxHeartbeat,
			ActionRate: api.Rate{PerSecond: cfg.InboxActionLimit.Rate, Burst: cfg.InboxActionLimit.Burst}},
		Webhooks:  api.WebhookConfig{Emitter: emitter, Keys: keys, Egress: policy},
		Campaigns: api.CampaignConfig{PageSize: cfg.CampaignPageSize, Window: cfg.CampaignWindow, InDoubtWait: cfg.CampaignInDoubtWait},
		Retention: cfg.Retention,
		Ordering:  api.OrderingConfig{MinHold: cfg.OrderingMinHold, MaxHold: cfg.OrderingMaxHold},
	}
	a.hub = inboxlive.New(pool.Config().ConnConfig, inboxlive.Limits{PerUser: cfg.InboxStreamsPerUser,
		PerTenant: cfg.InboxStreamsPerTenant, PerProcess: cfg.InboxStreamsPerProcess,
		PageBytes: cfg.InboxStreamPageBytes, MemoryBytes: cfg.InboxStreamsMemoryBytes}, logger)
	apiCfg.Inbox.Hub = a.hub
	m.RegisterInboxStreamsOpen(a.hub.Open)
	m.RegisterInboxStreamCounters(a.hub.Wakeups, a.hub.Reads)
	m.RegisterInboxStreamMemory(a.hub.MemoryReserved, a.hub.SlowClients)
	if cfg.SandboxAPI {
		apiCfg.Providers.Sandbox = a.Sandbox
	}
	a.api = api.New(apiStore, workflows.NewClient(apiTemporal, cfg.TaskQueue), apiCfg, logger)
	a.handler = a.tracing.Handler(a.api.Handler())
	return a, nil
}

// withSignals returns a client on tc's connection that reports the SDK's
// metrics into the App's registry and, with tracing on, carries the trace
// through workflow starts, workflows and activities. A client that is not the
// SDK's own (a test or bench wrapper) is returned as it is.
func (a *App) withSignals(tc client.Client) client.Client {
	if a.noSig || tc == nil {
		return tc
	}
	ints, err := a.tracing.TemporalInterceptors()
	if err != nil {
		a.log.Warn("tracing interceptor unavailable; workflows are not traced", "error", err)
	}
	ns := a.cfg.TemporalNamespace
	if ns == "" {
		ns = client.DefaultNamespace
	}
	c, err := client.NewClientFromExisting(tc, client.Options{Namespace: ns, MetricsHandler: a.Metrics.TemporalHandler(),
		Interceptors: ints, Logger: sdklog.NewStructuredLogger(a.log.With("component", "temporal"))})
	if err != nil {
		a.log.Warn("Temporal client kept without metrics and tracing", "error", err)
		return tc
	}
	a.mu.Lock()
	a.derived = append(a.derived, c)
	a.mu.Unlock()
	return c
}

// Close stops the inbox listener and closes the Temporal clients the App
// derived (the connections stay open while the caller's own clients are).
func (a *App) Close() {
	a.hub.Close()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range a.derived {
		c.Close()
	}
	a.derived = nil
}

func bucket(b config.Bucket) api.Bucket { return api.Bucket{RatePerSecond: b.Rate, Burst: b.Burst} }

// openSecrets opens the secrets keyring, the unsubscribe signer and the user
// token key from key, or from the environment when key is "".
func openSecrets(key string) (*secrets.Keyring, *unsubscribe.Signer, []byte, error) {
	if key == "" {
		k, err := secrets.FromEnv()
		if err != nil {
			return nil, nil, nil, err
		}
		return k, unsubscribe.FromEnv(), UserTokenKey(os.Getenv(secrets.EnvKey)), nil
	}
	raw, err := base64.StdEncoding.DecodeString(key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("secrets key: %w", err)
	}
	k, err := secrets.New(raw)
	if err != nil {
		return nil, nil, nil, err
	}
	return k, unsubscribe.NewSigner([]byte(key)), UserTokenKey(key), nil
}

// UserTokenKey derives the key user tokens are signed with from a
// HERALD_SECRETS_KEY value: every process with the same secrets key verifies the
// tokens any of them minted, and the key itself never signs anything else.
func UserTokenKey(secretsKey string) []byte {
	m := hmac.New(sha256.New, []byte(strings.TrimSpace(secretsKey)))
	m.Write([]byte("herald inbox user tokens v1"))
	return m.Sum(nil)
}

// InboxHub is the API's inbox stream hub (tests and the bench read its gauge).
func (a *App) InboxHub() *inboxlive.Hub { return a.hub }

// CloseStreams ends the API's open inbox streams (register it with the
// http.Server's RegisterOnShutdown, as Run does).
func (a *App) CloseStreams() { a.api.CloseStreams() }

// Handler is the API's HTTP handler.
func (a *App) Handler() http.Handler { return a.handler }

// Workers returns a new set of worker lanes (one SDK worker per priority lane) on
// the config's task queue, polling with tc (nil: the App's client). A stopped SDK
// worker cannot start again, so each call makes new ones.
func (a *App) Workers(tc client.Client) []sdkworker.Worker {
	if tc == nil {
		tc = a.temporal
	} else {
		tc = a.withSignals(tc)
	}
	return worker.NewLanes(tc, a.cfg.TaskQueue, a.Activities, a.cfg.WorkerStopTimeout)
}

// HTTPServer returns an http.Server for h with cfg's timeouts; the server's own
// errors (a broken connection, a bad request line) go to logger.
func HTTPServer(cfg config.Config, h http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{Handler: h,
		ReadHeaderTimeout: cfg.HTTPReadHeaderTimeout, ReadTimeout: cfg.HTTPReadTimeout,
		WriteTimeout: cfg.HTTPWriteTimeout, IdleTimeout: cfg.HTTPIdleTimeout,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
}

// Serve serves srv on ln until ctx is done, then shuts it down gracefully: new
// connections are refused and in-flight requests get grace to finish.
func Serve(ctx context.Context, srv *http.Server, ln net.Listener, grace time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err // Serve never returns nil
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("shut down the API: %w", err)
	}
	return nil
}

// Services says what Run runs.
type Services struct {
	API, Worker bool
}

// Run serves the API on the config's HTTPAddr and/or runs the worker lanes until
// ctx is done, then drains both (HTTP requests up to ShutdownTimeout, running
// activities up to WorkerStopTimeout). If either fails (the listener, a fatal
// worker error) the other is stopped and the error returned.
func (a *App) Run(ctx context.Context, s Services) error {
	var ln net.Listener
	if s.API {
		var err error
		if ln, err = net.Listen("tcp", a.cfg.HTTPAddr); err != nil {
			return fmt.Errorf("listen on %s: %w", a.cfg.HTTPAddr, err)
		}
	}
	g, ctx := errgroup.WithContext(ctx)
	if s.Worker {
		worker.SetCacheSize(a.cfg.WorkerCacheSize)
		lanes := a.Workers(nil)
		a.log.Info("worker starting", "task_queue", a.cfg.TaskQueue, "lanes", len(lanes), "stop_timeout", a.cfg.WorkerStopTimeout,
			"cache_size", a.cfg.WorkerCacheSize)
		g.Go(func() error {
			err := worker.Run(ctx, lanes)
			if err != nil {
				a.log.Error("worker failed", "error", err)
				return err
			}
			a.log.Info("worker stopped")
			return nil
		})
		// The maintenance Schedule (docs/retention.md): created or brought up
		// to date by every worker process, one run at a time whatever their
		// number. A Temporal that refuses is logged: the lanes' own start
		// reports a Temporal that is down.
		if created, err := worker.EnsureMaintenanceSchedule(ctx, a.temporal, a.cfg.TaskQueue, a.cfg.MaintenanceEvery); err != nil {
			a.log.Warn("maintenance schedule not ensured", "error", err)
		} else {
			a.log.Info("maintenance schedule ensured", "id", workflows.MaintenanceScheduleID, "created", created, "every", a.cfg.MaintenanceEvery)
		}
		// Digest events the API accepted but could not signal (a crash, a
		// Temporal error) reach their digest from here (docs/digests.md).
		g.Go(func() error {
			activities.SweepDigestEventsEvery(ctx, a.Activities, activities.DigestSweepInterval, a.log)
			return nil
		})
	}
	if ln != nil {
		a.log.Info("API listening", "addr", "http://"+ln.Addr().String())
		srv := HTTPServer(a.cfg, a.handler, a.log)
		srv.RegisterOnShutdown(a.CloseStreams)
		g.Go(func() error { return Serve(ctx, srv, ln, a.cfg.ShutdownTimeout) })
	}
	if a.cfg.MetricsAddr != "" && a.cfg.MetricsAddr != "off" {
		// Every process serves its metrics on a listener of its own (loopback by
		// default), never open on the API port (only with HERALD_METRICS_TOKEN).
		// Metrics are not worth stopping delivery for: a taken address is logged.
		if mln, err := net.Listen("tcp", a.cfg.MetricsAddr); err != nil {
			a.log.Error("metrics not served: cannot listen (HERALD_METRICS_ADDR)", "addr", a.cfg.MetricsAddr, "error", err)
		} else {
			a.log.Info("metrics listening", "addr", "http://"+mln.Addr().String()+"/metrics")
			mux := http.NewServeMux()
			mux.Handle("GET /metrics", a.Metrics.Handler())
			g.Go(func() error { return Serve(ctx, HTTPServer(a.cfg, mux, a.log), mln, a.cfg.ShutdownTimeout) })
		}
	}
	err := g.Wait()
	a.hub.Close()
	return err
}
