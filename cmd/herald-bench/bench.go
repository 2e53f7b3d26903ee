package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/herald-notify/herald/internal/app"
	"github.com/herald-notify/herald/internal/config"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/secrets"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/templates"
	"github.com/herald-notify/herald/schema"
	"github.com/herald-notify/herald/worker"
	"github.com/herald-notify/herald/workflows"
)

// benchWorkflowName is the empty workflow of phases (a) and (a').
const benchWorkflowName = "HeraldBenchEmpty"

// heraldBenchEmpty does nothing but hold its workflow ID open, as a notification
// workflow holds its dedup window, so that (a') has running IDs to collide with.
// It takes the same input a notification workflow takes, so (a) sends the same
// payload. The bench terminates every run it started when it finishes.
func heraldBenchEmpty(ctx workflow.Context, in workflows.NotificationInput) error {
	return workflow.Sleep(ctx, in.DedupWindow)
}

// selfHostDedupWindow is the self-host Herald's default dedup window.
const selfHostDedupWindow = time.Hour

type bench struct {
	o      options
	out    io.Writer // progress
	runID  string
	cfg    config.Config
	tc     client.Client
	http   *http.Client
	apiURL string
	apiKey string
	// tenantID is the bench tenant's id in self-host mode; against -api-url it is a
	// synthetic id of the same shape, used only in (a)'s workflow IDs and attributes.
	tenantID   string
	selfHost   bool
	benchQueue string
	cpu        *cpuWatcher
	rec        *recorder

	bUsers, dUsers []string
	setupErr       error
	// template is the bench template as stored (its version goes into (a)'s input,
	// as the API pins it into the notification's).
	template templates.Template

	mu sync.Mutex
	// emptyIDs are the (a) workflow IDs started; notifKeys the idempotency keys
	// accepted (their workflow IDs are derivable in self-host mode).
	emptyIDs   []string
	notifKeys  []string
	terminated map[string]bool // notification keys whose workflows were terminated early

	closers []func()
	workers map[string]*workerSlot
	// pool and st are the self-host PostgreSQL pool and store.
	pool *pgxpool.Pool
	st   *store.Store
}

func (b *bench) logf(format string, args ...any) {
	if !b.o.quiet {
		fmt.Fprintf(b.out, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
	}
}

func randomHex(n int) string {
	p := make([]byte, n)
	_, _ = rand.Read(p)
	return hex.EncodeToString(p)
}

// run sets up, runs every phase and cleans up.
func run(ctx context.Context, o options, rep *Report, progress io.Writer) (err error) {
	cfg, err := config.FromEnv()
	if err != nil {
		return err
	}
	b := &bench{o: o, out: progress, cfg: cfg, runID: time.Now().UTC().Format("0102T150405") + "-" + randomHex(3),
		http: newHTTPClient(o), selfHost: o.apiURL == "", terminated: map[string]bool{}, cpu: newCPUWatcher(cfg.TemporalAddress, cfg.DatabaseURL)}
	defer func() {
		for i := len(b.closers) - 1; i >= 0; i-- {
			b.closers[i]()
		}
	}()
	if o.cpuProfile != "" {
		if err := os.MkdirAll(filepath.Dir(o.cpuProfile), 0o755); err != nil {
			return err
		}
	}
	b.benchQueue = "herald-bench-empty-" + b.runID
	rep.BenchQueue = b.benchQueue
	outer := ctx
	ctx, cancel := context.WithTimeout(ctx, o.budget)
	defer cancel()
	defer func() {
		if err != nil && outer.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("-budget %s exhausted before every phase finished (%w)", o.budget, err)
		}
	}()
	if err := b.setup(ctx, rep); err != nil {
		return err
	}
	defer func() {
		if o.cleanup {
			rep.Cleanup = b.cleanupWorkflows()
		} else {
			rep.Cleanup = "skipped (-cleanup=false)"
		}
	}()
	return b.phases(ctx, rep)
}

