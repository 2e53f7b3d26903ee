// Package metrics defines every Prometheus metric Herald exports, once: its
// name, help and labels. The API, the activities and the Temporal SDK record
// into one *Metrics per process (a registry of its own, so two Heralds in one
// test binary never collide); GET /metrics serves it.
//
// Labels are bounded sets only: routes are gin's route templates, channels,
// providers, outcomes, reasons and lanes come from internal/herald and the
// provider registry. No metric carries a user id; a tenant label is added only
// with Options.TenantLabels (HERALD_METRICS_TENANT_LABELS), since tenants can
// number in the thousands.
//
// Every method is safe on a nil *Metrics (it records nothing), so components
// built without metrics (unit tests) need no stub.
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.temporal.io/sdk/client"

	"github.com/herald-notify/herald/internal/herald"
)

// Metric names: the dashboard (deploy/grafana) and the tests name these.
const (
	HTTPRequests          = "herald_http_requests_total"
	HTTPRequestDuration   = "herald_http_request_duration_seconds"
	NotificationsAccepted = "herald_notifications_accepted_total"
	NotificationsDup      = "herald_notifications_duplicate_total"
	NotificationsRejected = "herald_notifications_rejected_total"
	Deliveries            = "herald_deliveries_total"
	ProviderCallDuration  = "herald_provider_call_duration_seconds"
	DeliveryRetries       = "herald_delivery_retries_total"
	DeadLettered          = "herald_dead_lettered_total"
	DeadLettersOpen       = "herald_dead_letters_open"
	InboxStreamsOpen      = "herald_inbox_streams_open"
	InboxStreamWakeups    = "herald_inbox_stream_wakeups_total"
	AuthLookups           = "herald_auth_key_lookups_total"
	InboxStreamMemory     = "herald_inbox_stream_memory_bytes"
	InboxSlowClients      = "herald_inbox_stream_slow_clients_total"
	InboxStreamReads      = "herald_inbox_stream_reads_total"
	Suppressions          = "herald_suppressions_total"
	RateLimited           = "herald_rate_limited_total"
	WebhookAttempts       = "herald_webhook_attempts_total"
	WebhookDeadLettered   = "herald_webhook_dead_lettered_total"
	CampaignsFinished     = "herald_campaigns_finished_total"
	CampaignRecipients    = "herald_campaign_recipients_total"
	// Maintenance (docs/retention.md).
	MaintenanceDeletedRows = "herald_maintenance_deleted_rows_total"
	MaintenanceRuns        = "herald_maintenance_runs_total"
	MaintenanceRunSeconds  = "herald_maintenance_run_duration_seconds"
	MaintenancePartitions  = "herald_maintenance_partitions_total"
	MaintenanceLockWait    = "herald_maintenance_lock_wait_seconds"
)

// Delivery outcomes (the outcome label of herald_deliveries_total): one per
// provider call, plus "duplicate" when the delivery guard found the channel
// already sent and called nothing.
const (
	OutcomeSent      = "sent"
	OutcomeRetryable = "retryable_error"
	OutcomePermanent = "permanent_error"
	OutcomeDuplicate = "duplicate"
	OutcomeDelivered = "delivered" // the in-app inbox: stored is delivered
)

// API key lookups in PostgreSQL (the outcome label of herald_auth_key_lookups_total).
const (
	AuthLookupFound    = "found"
	AuthLookupNotFound = "not_found"
)

// Options tune what is labelled.
type Options struct {
	// TenantLabels adds a tenant label to the notification and delivery
	// counters (HERALD_METRICS_TENANT_LABELS; off by default).
	TenantLabels bool
}

// Metrics is one process's metrics.
type Metrics struct {
	// Registry holds every Herald metric, the Go and process collectors and
	// (see TemporalHandler) the Temporal SDK's metrics.
	Registry *prometheus.Registry
	tenants  bool

	httpRequests *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec
	accepted     *prometheus.CounterVec
	duplicate    *prometheus.CounterVec
	rejected     *prometheus.CounterVec
	deliveries   *prometheus.CounterVec
	providerDur  *prometheus.HistogramVec
	retries      *prometheus.CounterVec
	deadLettered *prometheus.CounterVec
	suppressions *prometheus.CounterVec
	rateLimited  *prometheus.CounterVec
	whAttempts   *prometheus.CounterVec
	whDead       *prometheus.CounterVec
	campaigns    *prometheus.CounterVec
	campaignRcpt *prometheus.CounterVec
	authLookups  *prometheus.CounterVec
	mtDeleted    *prometheus.CounterVec
	mtRuns       *prometheus.CounterVec
	mtRunSeconds *prometheus.HistogramVec
	mtParts      *prometheus.CounterVec
	mtLockWait   *prometheus.HistogramVec

	gaugeOnce          sync.Once
	streamsOnce        sync.Once
	streamCountersOnce sync.Once
	streamMemoryOnce   sync.Once
	temporalOnce       sync.Once
	temporal           client.MetricsHandler
}

