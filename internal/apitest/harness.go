// Package apitest runs Herald end to end for tests: the real HTTP handler on an
// httptest server, a real worker on a task queue of its own, the test PostgreSQL
// and the test Temporal dev server (see internal/testenv). Every response it sees is
// checked against the OpenAPI document (see openapi.go).
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/herald-notify/herald/activities"
	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/api"
	"github.com/herald-notify/herald/internal/app"
	"github.com/herald-notify/herald/internal/config"
	"github.com/herald-notify/herald/internal/egress"
	"github.com/herald-notify/herald/internal/inboxlive"
	"github.com/herald-notify/herald/internal/retention"
	"github.com/herald-notify/herald/internal/secrets"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/templates"
	"github.com/herald-notify/herald/internal/testenv"
	"github.com/herald-notify/herald/internal/tracing"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/resolver"
	"github.com/herald-notify/herald/providers/sandbox"
	"github.com/herald-notify/herald/worker"
)

// Harness is one running Herald.
type Harness struct {
	T         testing.TB
	URL       string
	Store     *store.Store
	Providers *providers.Store
	Sandbox   sandbox.Recorder
	// SecretsKey is HERALD_SECRETS_KEY for this harness, so a worker process started
	// by a test opens the same provider credentials.
	SecretsKey string
	// OperatorKey is HERALD_OPERATOR_KEY for this harness ("" with NoOperatorAPI).
	OperatorKey string
	// MetricsToken is HERALD_METRICS_TOKEN for this harness: Scrape reads GET
	// /metrics on the API port with it.
	MetricsToken string

	app       *app.App
	newApp    func(edit func(*config.Config)) (*app.App, error) // another API process on the same services
	Temporal  client.Client
	TaskQueue string
	HTTP      *http.Client
}

// Options tune a harness.
type Options struct {
	// NoWorker leaves the task queue without a worker (accepted but not delivered).
	NoWorker bool
	// Process points the provider clients at local fakes (base URLs).
	Process resolver.Process
	// NoSandboxAPI turns GET /v1/sandbox/messages off, as in production.
	NoSandboxAPI bool
	// AuthCacheTTL replaces app.AuthCacheTTL (0: keep it).
	AuthCacheTTL time.Duration
	// NoSandboxFallback makes a channel without a configured provider fail with
	// reason no_provider, as in production; by default the harness, like `herald
	// dev`, sends it through the sandbox provider (most tests rely on that).
	NoSandboxFallback bool
	// TenantLimits are the default per-tenant API limits (zero: none).
	TenantLimits api.TenantLimits
	// CostLimits are the per-tenant buckets of the costly endpoints (preview,
	// template save, redrives; zero: none).
	CostLimits api.CostLimits
	// NoOperatorAPI runs without HERALD_OPERATOR_KEY: the operator API answers
	// 404. Otherwise the harness makes a key (Harness.OperatorKey).
	NoOperatorAPI bool
	// InboxHeartbeat is the inbox streams' heartbeat (0: the default, 15 s);
	// InboxStreams their limits (zero fields: the defaults).
	InboxHeartbeat time.Duration
	InboxStreams   inboxlive.Limits
	// InboxActions is each user's inbox action bucket (zero: the default,
	// api.DefaultInboxActions; PerSecond < 0: none).
	InboxActions api.Rate
	// CampaignPageSize and CampaignWindow size campaign batches (0: the defaults).
	CampaignPageSize, CampaignWindow int
	// CampaignInDoubtWait replaces the 30 s receipt wait of in-doubt sends (0: keep it).
	CampaignInDoubtWait time.Duration
	// Logger receives the API's logs (access log included); nil: warnings and
	// errors on stderr.
	Logger *slog.Logger
	// Tracing makes spans (tests give it an in-memory exporter); nil: off.
	Tracing *tracing.Tracing
	// NoDueSequence turns the per-user due sequence off (app.Options; the
	// due-order bench's floor).
	NoDueSequence bool
	// WebhookRetry is the tenant webhooks' backoff (zero fields: 100 ms
	// doubling to 1 s, for a minute, so tests see retries quickly).
	WebhookRetry contract.WebhookRetry
	// Retention is the operator's retention policy (zero: retention.Defaults).
	Retention retention.Policy
}