func (b *bench) setup(ctx context.Context, rep *Report) error {
	logger := slog.New(slog.NewTextHandler(b.out, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts := client.Options{
		HostPort: b.cfg.TemporalAddress, Namespace: b.cfg.TemporalNamespace,
		Logger: sdklog.NewStructuredLogger(logger.With("component", "temporal")),
	}
	if !b.o.temporalGzip { // what-if: cmd/herald keeps the SDK default (gzip)
		opts.ConnectionOptions.GrpcCompression = &client.GrpcCompressionNone{}
		rep.Notes = append(rep.Notes, "-temporal-gzip=false: the Temporal client (bare starts, API and worker) sent uncompressed gRPC requests")
	}
	tc, err := client.Dial(opts)
	if err != nil {
		return fmt.Errorf("connect to Temporal at %s: %w", b.cfg.TemporalAddress, err)
	}
	b.tc = tc
	b.closers = append(b.closers, tc.Close)
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := worker.EnsureSearchAttributes(sctx, tc, b.cfg.TemporalNamespace); err != nil {
		return err
	}

	// The empty workflow's worker, on its own task queue and the same client.
	b.workers = map[string]*workerSlot{}
	b.closers = append(b.closers, b.stopAllWorkers)
	b.addWorker("bench", func() []sdkworker.Worker {
		ew := sdkworker.New(tc, b.benchQueue, sdkworker.Options{})
		ew.RegisterWorkflowWithOptions(heraldBenchEmpty, workflow.RegisterOptions{Name: benchWorkflowName})
		return []sdkworker.Worker{ew}
	})

	if b.selfHost {
		if err := b.selfHostHerald(ctx, rep, logger); err != nil {
			return err
		}
		if b.o.workersAfterB {
			rep.Notes = append(rep.Notes, "-workers-after-b: no worker polled either task queue during (a) and (b); both started after (b)")
		}
		rep.Mode = "self-host"
	} else {
		b.apiURL, b.apiKey = b.o.apiURL, b.o.apiKey
		b.tenantID = "t_" + randomHex(8) // same shape as a real tenant id
		rep.Mode = "api-url"
		rep.Notes = append(rep.Notes, "-api-url: the Herald under test runs in another process; on this machine its CPU counts as \"other\"")
		if err := b.putTemplateViaAPI(ctx); err != nil {
			return err
		}
	}
	if b.setupErr != nil {
		return b.setupErr
	}
	rep.APIURL = b.apiURL
	b.logf("mode %s, API %s, Temporal %s (namespace %s), bench queue %s", rep.Mode, b.apiURL, b.cfg.TemporalAddress, b.cfg.TemporalNamespace, b.benchQueue)

	for i := range b.o.users {
		b.bUsers = append(b.bUsers, fmt.Sprintf("bench-%s-u%d", b.runID, i))
	}
	for i := range b.o.dUsers {
		b.dUsers = append(b.dUsers, fmt.Sprintf("bench-%s-d%d", b.runID, i))
	}
	if b.selfHost {
		if err := b.raiseLimits(ctx, rep); err != nil {
			return err
		}
	} else {
		rep.Notes = append(rep.Notes, "-api-url: the tenant's API limits apply (the operator raises them with herald tenant limits); 429s count as errors")
	}
	return b.createUsers(ctx, append(append([]string(nil), b.bUsers...), b.dUsers...))
}

// benchRate and benchBurst are the bench tenant's API limits: the highest an
// operator can set, so the limiter never refuses a bench request, while its
// per-request bucket update in PostgreSQL still runs as it would for any tenant.
const (
	benchRate  = store.MaxAPIRatePerSecond
	benchBurst = store.MaxAPIBurst
)

// raiseLimits sets the self-host bench tenant's API limits as the operator does
// (`herald tenant limits`): straight in the store, since a tenant's key cannot.
func (b *bench) raiseLimits(ctx context.Context, rep *Report) error {
	if err := b.st.PutTenantLimits(ctx, b.tenantID, store.TenantLimits{APIRatePerSecond: benchRate, APIBurst: benchBurst}); err != nil {
		return fmt.Errorf("raise the bench tenant's API limits: %w", err)
	}
	rep.Notes = append(rep.Notes, fmt.Sprintf("bench tenant API limits raised to %d/s, burst %d (the limiter still takes every POST /v1/notifications from its PostgreSQL bucket, in leases)", benchRate, benchBurst))
	return nil
}

// selfHostHerald migrates, creates a fresh tenant with the bench template and runs
// Herald's real API (over HTTP on loopback) and worker in this process, wired by
// internal/app as cmd/herald is: a fresh secrets key, as the bench tenant has no
// provider credentials to open.
func (b *bench) selfHostHerald(ctx context.Context, rep *Report, logger *slog.Logger) error {
	if _, err := schema.Up(b.cfg.DatabaseURL); err != nil {
		// A database migrated by a newer Herald than this binary is usable as long
		// as the newer migrations only added to the schema; say so and go on.
		if !strings.Contains(err.Error(), "no migration found for version") {
			return err
		}
		rep.Notes = append(rep.Notes, "WARNING: the database is at a newer schema version than this binary knows ("+err.Error()+"); running on it as is")
		b.logf("WARNING: %v; the database is newer than this binary, running on it as is", err)
	}
	pool, err := store.Connect(ctx, b.cfg.DatabaseURL)
	if err != nil {
		return err
	}
	b.closers = append(b.closers, pool.Close, b.stopAllWorkers) // workers stop before the pool closes
	st := store.New(pool)
	b.pool, b.st = pool, st
	t, key, err := st.CreateTenant(ctx, "bench-"+b.runID)
	if err != nil {
		return fmt.Errorf("create bench tenant: %w", err)
	}
	b.tenantID, b.apiKey = t.ID, key
	tmpl := benchTemplateDef()
	if errs := templates.Validate(tmpl); len(errs) > 0 {
		return fmt.Errorf("bench template: %w", errs[0])
	}
	rec, err := st.PutTemplate(ctx, t.ID, tmpl)
	if err != nil {
		return fmt.Errorf("create bench template: %w", err)
	}
	b.template = rec.Template

	secretsKey, err := secrets.GenerateKey()
	if err != nil {
		return err
	}
	taskQueue := "herald-bench-" + b.runID
	rep.TaskQueue = taskQueue
	cfg := b.cfg
	cfg.TaskQueue, cfg.DefaultDedupWindow, cfg.SandboxAPI = taskQueue, selfHostDedupWindow, false
	opts := app.Options{Logger: logger, SecretsKey: secretsKey}
	switch b.o.signals {
	case "off":
		opts.NoSignals = true
	case "all":
		tr, shutdown, err := benchTracing(ctx)
		if err != nil {
			return err
		}
		opts.Tracing = tr
		b.closers = append(b.closers, func() { _ = shutdown(context.Background()) })
	}
	rep.Notes = append(rep.Notes, "-signals "+b.o.signals+": "+signalsNote[b.o.signals])
	if b.o.breakdown { // the API's queries and Temporal calls timed; the worker keeps the plain ones
		b.rec = &recorder{}
		opts.APIDB, opts.APITemporal = timedDB{DB: pool, rec: b.rec}, timedClient{Client: b.tc, rec: b.rec}
	}
	a, err := app.New(cfg, pool, b.tc, opts)
	if err != nil {
		return err
	}
	b.closers = append(b.closers, a.Close)
	b.addWorker("herald", func() []sdkworker.Worker { return a.Workers(nil) })

	handler := a.Handler()
	if b.rec != nil {
		handler = b.rec.middleware(handler)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { _ = app.Serve(sctx, app.HTTPServer(cfg, handler, logger), ln, 10*time.Second); close(served) }()
	b.closers = append(b.closers, func() { stop(); <-served })
	b.apiURL = "http://" + ln.Addr().String()
	return nil
}

// benchTemplateDef is the bench's template: in-app only, title and body from data.
func benchTemplateDef() templates.Template {
	return templates.Template{
		ID: benchTemplate, Category: "bench",
		InApp: &templates.InAppContent{Title: "{{.title}}", Body: "{{.body}}"},
	}
}

// putTemplateViaAPI creates (a new version of) the bench template on a running
// Herald (-api-url) and returns it as stored.
func (b *bench) putTemplateViaAPI(ctx context.Context) error {
	t := benchTemplateDef()
	body, _ := json.Marshal(map[string]any{"category": t.Category, "in_app": t.InApp})
	status, raw, err := b.do(ctx, http.MethodPut, "/v1/templates/"+benchTemplate, body)
	if err != nil {
		return err
	}
	if status != http.StatusOK && status != http.StatusCreated {
		return fmt.Errorf("PUT /v1/templates/%s: %d %s", benchTemplate, status, truncate(raw, 300))
	}
	if err := json.Unmarshal(raw, &b.template); err != nil {
		return fmt.Errorf("PUT /v1/templates/%s: %w", benchTemplate, err)
	}
	return nil
}

func (b *bench) createUsers(ctx context.Context, users []string) error {
	b.logf("creating %d users via PUT /v1/users/{id}", len(users))
	body := []byte(`{"name":"Herald bench user","locale":"en-GB","timezone":"Europe/London"}`)
	r := closedLoop(ctx, len(users), min(16, b.o.concurrency), b.o.reqTimeout, func(ctx context.Context, i int) (outcome, error) {
		status, raw, err := b.do(ctx, http.MethodPut, "/v1/users/"+users[i], body)
		if err != nil {
			return outcomeError, err
		}
		if status != http.StatusCreated && status != http.StatusOK {
			return outcomeError, fmt.Errorf("PUT user: %d %s", status, raw)
		}
		return outcomeOK, nil
	})
	if r.ok != len(users) {
		return fmt.Errorf("creating bench users: %d of %d failed (%v)", len(users)-r.ok, len(users), r.samples)
	}
	return nil
}

// do sends one request to the API, with a JSON body unless body is nil.
func (b *bench) do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	if body == nil {
		return apiCall(ctx, b.http, method, b.apiURL+path, b.apiKey, "", nil)
	}
	return apiCall(ctx, b.http, method, b.apiURL+path, b.apiKey, "application/json", bytes.NewReader(body))
}

// apiCall sends one request to Herald's API at url with key as the bearer token
// (and contentType, unless ""), for the default bench and -campaign alike; it
// returns the status and at most 1 MiB of the answer.
func apiCall(ctx context.Context, hc *http.Client, method, url, key, contentType string, body io.Reader) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return 0, nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, raw, err
}

func (b *bench) getJSON(ctx context.Context, path string, dst any) (int, error) {
	status, raw, err := b.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return status, err
	}
	if status != http.StatusOK {
		return status, fmt.Errorf("GET %s: %d %s", path, status, truncate(raw, 200))
	}
	return status, json.Unmarshal(raw, dst)
}