// New registers every metric on a new registry.
func New(opts Options) *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Metrics{Registry: reg, tenants: opts.TenantLabels}
	tenant := func(labels ...string) []string {
		if m.tenants {
			return append(labels, "tenant")
		}
		return labels
	}
	// Latency buckets from 5 ms (a cached read) to 30 s (a provider timeout).
	buckets := []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	m.httpRequests = counter(reg, HTTPRequests, "API requests by method, route template and status code.", "method", "route", "status")
	m.httpDuration = histogram(reg, HTTPRequestDuration, "API request latency by method and route template.", buckets, "method", "route")
	m.accepted = counter(reg, NotificationsAccepted, "Notifications accepted (202: the workflow started), by lane.", tenant("lane")...)
	m.duplicate = counter(reg, NotificationsDup, "Submissions answered as duplicates of an open dedup window.", tenant()...)
	m.rejected = counter(reg, NotificationsRejected, "Submissions refused, by error code (the reason).", tenant("reason")...)
	m.deliveries = counter(reg, Deliveries, "Delivery attempts by channel, provider and outcome (sent, retryable_error, permanent_error, duplicate, delivered).", tenant("channel", "provider", "outcome")...)
	m.providerDur = histogram(reg, ProviderCallDuration, "Provider call latency by channel, provider and outcome.", buckets, "channel", "provider", "outcome")
	m.retries = counter(reg, DeliveryRetries, "Delivery activity attempts after the first (Temporal retries), by channel.", "channel")
	m.deadLettered = counter(reg, DeadLettered, "Channels dead-lettered after their retries ran out, by channel.", "channel")
	m.suppressions = counter(reg, Suppressions, "Channels suppressed (not attempted), by channel and reason.", tenant("channel", "reason")...)
	m.rateLimited = counter(reg, RateLimited, "Requests refused with 429, by route template and error code.", "route", "code")
	m.whAttempts = counter(reg, WebhookAttempts, "Tenant webhook delivery attempts by outcome (delivered, failed).", "outcome")
	m.whDead = counter(reg, WebhookDeadLettered, "Tenant webhook messages dead-lettered after their retries ran out.")
	m.campaigns = counter(reg, CampaignsFinished, "Campaigns that reached a final status (completed, cancelled, failed).", "status")
	m.campaignRcpt = counter(reg, CampaignRecipients, "Campaign recipients' channels by what the first batch run did with them (delivered, suppressed, deferred, retrying, failed, duplicate); a re-run batch counts its duplicates.", "outcome")
	m.authLookups = counter(reg, AuthLookups, "API keys looked up in PostgreSQL (not served from the auth cache), by outcome (found, not_found).", "outcome")
	m.mtDeleted = counter(reg, MaintenanceDeletedRows, "Rows the maintenance workflow deleted past their retention, by kind (notifications, inbox, audit_log, ...).", "kind")
	m.mtRuns = counter(reg, MaintenanceRuns, "Maintenance runs finished.")
	m.mtRunSeconds = histogram(reg, MaintenanceRunSeconds, "How long a maintenance run took, start to report.", []float64{1, 5, 15, 60, 300, 900, 3600})
	m.mtParts = counter(reg, MaintenancePartitions, "Partitions the maintenance workflow created, detached or dropped, and partition indexes it compacted (index_compacted), by table and action.", "table", "action")
	m.mtLockWait = histogram(reg, MaintenanceLockWait, "How long maintenance DDL waited for its lock (each attempt; lock_timeout ends a wait), by table.", []float64{.001, .005, .01, .05, .1, .25, .5, 1}, "table")
	m.mtRuns.WithLabelValues()
	// Series a dashboard alerts on exist from the start, at 0, rather than
	// appearing only with the first failure.
	for _, ch := range herald.Channels {
		m.retries.WithLabelValues(string(ch))
		m.deadLettered.WithLabelValues(string(ch))
	}
	for _, o := range []string{"delivered", "failed"} {
		m.whAttempts.WithLabelValues(o)
	}
	m.whDead.WithLabelValues()
	for _, code := range []string{"rate_limited", "daily_quota_exceeded"} {
		m.rateLimited.WithLabelValues("/v1/notifications", code)
	}
	if !m.tenants {
		m.duplicate.WithLabelValues()
	}
	for _, st := range []string{herald.CampaignCompleted, herald.CampaignCancelled, herald.CampaignFailed} {
		m.campaigns.WithLabelValues(st)
	}
	for _, o := range CampaignOutcomes {
		m.campaignRcpt.WithLabelValues(o)
	}
	return m
}

