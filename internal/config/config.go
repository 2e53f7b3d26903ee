// Package config reads Herald's settings from the environment. Every variable has a
// documented default that matches the local stack `make run` starts.
package config

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/herald-notify/herald/activities"
	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/api"
	"github.com/herald-notify/herald/internal/egress"
	"github.com/herald-notify/herald/internal/inboxlive"
	"github.com/herald-notify/herald/internal/retention"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/worker"
	"github.com/herald-notify/herald/workflows"
)

// Config is the process configuration.
type Config struct {
	// HERALD_DATABASE_URL: PostgreSQL connection URL.
	DatabaseURL string
	// HERALD_TEMPORAL_ADDRESS: Temporal frontend host:port.
	TemporalAddress string
	// HERALD_TEMPORAL_NAMESPACE: Temporal namespace.
	TemporalNamespace string
	// HERALD_HTTP_ADDR: where the API listens.
	HTTPAddr string
	// HERALD_TASK_QUEUE: the notification task queue.
	TaskQueue string
	// HERALD_DEFAULT_DEDUP_WINDOW: dedup window when a request gives no dedup_ttl_sec.
	DefaultDedupWindow time.Duration
	// HERALD_SHUTDOWN_TIMEOUT: how long in-flight HTTP requests get on SIGTERM.
	ShutdownTimeout time.Duration
	// HERALD_WORKER_STOP_TIMEOUT: how long running activities (a provider call in
	// flight) get to finish on SIGTERM before the worker cancels them; 0 cancels them
	// at once. Keep it under the orchestrator's kill grace period.
	WorkerStopTimeout time.Duration
	// HERALD_WORKER_CACHE_SIZE: workflow runs a worker process keeps in memory
	// between their workflow tasks (the Temporal SDK's sticky cache, shared by
	// the lanes); a run not kept is replayed from its history at its next task.
	// It bounds the worker's memory however many digests are open
	// (worker.DefaultCacheSize).
	WorkerCacheSize int
	// HERALD_HTTP_READ_HEADER_TIMEOUT, HERALD_HTTP_READ_TIMEOUT,
	// HERALD_HTTP_WRITE_TIMEOUT, HERALD_HTTP_IDLE_TIMEOUT: the API server's
	// http.Server timeouts (headers; whole request; handler + response; keep-alive).
	HTTPReadHeaderTimeout time.Duration
	HTTPReadTimeout       time.Duration
	HTTPWriteTimeout      time.Duration
	HTTPIdleTimeout       time.Duration
	// HERALD_PUBLIC_BASE_URL: how providers reach this API from outside (webhook
	// callbacks and their signatures use it; a proxy changes scheme and port).
	PublicBaseURL string
	// HERALD_SENDGRID_BASE_URL, HERALD_TWILIO_BASE_URL, HERALD_FCM_BASE_URL: provider
	// API base URLs; empty means the real provider. Tests point them at local fakes.
	SendGridBaseURL string
	TwilioBaseURL   string
	FCMBaseURL      string
	// HERALD_FCM_TOKEN_URL: the OAuth token endpoint FCM service accounts are
	// exchanged at; empty means Google's (a key's own token_uri is never used).
	FCMTokenURL string
	// HERALD_EGRESS_ALLOW: hosts, addresses and prefixes provider connections
	// may reach although they are internal (egress.Parse); empty refuses every
	// loopback, private, link-local and metadata address.
	Egress *egress.Policy
	// HERALD_SANDBOX_API: serve GET /v1/sandbox/messages (dev stacks only).
	SandboxAPI bool

	// HERALD_SANDBOX_FALLBACK: a channel a tenant configured no provider for is
	// "sent" by the sandbox provider (which records it and sends nothing). False
	// by default: the channel fails with reason no_provider. `herald dev` turns it
	// on unless the variable is set.
	SandboxFallback bool
	// HERALD_WEBHOOK_TOLERANCE: how old a signed SendGrid webhook timestamp may be.
	WebhookTolerance time.Duration
	// HERALD_TENANT_RATE, HERALD_TENANT_BURST, HERALD_TENANT_DAILY_QUOTA: default
	// per-tenant limits on POST /v1/notifications (0: none); the operator can give
	// a tenant its own (`herald tenant limits`, table tenant_limits).
	TenantRatePerSecond float64
	TenantBurst         int
	TenantDailyQuota    int
	// HERALD_CAMPAIGN_MAX_AUDIENCE, HERALD_CAMPAIGN_MAX_CONCURRENT,
	// HERALD_LIST_MAX_BYTES: default per-tenant caps on one campaign's audience,
	// on the campaigns scheduled, running or paused at once (0: none) and on one
	// list upload's bytes (0: api.DefaultMaxListBytes); the operator can give a
	// tenant its own (table tenant_limits).
	CampaignMaxAudience   int64
	CampaignMaxConcurrent int
	ListMaxBytes          int64
	// Per-tenant token buckets of the other endpoints that cost work (rate 0:
	// none), the same for every tenant:
	//   HERALD_PREVIEW_RATE, HERALD_PREVIEW_BURST: POST /v1/templates/{id}/preview
	//   HERALD_TEMPLATE_SAVE_RATE, HERALD_TEMPLATE_SAVE_BURST: PUT /v1/templates/{id}
	//   HERALD_REDRIVE_RATE, HERALD_REDRIVE_BURST: POST /v1/dead-letters/{id}/redrive
	//   HERALD_BULK_REDRIVE_RATE, HERALD_BULK_REDRIVE_BURST: POST /v1/dead-letters/redrive
	//   HERALD_USER_IMPORT_RATE, HERALD_USER_IMPORT_BURST: POST /v1/users/import
	//   HERALD_CAMPAIGN_CREATE_RATE, HERALD_CAMPAIGN_CREATE_BURST: POST /v1/campaigns
	//   HERALD_LIST_UPLOAD_RATE, HERALD_LIST_UPLOAD_BURST: POST /v1/lists
	PreviewLimit, TemplateSaveLimit, RedriveLimit, BulkRedriveLimit, UserImportLimit Bucket
	CampaignCreateLimit, ListUploadLimit                                             Bucket
	// HERALD_PUSH_TOKENS_PER_USER: how many device tokens one user keeps; past
	// it the least recently registered are removed (default
	// providers.DefaultPushTokensPerUser).
	PushTokensPerUser int
	// HERALD_OPERATOR_KEY: the Bearer key of the operator API
	// (/v1/operator/...: tenant limits, the right to send critical
	// notifications); at least MinOperatorKeyLen bytes. Unset: the operator API is
	// off (404) and only `herald tenant limits` sets them.
	OperatorKey string

	// HERALD_INBOX_STREAMS_PER_USER, HERALD_INBOX_STREAMS_PER_TENANT,
	// HERALD_INBOX_STREAMS_PER_PROCESS: how many inbox streams (SSE) one user, one
	// tenant and this API process may hold open at once (defaults
	// inboxlive.DefaultLimits).
	InboxStreamsPerUser, InboxStreamsPerTenant, InboxStreamsPerProcess int
	// HERALD_INBOX_STREAM_PAGE_BYTES, HERALD_INBOX_STREAMS_MEMORY_BYTES: the
	// items one stream reads and writes at a time, and all streams' pages in
	// flight in this process (defaults inboxlive.DefaultLimits).
	InboxStreamPageBytes, InboxStreamsMemoryBytes int
	// HERALD_INBOX_HEARTBEAT: the inbox streams' heartbeat (default
	// api.DefaultInboxHeartbeat).
	InboxHeartbeat time.Duration
	// HERALD_INBOX_ACTION_RATE, HERALD_INBOX_ACTION_BURST: the per-user token
	// bucket of the inbox item actions and mark-alls (default
	// api.DefaultInboxActions; rate 0: none, stored as -1).
	InboxActionLimit Bucket
	// HERALD_AUTH_FAILURE_RATE, HERALD_AUTH_FAILURE_BURST: per source address,
	// the API keys looked up in PostgreSQL that turn out not to exist (default
	// api.DefaultAuthFailures; rate 0: none, stored as -1).
	AuthFailureLimit Bucket
	// HERALD_METRICS_ADDR: where every process (`herald api`, `herald worker`,
	// `herald dev`: API and worker on one endpoint) serves GET /metrics on a
	// listener of its own, loopback by default; "off" serves none there.
	MetricsAddr string
	// HERALD_METRICS_TOKEN: also serve GET /metrics on the API's port, to
	// "Authorization: Bearer <token>" only (at least MinOperatorKeyLen bytes).
	// Unset: the API port serves no /metrics (404), so metrics are never open
	// to whoever can reach the API.
	MetricsToken string
	// HERALD_METRICS_TENANT_LABELS: add a tenant label to the notification and
	// delivery counters (false by default: tenants can number in the thousands,
	// and every label value is a time series).
	MetricsTenantLabels bool
	// HERALD_WEBHOOK_RETRY_INITIAL, HERALD_WEBHOOK_RETRY_MAX_INTERVAL,
	// HERALD_WEBHOOK_RETRY_FOR: a tenant webhook message's backoff (first
	// delay, doubling up to the max interval) and how long it is retried
	// before it is dead-lettered (defaults contract.DefaultWebhookRetryInitial,
	// DefaultWebhookRetryMaxInterval, DefaultWebhookRetryFor).
	WebhookRetryInitial, WebhookRetryMaxInterval, WebhookRetryFor time.Duration
	// HERALD_WEBHOOK_TIMEOUT: one webhook request's timeout (default 10s).
	WebhookTimeout time.Duration
	// HERALD_WEBHOOK_PORTS: ports tenant webhook URLs may use besides 80 and 443
	// (comma-separated); a destination HERALD_EGRESS_ALLOW names may use any
	// port it allows.
	WebhookPorts []uint16
	// HERALD_CAMPAIGN_PAGE_SIZE (recipients per campaign batch, default
	// workflows.DefaultCampaignPageSize, at most 1000) and HERALD_CAMPAIGN_WINDOW
	// (batches of one campaign in flight, default workflows.DefaultCampaignWindow,
	// at most 32).
	CampaignPageSize int
	CampaignWindow   int
	// HERALD_CAMPAIGN_IN_DOUBT_WAIT: how long a campaign email or SMS found
	// "sending" by a re-run batch waits for the provider's receipt before it is
	// sent again (default activities.DefaultInDoubtWait).
	CampaignInDoubtWait time.Duration
	// HERALD_RETENTION_*: how long rows are kept (retention.Fields names each
	// variable; defaults retention.Defaults). Each value is every tenant's
	// default and the longest a tenant may set (docs/retention.md).
	Retention retention.Policy
	// HERALD_MAINTENANCE_EVERY: how often the maintenance Schedule runs
	// (default DefaultMaintenanceEvery).
	MaintenanceEvery time.Duration
	// HERALD_ORDERING_MAX_HOLD_MIN, HERALD_ORDERING_MAX_HOLD_MAX: the bounds of
	// a tenant's ordering_max_hold, how long an ordered channel waits for an
	// earlier one (defaults api.DefaultOrderingMinHold, DefaultOrderingMaxHold;
	// docs/ordering.md).
	OrderingMinHold, OrderingMaxHold time.Duration
}