// Start brings up API + worker against the test services, wired by internal/app as
// the herald binary is.
func Start(t testing.TB, opts Options) *Harness {
	t.Helper()
	pool := testenv.Pool(t)
	tc := testenv.TemporalClient(t)
	ensureSearchAttributes(t, tc)
	key, err := secrets.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	h := &Harness{T: t, Temporal: tc, TaskQueue: testenv.UniqueName(t, "tq"), SecretsKey: key,
		HTTP: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	// The fakes listen on loopback, which the production egress policy refuses:
	// tests allow it unless they bring their own policy.
	if opts.Process.Egress == nil {
		opts.Process.Egress = egress.MustParse("127.0.0.1")
	}
	if h.MetricsToken, err = secrets.GenerateKey(); err != nil {
		t.Fatal(err)
	}
	if !opts.NoOperatorAPI {
		if h.OperatorKey, err = secrets.GenerateKey(); err != nil {
			t.Fatal(err)
		}
	}
	cfg := config.Config{
		TaskQueue: h.TaskQueue, DefaultDedupWindow: time.Hour, WebhookTolerance: 5 * time.Minute,
		PublicBaseURL:   opts.Process.PublicBaseURL,
		SendGridBaseURL: opts.Process.SendGridBaseURL, TwilioBaseURL: opts.Process.TwilioBaseURL, FCMBaseURL: opts.Process.FCMBaseURL,
		FCMTokenURL: opts.Process.FCMTokenURL, Egress: opts.Process.Egress,
		SandboxAPI:          !opts.NoSandboxAPI,
		SandboxFallback:     !opts.NoSandboxFallback,
		TenantRatePerSecond: opts.TenantLimits.RatePerSecond, TenantBurst: opts.TenantLimits.Burst, TenantDailyQuota: opts.TenantLimits.DailyQuota,
		CampaignMaxAudience: opts.TenantLimits.MaxAudienceSize, CampaignMaxConcurrent: opts.TenantLimits.MaxConcurrentCampaigns,
		ListMaxBytes: opts.TenantLimits.MaxListBytes,
		OperatorKey:  h.OperatorKey, MetricsToken: h.MetricsToken, PreviewLimit: bucketOf(opts.CostLimits.Preview), TemplateSaveLimit: bucketOf(opts.CostLimits.TemplateSave),
		RedriveLimit: bucketOf(opts.CostLimits.Redrive), BulkRedriveLimit: bucketOf(opts.CostLimits.BulkRedrive), UserImportLimit: bucketOf(opts.CostLimits.UserImport),
		CampaignCreateLimit: bucketOf(opts.CostLimits.CampaignCreate), ListUploadLimit: bucketOf(opts.CostLimits.ListUpload),
		// Workers stop at once when a test ends (a fake may still hold a request).
		WorkerStopTimeout:       0,
		WebhookRetryInitial:     or(opts.WebhookRetry.Initial, 100*time.Millisecond),
		WebhookRetryMaxInterval: or(opts.WebhookRetry.MaxInterval, time.Second),
		WebhookRetryFor:         or(opts.WebhookRetry.For, time.Minute), WebhookTimeout: 5 * time.Second,
		CampaignPageSize: opts.CampaignPageSize, CampaignWindow: opts.CampaignWindow, CampaignInDoubtWait: opts.CampaignInDoubtWait,
		InboxHeartbeat:      opts.InboxHeartbeat,
		InboxStreamsPerUser: opts.InboxStreams.PerUser, InboxStreamsPerTenant: opts.InboxStreams.PerTenant,
		InboxStreamsPerProcess: opts.InboxStreams.PerProcess,
		InboxStreamPageBytes:   opts.InboxStreams.PageBytes, InboxStreamsMemoryBytes: opts.InboxStreams.MemoryBytes,
		InboxActionLimit: config.Bucket{Rate: opts.InboxActions.PerSecond, Burst: opts.InboxActions.Burst},
		Retention:        opts.Retention,
	}
	h.newApp = func(edit func(*config.Config)) (*app.App, error) {
		cfg := cfg
		if edit != nil {
			edit(&cfg)
		}
		return app.New(cfg, pool, tc, app.Options{Logger: logger, SecretsKey: key,
			ProviderHTTPClient: opts.Process.HTTPClient, Breaker: opts.Process.Breaker, AuthCacheTTL: opts.AuthCacheTTL,
			Tracing: opts.Tracing, NoDueSequence: opts.NoDueSequence})
	}
	h.app, err = h.newApp(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.app.Close)
	h.Store, h.Providers, h.Sandbox = h.app.Store, h.app.Providers, h.app.Sandbox
	if !opts.NoWorker {
		h.StartWorkers(1)
	}
	srv := httptest.NewServer(h.app.Handler())
	t.Cleanup(srv.Close)
	h.URL = srv.URL
	return h
}

// Replica serves another API process (its own handler, caches and inbox
// listener) on the same database and Temporal, like a second replica behind a
// load balancer, and returns its base URL.
func (h *Harness) Replica() string {
	h.T.Helper()
	srv := httptest.NewServer(h.HandlerWith(nil))
	h.T.Cleanup(srv.Close)
	return srv.URL
}

// HandlerWith is the handler of another API process on the same services
// whose configuration edit changed (nil: the same), closed when the test ends.
func (h *Harness) HandlerWith(edit func(*config.Config)) http.Handler {
	h.T.Helper()
	a, err := h.newApp(edit)
	if err != nil {
		h.T.Fatal(err)
	}
	h.T.Cleanup(a.Close)
	return a.Handler()
}

// Handler is the harness API's HTTP handler (to serve it under other server settings).
func (h *Harness) Handler() http.Handler { return h.app.Handler() }

// InboxStreamsOpen is how many inbox streams the harness's API process holds open.
func (h *Harness) InboxStreamsOpen() int { return h.app.InboxHub().Open() }

// InboxHub is the harness API process's stream hub (its memory and slow-client counts).
func (h *Harness) InboxHub() *inboxlive.Hub { return h.app.InboxHub() }

// UserToken mints a user token for userID with the tenant key (POST
// /v1/users/{user_id}/token, which must answer 201).
func (h *Harness) UserToken(key, userID string) string {
	h.T.Helper()
	return h.MustDo(http.StatusCreated, http.MethodPost, "/v1/users/"+userID+"/token", key, nil).Str("token")
}

// UserTokenKey is the key this harness's API signs user tokens with (tests
// forge expired tokens with it).
func (h *Harness) UserTokenKey() []byte { return app.UserTokenKey(h.SecretsKey) }

func or(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// searchAttrsOnce registers Herald's search attributes once per test binary, so a
// Temporal server started before one was added (a reused test server) still
// takes every upsert.
var searchAttrsOnce sync.Once

func ensureSearchAttributes(t testing.TB, tc client.Client) {
	searchAttrsOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := worker.EnsureSearchAttributes(ctx, tc, "default"); err != nil {
			t.Logf("registering search attributes: %v", err)
		}
	})
}