func counter(reg *prometheus.Registry, name, help string, labels ...string) *prometheus.CounterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	reg.MustRegister(v)
	return v
}

func histogram(reg *prometheus.Registry, name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	reg.MustRegister(v)
	return v
}

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry, MaxRequestsInFlight: 4})
}

func (m *Metrics) withTenant(tenant string, values ...string) []string {
	if m.tenants {
		return append(values, tenant)
	}
	return values
}

// HTTPRequest records one API request; route is the route template ("" when
// no route matched).
func (m *Metrics) HTTPRequest(method, route string, status int, d time.Duration) {
	if m == nil {
		return
	}
	if route == "" {
		route = "unmatched"
	}
	m.httpRequests.WithLabelValues(method, route, strconv.Itoa(status)).Inc()
	m.httpDuration.WithLabelValues(method, route).Observe(d.Seconds())
}

// RateLimit records a 429 with its error code (rate_limited,
// daily_quota_exceeded) on route.
func (m *Metrics) RateLimit(route, code string) {
	if m == nil {
		return
	}
	m.rateLimited.WithLabelValues(route, code).Inc()
}

// Accepted records a notification accepted on lane.
func (m *Metrics) Accepted(tenant string, lane herald.Lane) {
	if m == nil {
		return
	}
	m.accepted.WithLabelValues(m.withTenant(tenant, string(lane))...).Inc()
}

// Duplicate records a submission answered as a duplicate.
func (m *Metrics) Duplicate(tenant string) {
	if m == nil {
		return
	}
	m.duplicate.WithLabelValues(m.withTenant(tenant)...).Inc()
}

// Rejected records a refused submission; reason is the error code.
func (m *Metrics) Rejected(tenant, reason string) {
	if m == nil {
		return
	}
	m.rejected.WithLabelValues(m.withTenant(tenant, reason)...).Inc()
}

// ProviderCall records one provider call's outcome and latency.
func (m *Metrics) ProviderCall(tenant string, channel herald.Channel, provider, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.deliveries.WithLabelValues(m.withTenant(tenant, string(channel), provider, outcome)...).Inc()
	m.providerDur.WithLabelValues(string(channel), provider, outcome).Observe(d.Seconds())
}

// Delivery records a delivery outcome that made no provider call (a guard
// duplicate, an inbox delivery).
func (m *Metrics) Delivery(tenant string, channel herald.Channel, provider, outcome string) {
	if m == nil {
		return
	}
	m.deliveries.WithLabelValues(m.withTenant(tenant, string(channel), provider, outcome)...).Inc()
}

// Retry records a delivery activity attempt after the first.
func (m *Metrics) Retry(channel herald.Channel) {
	if m == nil {
		return
	}
	m.retries.WithLabelValues(string(channel)).Inc()
}

// DeadLetter records a dead-lettered channel.
func (m *Metrics) DeadLetter(channel herald.Channel) {
	if m == nil {
		return
	}
	m.deadLettered.WithLabelValues(string(channel)).Inc()
}

// Suppression records a channel suppressed for reason.
func (m *Metrics) Suppression(tenant string, channel herald.Channel, reason herald.Reason) {
	if m == nil {
		return
	}
	m.suppressions.WithLabelValues(m.withTenant(tenant, string(channel), string(reason))...).Inc()
}

// WebhookAttempt records one tenant webhook delivery attempt.
func (m *Metrics) WebhookAttempt(outcome string) {
	if m == nil {
		return
	}
	m.whAttempts.WithLabelValues(outcome).Inc()
}

// WebhookDeadLetter records a dead-lettered tenant webhook message.
func (m *Metrics) WebhookDeadLetter() {
	if m == nil {
		return
	}
	m.whDead.WithLabelValues().Inc()
}

// CampaignFinished records a campaign reaching a final status.
func (m *Metrics) CampaignFinished(status string) {
	if m == nil {
		return
	}
	m.campaigns.WithLabelValues(status).Inc()
}

// CampaignOutcomes are the outcome labels of herald_campaign_recipients_total.
var CampaignOutcomes = []string{"delivered", "suppressed", "deferred", "retrying", "failed", "duplicate"}

// CampaignBatch records one campaign batch's result (recipients is not a
// channel count and is not recorded).
func (m *Metrics) CampaignBatch(recipients, delivered, suppressed, deferred, retrying, failed, duplicates int) {
	if m == nil {
		return
	}
	for i, n := range []int{delivered, suppressed, deferred, retrying, failed, duplicates} {
		if n > 0 {
			m.campaignRcpt.WithLabelValues(CampaignOutcomes[i]).Add(float64(n))
		}
	}
}