// DefaultMaintenanceEvery is HERALD_MAINTENANCE_EVERY's default.
const DefaultMaintenanceEvery = time.Hour

// DefaultMetricsAddr is HERALD_METRICS_ADDR's default.
const DefaultMetricsAddr = "127.0.0.1:9464"

// Bucket is a token bucket: Rate tokens a second, Burst deep.
type Bucket struct {
	Rate  float64
	Burst int
}

// The default buckets of the costly endpoints, per tenant. A preview renders every
// channel under the render budget (milliseconds): 10/s is an editor typing. A
// template save parses every source and keeps a version for ever: 2/s with 30 in
// a row lets a deploy sync a template set. A redrive starts one workflow, like a
// notification. A bulk redrive starts up to 1000: one every 5 s, 3 in a row, is
// at most 200 workflow starts a second sustained, the notifications' default rate.
var (
	DefaultPreviewLimit      = Bucket{Rate: 10, Burst: 20}
	DefaultTemplateSaveLimit = Bucket{Rate: 2, Burst: 30}
	DefaultRedriveLimit      = Bucket{Rate: 10, Burst: 50}
	DefaultBulkRedriveLimit  = Bucket{Rate: 0.2, Burst: 3}
	// An import of users writes up to HERALD_LIST_MAX_BYTES in one
	// transaction: one a minute, 3 in a row.
	DefaultUserImportLimit = Bucket{Rate: 1.0 / 60, Burst: 3}
	// A campaign counts its audience, checks its template and starts a workflow
	// that may send to millions: one a second, 20 in a row. A list upload
	// spools up to HERALD_LIST_MAX_BYTES and COPYs it: one every 5 s, 5 in a row.
	DefaultCampaignCreateLimit = Bucket{Rate: 1, Burst: 20}
	DefaultListUploadLimit     = Bucket{Rate: 0.2, Burst: 5}
)