// StartWorkers starts n more worker sets (one worker per lane each) on the
// harness's task queues, each with its own Temporal client, like separate processes.
func (h *Harness) StartWorkers(n int) {
	h.T.Helper()
	for range n {
		for _, w := range h.app.Workers(testenv.TemporalClient(h.T)) {
			if err := w.Start(); err != nil {
				h.T.Fatalf("start worker: %v", err)
			}
			h.T.Cleanup(w.Stop)
		}
	}
}

// Activities are the worker's activities (tests run one in a
// testsuite.TestActivityEnvironment against the real stores).
func (h *Harness) Activities() *activities.Activities { return h.app.Activities }

// Tenant creates a tenant and returns its id and API key.
func (h *Harness) Tenant(name string) (id, key string) {
	h.T.Helper()
	t, key, err := h.Store.CreateTenant(context.Background(), testenv.UniqueName(h.T, name))
	if err != nil {
		h.T.Fatalf("create tenant: %v", err)
	}
	return t.ID, key
}

// Response is a decoded API response.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
	JSON   map[string]any
}

// Str returns a top-level string field ("" if absent).
func (r Response) Str(field string) string {
	s, _ := r.JSON[field].(string)
	return s
}

// ErrorField returns error.field and error.code of an error response.
func (r Response) ErrorField() (field, code string) {
	e, _ := r.JSON["error"].(map[string]any)
	field, _ = e["field"].(string)
	code, _ = e["code"].(string)
	return field, code
}

// Do sends a request (body: nil, a string sent verbatim, or a value encoded as JSON)
// and checks the response against the OpenAPI document.
func (h *Harness) Do(method, path, key string, body any, headers ...string) Response {
	h.T.Helper()
	return h.DoAt(h.URL, method, path, key, body, headers...)
}

// DoAt is Do against another API process (base: a Replica's URL).
func (h *Harness) DoAt(base, method, path, key string, body any, headers ...string) Response {
	h.T.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			h.T.Fatalf("encode body: %v", err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		h.T.Fatalf("new request: %v", err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := h.HTTP.Do(req)
	if err != nil {
		h.T.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		h.T.Fatalf("read body: %v", err)
	}
	out := Response{Status: resp.StatusCode, Header: resp.Header, Body: raw}
	if len(raw) > 0 && json.Valid(raw) {
		_ = json.Unmarshal(raw, &out.JSON)
	}
	checkAgainstOpenAPI(h.T, req, resp, raw)
	return out
}

// Eventually polls cond every 50 ms until it holds or timeout passes.
func (h *Harness) Eventually(timeout time.Duration, what string, cond func() bool) {
	h.T.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			h.T.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// SimpleTemplate is a template with content on every channel that shows data.title
// and data.body (both optional), for tests about delivery rather than rendering.
func SimpleTemplate(id string) templates.Template {
	const title, body = `{{index . "title" | default "Notification"}}`, `{{index . "body" | default "You have a notification"}}`
	return templates.Template{ID: id, Category: "general",
		InApp: &templates.InAppContent{Title: title, Body: body},
		Email: &templates.EmailContent{Subject: title, Text: body, HTML: "<p>" + body + "</p>"},
		SMS:   &templates.SMSContent{Text: body},
		Push:  &templates.PushContent{Title: title, Body: body},
	}
}

// Template stores t for the tenant that owns key (as PUT /v1/templates would).
// For a critical t the tenant is first allowed to send critical notifications
// (AllowCritical), as the operator must have done for PUT /v1/templates to take it.
func (h *Harness) Template(key string, t templates.Template) {
	h.T.Helper()
	ctx := context.Background()
	tn, err := h.Store.TenantByAPIKey(ctx, key)
	if err != nil {
		h.T.Fatalf("tenant of key: %v", err)
	}
	if errs := templates.Validate(t); len(errs) > 0 {
		h.T.Fatalf("template %s: %v", t.ID, errs)
	}
	if t.Critical {
		h.AllowCritical(key)
	}
	if _, err := h.Store.PutTemplate(ctx, tn.ID, t); err != nil {
		h.T.Fatalf("store template: %v", err)
	}
}