// accepted is the answer to POST /v1/notifications.
type accepted struct {
	NotificationID string `json:"notification_id"`
	Status         string `json:"status"`
	Dedup          string `json:"dedup"`
}

func (b *bench) postNotification(ctx context.Context, body []byte) (int, accepted, error) {
	var a accepted
	status, raw, err := b.do(ctx, http.MethodPost, "/v1/notifications", body)
	if err != nil {
		return status, a, err
	}
	if status != http.StatusAccepted && status != http.StatusOK {
		return status, a, fmt.Errorf("POST /v1/notifications: %d %s", status, truncate(raw, 200))
	}
	return status, a, json.Unmarshal(raw, &a)
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

func itoa(i int) string { return strconv.Itoa(i) }

// notification is one bench submission: its key, user and the exact request body.
type notification struct {
	key, user string
	body      []byte
	input     workflows.NotificationInput
}

const benchTemplate = "bench_ping"

// newNotification builds submission i of a series. The body is what (b) posts; the
// input is exactly the workflow input the API derives from that body (with the
// template version, category and criticality it pins), which (a) passes to the
// empty workflow, so both start the same payload.
func (b *bench) newNotification(series string, i int, users []string) notification {
	n := notification{key: fmt.Sprintf("bench-%s-%s-%d", b.runID, series, i), user: users[i%len(users)]}
	data := map[string]any{"title": "Herald bench", "body": fmt.Sprintf("bench message %s #%d", series, i)}
	req := map[string]any{
		"user_id": n.user, "template_id": benchTemplate, "channels": []herald.Channel{herald.ChannelInApp},
		"data": data, "idempotency_key": n.key,
	}
	window := selfHostDedupWindow
	if b.o.dedupTTL > 0 {
		req["dedup_ttl_sec"] = int64(b.o.dedupTTL / time.Second)
		window = b.o.dedupTTL
	}
	n.body, _ = json.Marshal(req)
	n.input = workflows.NotificationInput{
		TenantID: b.tenantID, UserID: n.user, TemplateID: benchTemplate,
		Channels: []herald.Channel{herald.ChannelInApp}, Data: data, DedupWindow: window,
		TemplateVersion: b.template.Version, Category: b.template.Category, Critical: b.template.Critical,
		BodyHash: benchBodyHash(n.key),
	}
	return n
}

func (b *bench) series(name string, count int, users []string) []notification {
	out := make([]notification, count)
	for i := range out {
		out[i] = b.newNotification(name, i, users)
	}
	return out
}

func (b *bench) rememberEmpty(id string) {
	b.mu.Lock()
	b.emptyIDs = append(b.emptyIDs, id)
	b.mu.Unlock()
}

func (b *bench) rememberKey(key string) {
	b.mu.Lock()
	b.notifKeys = append(b.notifKeys, key)
	b.mu.Unlock()
}