// MinOperatorKeyLen is the shortest HERALD_OPERATOR_KEY accepted (openssl rand
// -base64 32 gives 44 characters).
const MinOperatorKeyLen = 32

// Defaults, as documented in docs/configuration.md. A default the package
// using the setting also applies (to a zero value) is defined there only, and
// FromEnv reads it from there: campaign sizing
// (workflows.DefaultCampaignPageSize, DefaultCampaignWindow), the in-doubt wait
// (activities.DefaultInDoubtWait), webhook retries
// (contract.DefaultWebhookRetry*), the inbox streams (api.DefaultInboxHeartbeat,
// inboxlive.DefaultLimits).
const (
	DefaultDatabaseURL       = "postgres://herald@127.0.0.1:55432/herald?sslmode=disable"
	DefaultTemporalAddress   = "127.0.0.1:7233"
	DefaultTemporalNamespace = "default"
	DefaultHTTPAddr          = "127.0.0.1:8080"
	DefaultTaskQueue         = "herald-notifications"

	DefaultDedupWindow         = 24 * time.Hour
	DefaultShutdownTimeout     = 15 * time.Second
	DefaultWorkerStopTimeout   = 30 * time.Second
	DefaultReadHeaderTimeout   = 10 * time.Second
	DefaultReadTimeout         = 30 * time.Second
	DefaultWriteTimeout        = 60 * time.Second
	DefaultIdleTimeout         = 120 * time.Second
	DefaultWebhookTolerance    = 5 * time.Minute
	DefaultWebhookTimeout      = 10 * time.Second
	DefaultTenantRatePerSecond = 200
	DefaultTenantBurst         = 400
	// DefaultCampaignMaxAudience is ten million users per campaign;
	// DefaultCampaignMaxConcurrent ten unfinished campaigns per tenant.
	DefaultCampaignMaxAudience   = 10_000_000
	DefaultCampaignMaxConcurrent = 10
)