// MaintenanceDeleted records rows maintenance deleted of a kind.
func (m *Metrics) MaintenanceDeleted(kind string, n int64) {
	if m == nil || n <= 0 {
		return
	}
	m.mtDeleted.WithLabelValues(kind).Add(float64(n))
}

// MaintenanceRun records a finished maintenance run.
func (m *Metrics) MaintenanceRun(d time.Duration) {
	if m == nil {
		return
	}
	m.mtRuns.WithLabelValues().Inc()
	m.mtRunSeconds.WithLabelValues().Observe(d.Seconds())
}

// MaintenancePartition records a partition created, detached or dropped.
func (m *Metrics) MaintenancePartition(table, action string) {
	if m == nil {
		return
	}
	m.mtParts.WithLabelValues(table, action).Inc()
}

// MaintenanceLockWait records how long one DDL statement waited for its lock.
func (m *Metrics) MaintenanceLockWait(table string, d time.Duration) {
	if m == nil {
		return
	}
	m.mtLockWait.WithLabelValues(table).Observe(d.Seconds())
}

// GaugeSource answers a gauge at scrape time (a count in PostgreSQL).
type GaugeSource func(ctx context.Context) (float64, error)

// RegisterDeadLettersOpen registers the open dead letters gauge, read from src
// at most every cacheFor (so a scrape storm costs one query); only the first
// call per Metrics registers.
func (m *Metrics) RegisterDeadLettersOpen(src GaugeSource, cacheFor time.Duration) {
	if m == nil {
		return
	}
	m.gaugeOnce.Do(func() {
		g := &cachedGauge{src: src, ttl: cacheFor}
		m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: DeadLettersOpen,
			Help: "Dead letters not yet redriven, all tenants (read from PostgreSQL, cached)."}, g.value))
	})
}

// RegisterInboxStreamsOpen registers the gauge of the inbox streams (SSE) this
// process holds open, read from open on every scrape; only the first call per
// Metrics registers.
func (m *Metrics) RegisterInboxStreamsOpen(open func() int) {
	if m == nil {
		return
	}
	m.streamsOnce.Do(func() {
		m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: InboxStreamsOpen,
			Help: "Inbox streams (GET /v1/users/{user_id}/inbox/stream) this API process holds open."},
			func() float64 { return float64(open()) }))
	})
}

// RegisterInboxStreamMemory registers the gauge of the stream page bytes
// reserved now (bounded by HERALD_INBOX_STREAMS_MEMORY_BYTES) and the counter
// of live streams closed as slow clients (only the first call per Metrics
// registers).
func (m *Metrics) RegisterInboxStreamMemory(reserved, slow func() int64) {
	if m == nil {
		return
	}
	m.streamMemoryOnce.Do(func() {
		m.Registry.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: InboxStreamMemory,
				Help: "Bytes of inbox stream pages reserved now in this API process (at most HERALD_INBOX_STREAMS_MEMORY_BYTES)."},
				func() float64 { return float64(reserved()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: InboxSlowClients,
				Help: "Live inbox streams closed with a refetch for falling more than a page behind."},
				func() float64 { return float64(slow()) }))
	})
}

// AuthLookup counts one API key looked up in PostgreSQL.
func (m *Metrics) AuthLookup(outcome string) {
	if m == nil {
		return
	}
	m.authLookups.WithLabelValues(outcome).Inc()
}

// RegisterInboxStreamCounters registers the counters of the inbox streams'
// wake-ups (only the first call per Metrics registers) (NOTIFYs that named a user with a stream here) and of their log
// reads, read on every scrape.
func (m *Metrics) RegisterInboxStreamCounters(wakeups, reads func() int64) {
	if m == nil {
		return
	}
	m.streamCountersOnce.Do(func() {
		m.Registry.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: InboxStreamWakeups,
				Help: "Inbox stream wake-ups this API process delivered (each costs the stream one read of its event log)."},
				func() float64 { return float64(wakeups()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: InboxStreamReads,
				Help: "Reads of inbox event logs by this API process's streams (wake-ups, heartbeats, replays)."},
				func() float64 { return float64(reads()) }))
	})
}

// RegisterGauge registers a gauge read from src on every scrape (for other
// components: inbox streams open, campaigns running).
func (m *Metrics) RegisterGauge(name, help string, src func() float64) {
	if m == nil {
		return
	}
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, src))
}

type cachedGauge struct {
	src GaugeSource
	ttl time.Duration

	mu   sync.Mutex
	at   time.Time
	last float64
}

func (g *cachedGauge) value() float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.at.IsZero() && time.Since(g.at) < g.ttl {
		return g.last
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if v, err := g.src(ctx); err == nil {
		g.last = v
	}
	g.at = time.Now()
	return g.last
}