// FromEnv reads the configuration; a malformed value is an error, never silently defaulted.
func FromEnv() (Config, error) {
	c := Config{
		DatabaseURL:       env("HERALD_DATABASE_URL", DefaultDatabaseURL),
		TemporalAddress:   env(EnvTemporalAddress, DefaultTemporalAddress),
		TemporalNamespace: env("HERALD_TEMPORAL_NAMESPACE", DefaultTemporalNamespace),
		HTTPAddr:          env("HERALD_HTTP_ADDR", DefaultHTTPAddr),
		TaskQueue:         env("HERALD_TASK_QUEUE", DefaultTaskQueue),
		PublicBaseURL:     env("HERALD_PUBLIC_BASE_URL", "http://"+DefaultHTTPAddr),
		SendGridBaseURL:   os.Getenv("HERALD_SENDGRID_BASE_URL"),
		TwilioBaseURL:     os.Getenv("HERALD_TWILIO_BASE_URL"),
		FCMBaseURL:        os.Getenv("HERALD_FCM_BASE_URL"),
		FCMTokenURL:       os.Getenv("HERALD_FCM_TOKEN_URL"),
		MetricsAddr:       env("HERALD_METRICS_ADDR", DefaultMetricsAddr),
	}
	switch v := os.Getenv("HERALD_SANDBOX_API"); v {
	case "", "false", "0":
	case "true", "1":
		c.SandboxAPI = true
	default:
		return c, fmt.Errorf("HERALD_SANDBOX_API=%q: want true or false", v)
	}
	var err error
	if c.SandboxFallback, err = boolean(EnvSandboxFallback, false); err != nil {
		return c, err
	}
	if c.MetricsTenantLabels, err = boolean("HERALD_METRICS_TENANT_LABELS", false); err != nil {
		return c, err
	}
	for _, d := range []struct {
		name string
		def  time.Duration
		dst  *time.Duration
	}{
		{"HERALD_DEFAULT_DEDUP_WINDOW", DefaultDedupWindow, &c.DefaultDedupWindow},
		{"HERALD_SHUTDOWN_TIMEOUT", DefaultShutdownTimeout, &c.ShutdownTimeout},
		{"HERALD_HTTP_READ_HEADER_TIMEOUT", DefaultReadHeaderTimeout, &c.HTTPReadHeaderTimeout},
		{"HERALD_HTTP_READ_TIMEOUT", DefaultReadTimeout, &c.HTTPReadTimeout},
		{"HERALD_HTTP_WRITE_TIMEOUT", DefaultWriteTimeout, &c.HTTPWriteTimeout},
		{"HERALD_HTTP_IDLE_TIMEOUT", DefaultIdleTimeout, &c.HTTPIdleTimeout},
		{"HERALD_WEBHOOK_TOLERANCE", DefaultWebhookTolerance, &c.WebhookTolerance},
		{"HERALD_WEBHOOK_RETRY_INITIAL", contract.DefaultWebhookRetryInitial, &c.WebhookRetryInitial},
		{"HERALD_WEBHOOK_RETRY_MAX_INTERVAL", contract.DefaultWebhookRetryMaxInterval, &c.WebhookRetryMaxInterval},
		{"HERALD_WEBHOOK_RETRY_FOR", contract.DefaultWebhookRetryFor, &c.WebhookRetryFor},
		{"HERALD_WEBHOOK_TIMEOUT", DefaultWebhookTimeout, &c.WebhookTimeout},
	} {
		if *d.dst, err = duration(d.name, d.def); err != nil {
			return c, err
		}
	}
	if c.WorkerStopTimeout, err = durationOrZero("HERALD_WORKER_STOP_TIMEOUT", DefaultWorkerStopTimeout); err != nil {
		return c, err
	}
	if c.WorkerCacheSize, err = integer("HERALD_WORKER_CACHE_SIZE", worker.DefaultCacheSize); err != nil {
		return c, err
	}
	if c.WorkerCacheSize < 1 {
		return c, fmt.Errorf("HERALD_WORKER_CACHE_SIZE=0: want at least 1 (workflow runs kept in memory)")
	}
	if c.TenantRatePerSecond, err = number("HERALD_TENANT_RATE", DefaultTenantRatePerSecond); err != nil {
		return c, err
	}
	burst, err := number("HERALD_TENANT_BURST", DefaultTenantBurst)
	if err != nil {
		return c, err
	}
	quota, err := number("HERALD_TENANT_DAILY_QUOTA", 0)
	if err != nil {
		return c, err
	}
	c.TenantBurst, c.TenantDailyQuota = int(burst), int(quota)
	audience, err := integer("HERALD_CAMPAIGN_MAX_AUDIENCE", DefaultCampaignMaxAudience)
	if err != nil {
		return c, err
	}
	if c.CampaignMaxConcurrent, err = integer("HERALD_CAMPAIGN_MAX_CONCURRENT", DefaultCampaignMaxConcurrent); err != nil {
		return c, err
	}
	listBytes, err := integer("HERALD_LIST_MAX_BYTES", api.DefaultMaxListBytes)
	if err != nil {
		return c, err
	}
	c.CampaignMaxAudience, c.ListMaxBytes = int64(audience), int64(listBytes)
	if c.Egress, err = egress.Parse(os.Getenv("HERALD_EGRESS_ALLOW")); err != nil {
		return c, fmt.Errorf("HERALD_EGRESS_ALLOW: %w", err)
	}
	for f := range strings.FieldsFuncSeq(os.Getenv("HERALD_WEBHOOK_PORTS"), func(r rune) bool { return r == ',' || r == ' ' }) {
		n, err := strconv.ParseUint(f, 10, 16)
		if err != nil || n == 0 {
			return c, fmt.Errorf("HERALD_WEBHOOK_PORTS: %q is not a port (1-65535)", f)
		}
		c.WebhookPorts = append(c.WebhookPorts, uint16(n))
	}
	for _, b := range []struct {
		name string
		def  Bucket
		dst  *Bucket
	}{
		{"PREVIEW", DefaultPreviewLimit, &c.PreviewLimit},
		{"TEMPLATE_SAVE", DefaultTemplateSaveLimit, &c.TemplateSaveLimit},
		{"REDRIVE", DefaultRedriveLimit, &c.RedriveLimit},
		{"BULK_REDRIVE", DefaultBulkRedriveLimit, &c.BulkRedriveLimit},
		{"USER_IMPORT", DefaultUserImportLimit, &c.UserImportLimit},
		{"CAMPAIGN_CREATE", DefaultCampaignCreateLimit, &c.CampaignCreateLimit},
		{"LIST_UPLOAD", DefaultListUploadLimit, &c.ListUploadLimit},
	} {
		if b.dst.Rate, err = number("HERALD_"+b.name+"_RATE", b.def.Rate); err != nil {
			return c, err
		}
		if b.dst.Burst, err = integer("HERALD_"+b.name+"_BURST", b.def.Burst); err != nil {
			return c, err
		}
	}
	for _, n := range []struct {
		name string
		def  int
		dst  *int
	}{
		{"HERALD_INBOX_STREAMS_PER_USER", inboxlive.DefaultLimits.PerUser, &c.InboxStreamsPerUser},
		{"HERALD_INBOX_STREAMS_PER_TENANT", inboxlive.DefaultLimits.PerTenant, &c.InboxStreamsPerTenant},
		{"HERALD_INBOX_STREAMS_PER_PROCESS", inboxlive.DefaultLimits.PerProcess, &c.InboxStreamsPerProcess},
		{"HERALD_INBOX_STREAM_PAGE_BYTES", inboxlive.DefaultLimits.PageBytes, &c.InboxStreamPageBytes},
		{"HERALD_INBOX_STREAMS_MEMORY_BYTES", inboxlive.DefaultLimits.MemoryBytes, &c.InboxStreamsMemoryBytes},
		{"HERALD_PUSH_TOKENS_PER_USER", providers.DefaultPushTokensPerUser, &c.PushTokensPerUser},
	} {
		if *n.dst, err = integer(n.name, n.def); err != nil {
			return c, err
		}
	}
	if c.InboxHeartbeat, err = duration("HERALD_INBOX_HEARTBEAT", api.DefaultInboxHeartbeat); err != nil {
		return c, err
	}
	for _, b := range []struct {
		name string
		def  api.Rate
		dst  *Bucket
	}{
		{"INBOX_ACTION", api.DefaultInboxActions, &c.InboxActionLimit},
		{"AUTH_FAILURE", api.DefaultAuthFailures, &c.AuthFailureLimit},
	} {
		if b.dst.Rate, err = number("HERALD_"+b.name+"_RATE", b.def.PerSecond); err != nil {
			return c, err
		}
		if b.dst.Burst, err = integer("HERALD_"+b.name+"_BURST", b.def.Burst); err != nil {
			return c, err
		}
		if b.dst.Rate == 0 {
			b.dst.Rate = -1 // off (a zero Bucket means the default)
		}
	}
	if c.CampaignPageSize, err = integer("HERALD_CAMPAIGN_PAGE_SIZE", workflows.DefaultCampaignPageSize); err != nil {
		return c, err
	}
	if c.CampaignWindow, err = integer("HERALD_CAMPAIGN_WINDOW", workflows.DefaultCampaignWindow); err != nil {
		return c, err
	}
	if c.CampaignInDoubtWait, err = duration("HERALD_CAMPAIGN_IN_DOUBT_WAIT", activities.DefaultInDoubtWait); err != nil {
		return c, err
	}
	if c.OrderingMinHold, err = duration("HERALD_ORDERING_MAX_HOLD_MIN", api.DefaultOrderingMinHold); err != nil {
		return c, err
	}
	if c.OrderingMaxHold, err = duration("HERALD_ORDERING_MAX_HOLD_MAX", api.DefaultOrderingMaxHold); err != nil {
		return c, err
	}
	if c.OrderingMinHold > c.OrderingMaxHold {
		return c, fmt.Errorf("HERALD_ORDERING_MAX_HOLD_MIN (%s) is over HERALD_ORDERING_MAX_HOLD_MAX (%s)", c.OrderingMinHold, c.OrderingMaxHold)
	}
	if c.CampaignPageSize < 1 || c.CampaignPageSize > 1000 || c.CampaignWindow < 1 || c.CampaignWindow > 32 {
		return c, fmt.Errorf("HERALD_CAMPAIGN_PAGE_SIZE must be 1 to 1000 and HERALD_CAMPAIGN_WINDOW 1 to 32")
	}
	c.Retention = retention.Defaults
	for _, f := range retention.Fields {
		if f.Dur != nil {
			if *f.Dur(&c.Retention), err = duration(f.Env, *f.Dur(&c.Retention)); err != nil {
				return c, err
			}
		} else if *f.Int(&c.Retention), err = integer(f.Env, *f.Int(&c.Retention)); err != nil {
			return c, err
		}
	}
	if err := c.Retention.Validate(); err != nil {
		return c, err
	}
	if c.MaintenanceEvery, err = duration("HERALD_MAINTENANCE_EVERY", DefaultMaintenanceEvery); err != nil {
		return c, err
	}
	if c.OperatorKey = os.Getenv("HERALD_OPERATOR_KEY"); c.OperatorKey != "" && len(c.OperatorKey) < MinOperatorKeyLen {
		return c, fmt.Errorf("HERALD_OPERATOR_KEY is %d bytes: want at least %d (openssl rand -base64 32)", len(c.OperatorKey), MinOperatorKeyLen)
	}
	if c.MetricsToken = os.Getenv("HERALD_METRICS_TOKEN"); c.MetricsToken != "" && len(c.MetricsToken) < MinOperatorKeyLen {
		return c, fmt.Errorf("HERALD_METRICS_TOKEN is %d bytes: want at least %d (openssl rand -base64 32)", len(c.MetricsToken), MinOperatorKeyLen)
	}
	return c, nil
}

// EnvTemporalAddress names the variable of Config.TemporalAddress (`herald
// migrate` registers the search attributes only when it is set).
const EnvTemporalAddress = "HERALD_TEMPORAL_ADDRESS"

// EnvSandboxFallback names the variable of Config.SandboxFallback.
const EnvSandboxFallback = "HERALD_SANDBOX_FALLBACK"

// boolean reads true/1 or false/0; unset or empty is def.
func boolean(name string, def bool) (bool, error) {
	switch v := os.Getenv(name); v {
	case "":
		return def, nil
	case "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	default:
		return false, fmt.Errorf("%s=%q: want true or false", name, v)
	}
}

func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

func duration(name string, def time.Duration) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive Go duration such as 24h", name, v)
	}
	return d, nil
}

// durationOrZero is duration that also takes 0 ("0" or "0s").
func durationOrZero(name string, def time.Duration) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s=%q: want a Go duration ≥ 0 such as 30s", name, v)
	}
	return d, nil
}

func number(name string, def float64) (float64, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("%s=%q: want a number ≥ 0", name, v)
	}
	return f, nil
}

// integer reads a whole number ≥ 0.
func integer(name string, def int) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s=%q: want a whole number ≥ 0", name, v)
	}
	return n, nil
}
