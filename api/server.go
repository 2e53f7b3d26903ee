// Package api is Herald's REST API (gin). It authenticates the tenant from the API
// key, validates input, and turns POST /v1/notifications into a workflow start: the
// start is both the durable acceptance and the Layer-1 dedup check.
package api

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/hashicorp/golang-lru/v2/expirable"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"

	"github.com/herald-notify/herald/internal/inboxlive"
	"github.com/herald-notify/herald/internal/metrics"
	"github.com/herald-notify/herald/internal/ratelimit"
	"github.com/herald-notify/herald/internal/secrets"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/unsubscribe"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/workflows"
)

// Config is what the API needs besides its dependencies.
type Config struct {
	TaskQueue          string
	DefaultDedupWindow time.Duration
	// AuthCacheTTL bounds how long a revoked key or a deleted user can still be
	// honoured by one API process; 0 disables the caches.
	AuthCacheTTL time.Duration

	// Providers stores provider configs, push tokens and receipts.
	Providers *providers.Store
	// Registry is every provider a tenant can configure (providers/registry.New()):
	// it validates configs and receives the providers' webhooks.
	Registry *providers.Registry
	// PublicBaseURL is how providers reach this API (Twilio signs the full URL).
	PublicBaseURL string
	// WebhookTolerance bounds the age of a signed SendGrid webhook timestamp.
	WebhookTolerance time.Duration
	// Sandbox, when set, serves GET /v1/sandbox/messages from this recorder (dev only).
	Sandbox providers.SandboxRecorder
	// Unsubscribe verifies one-click unsubscribe links (the worker signs them).
	Unsubscribe *unsubscribe.Signer
	// Limiter and TenantLimits limit POST /v1/notifications per tenant; a nil
	// Limiter limits nothing. TenantLimits are the defaults; the operator sets a
	// tenant's own (store.TenantLimits).
	Limiter      *ratelimit.Limiter
	TenantLimits TenantLimits
	// LeaseWindow sizes the token leases this process takes from the limiter's
	// buckets (ratelimit.Leases; 0: ratelimit.DefaultLeaseWindow).
	LeaseWindow time.Duration
	// PublicLimits limit the endpoints without an API key (zero: the defaults).
	PublicLimits PublicLimits
	// CostLimits limit the other endpoints that cost work, per tenant (zero
	// buckets: none).
	CostLimits CostLimits
	// OperatorKey (HERALD_OPERATOR_KEY) opens the operator API
	// (/v1/operator/...); "" turns it off (404).
	OperatorKey string

	// UserTokenKey signs and verifies user tokens (empty: user tokens off);
	// InboxSecrets seals the tenants' inbox HMAC secrets (nil: off). See
	// user_tokens.go.
	UserTokenKey []byte
	InboxSecrets *secrets.Keyring
	// InboxHub wakes the inbox streams of this process (nil: streams off);
	// InboxHeartbeat is the streams' heartbeat (0: DefaultInboxHeartbeat).
	InboxHub       *inboxlive.Hub
	InboxHeartbeat time.Duration
	// Metrics records requests and submissions and is served at GET /metrics;
	// nil records nothing and serves no /metrics.
	Metrics *metrics.Metrics
	// Webhooks serves /v1/webhook-endpoints.
	Webhooks WebhookConfig
	// CampaignPageSize and CampaignWindow size every campaign's batches (0: the
	// workflow's defaults).
	CampaignPageSize int
	CampaignWindow   int
	// CampaignInDoubtWait: see contract.CampaignSpec.InDoubtWait.
	CampaignInDoubtWait time.Duration
}

// TemplateCacheTTL bounds how long another API replica may keep accepting with the
// previous version of a template that was just saved.
const TemplateCacheTTL = 2 * time.Second

// Server holds the API's dependencies.
type Server struct {
	store    *store.Store
	temporal client.Client
	cfg      Config
	log      *slog.Logger

	tenants *expirable.LRU[string, store.Tenant] // API key hash → tenant
	users   *expirable.LRU[string, string]       // tenant/user known to exist → the user's locale
	// settings caches tenant settings for the API limits (a few seconds).
	settings *expirable.LRU[string, store.TenantSettings]
	// templates caches the latest template versions for the accept path (see
	// TemplateCacheTTL); saving or deleting through this process evicts at once.
	templates *expirable.LRU[string, store.TemplateRecord]
	// public holds the buckets of Config.PublicLimits.
	public *publicLimiter
	// hub is Config.InboxHub; inboxSettings caches the tenants' allowed origins.
	hub           *inboxlive.Hub
	inboxSettings *expirable.LRU[string, []string]
	// closing ends every open stream (CloseStreams, on shutdown).
	closing   chan struct{}
	closeOnce sync.Once
	// leases hands out Config.Limiter's bucket tokens in leases (nil without a
	// Limiter).
	leases *ratelimit.Leases
}

// CloseStreams ends every open inbox stream (their clients reconnect, with
// Last-Event-ID, to another replica): http.Server.Shutdown waits for requests
// to finish, and a stream never would. Register it with RegisterOnShutdown.
func (s *Server) CloseStreams() { s.closeOnce.Do(func() { close(s.closing) }) }

// New builds the API server.
func New(st *store.Store, tc client.Client, cfg Config, log *slog.Logger) *Server {
	s := &Server{store: st, temporal: tc, cfg: cfg, log: log,
		settings:      expirable.NewLRU[string, store.TenantSettings](10_000, nil, 5*time.Second),
		templates:     expirable.NewLRU[string, store.TemplateRecord](10_000, nil, TemplateCacheTTL),
		public:        newPublicLimiter(cfg.PublicLimits),
		hub:           cfg.InboxHub,
		closing:       make(chan struct{}),
		inboxSettings: expirable.NewLRU[string, []string](10_000, nil, 5*time.Second)}
	if cfg.Limiter != nil {
		s.leases = ratelimit.NewLeases(cfg.Limiter, cfg.LeaseWindow, 0)
	}
	if cfg.AuthCacheTTL > 0 {
		s.tenants = expirable.NewLRU[string, store.Tenant](10_000, nil, cfg.AuthCacheTTL)
		s.users = expirable.NewLRU[string, string](100_000, nil, cfg.AuthCacheTTL)
	}
	return s
}

// Handler returns the HTTP routes.
func (s *Server) Handler() http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.HandleMethodNotAllowed = true
	r.Use(s.accessLog, s.recoverJSON, s.preflight)
	r.NoRoute(func(c *gin.Context) { s.abort(c, notFound("route")) })
	r.NoMethod(func(c *gin.Context) {
		s.abort(c, &Error{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed", Message: c.Request.Method + " is not allowed here"})
	})

	r.GET("/healthz", s.healthz)
	r.GET("/readyz", s.readyz)
	r.GET("/openapi.yaml", serveOpenAPI)
	r.GET("/metrics", gin.WrapH(s.cfg.Metrics.Handler()))

	v1 := r.Group("/v1", s.authenticate)
	v1.POST("/notifications", s.countSubmission, s.limitTenant, s.createNotification)
	v1.GET("/notifications", s.findNotifications)
	v1.GET("/notifications/:notification_id", s.getNotification)
	v1.DELETE("/notifications/:notification_id", s.audited(AuditNotificationCancel, auditFields), s.cancelNotification)
	v1.GET("/dead-letters", s.listDeadLetters)
	v1.POST("/dead-letters/redrive", s.limitCost("tenant-bulk-redrive:", s.cfg.CostLimits.BulkRedrive, "bulk redrives"), s.audited(AuditDeadLetterBulkRedrive, auditFields), s.bulkRedrive)
	v1.POST("/dead-letters/:dead_letter_id/redrive", s.limitCost("tenant-redrive:", s.cfg.CostLimits.Redrive, "redrives"), s.audited(AuditDeadLetterRedrive, auditFields), s.redriveDeadLetter)
	v1.PUT("/users/:user_id", s.audited(AuditUserPut, auditFieldNames), s.putUser)
	v1.GET("/users/:user_id", s.getUser)
	v1.POST("/users/:user_id/token", s.mintUserToken)
	v1.GET("/users/:user_id/inbox", s.inboxCORS, s.listInbox)
	v1.GET("/users/:user_id/inbox/counts", s.inboxCORS, s.getInboxCounts)
	v1.GET("/users/:user_id/inbox/stream", s.inboxCORS, s.inboxStream)
	v1.POST("/users/:user_id/inbox/read-all", s.inboxCORS, s.markAll(true))
	v1.POST("/users/:user_id/inbox/seen-all", s.inboxCORS, s.markAll(false))
	v1.POST("/users/:user_id/inbox/:notification_id/:action", s.inboxCORS, s.inboxAction)
	v1.GET("/inbox/settings", s.getInboxSettings)
	v1.PUT("/inbox/settings", s.audited(AuditInboxSettingsPut, auditFields), s.putInboxSettings)
	v1.POST("/inbox/secret", s.audited(AuditInboxSecretRotate, auditFields), s.rotateInboxSecret)
	v1.GET("/users/:user_id/notifications", s.listUserNotifications)
	v1.GET("/api-keys", s.listAPIKeys)
	v1.POST("/api-keys", s.audited(AuditAPIKeyCreate, auditFields), s.createAPIKey)
	v1.DELETE("/api-keys/:api_key_id", s.audited(AuditAPIKeyRevoke, auditFields), s.revokeAPIKey)
	v1.PUT("/providers/:channel", s.audited(AuditProviderPut, auditFields), s.putProvider)
	v1.GET("/providers", s.listProviders)
	v1.DELETE("/providers/:channel/:provider", s.audited(AuditProviderDelete, auditFields), s.deleteProvider)
	v1.PUT("/users/:user_id/push-tokens", s.audited(AuditPushTokenPut, auditFields), s.putPushToken)
	v1.GET("/users/:user_id/push-tokens", s.listPushTokens)
	v1.DELETE("/users/:user_id/push-tokens/:token", s.audited(AuditPushTokenDelete, auditFields), s.deletePushToken)
	v1.PUT("/templates/:template_id", s.limitCost("tenant-template-save:", s.cfg.CostLimits.TemplateSave, "template saves"), s.audited(AuditTemplatePut, auditFields), s.putTemplate)
	v1.GET("/templates/:template_id", s.getTemplate)
	v1.DELETE("/templates/:template_id", s.audited(AuditTemplateDelete, auditFields), s.deleteTemplate)
	v1.GET("/templates", s.listTemplates)
	v1.POST("/templates/:template_id/preview", s.limitCost("tenant-preview:", s.cfg.CostLimits.Preview, "previews"), s.previewTemplate)
	v1.PUT("/users/:user_id/preferences", s.audited(AuditPreferencesPut, auditFields), s.putUserPreferences)
	v1.GET("/users/:user_id/preferences", s.getUserPreferences)
	v1.PUT("/preferences/defaults", s.audited(AuditPreferenceDefaults, auditFields), s.putPreferenceDefaults)
	v1.GET("/preferences/defaults", s.getPreferenceDefaults)
	v1.POST("/webhook-endpoints", s.audited(AuditWebhookEndpointCreate, auditFields), s.createWebhookEndpoint)
	v1.GET("/webhook-endpoints", s.listWebhookEndpoints)
	v1.GET("/webhook-endpoints/:endpoint_id", s.getWebhookEndpoint)
	v1.PATCH("/webhook-endpoints/:endpoint_id", s.audited(AuditWebhookEndpointUpdate, auditFields), s.updateWebhookEndpoint)
	v1.DELETE("/webhook-endpoints/:endpoint_id", s.audited(AuditWebhookEndpointDelete, auditFields), s.deleteWebhookEndpoint)
	v1.POST("/webhook-endpoints/:endpoint_id/rotate-secret", s.audited(AuditWebhookSecretRotate, auditFields), s.rotateWebhookSecret)
	v1.GET("/webhook-endpoints/:endpoint_id/attempts", s.listWebhookAttempts)
	v1.POST("/webhook-endpoints/:endpoint_id/replay", s.limitCost("tenant-redrive:", s.cfg.CostLimits.Redrive, "replays"),
		s.audited(AuditWebhookReplay, auditFields), s.replayWebhookMessages)
	v1.POST("/webhook-endpoints/:endpoint_id/messages/:message_id/replay", s.limitCost("tenant-redrive:", s.cfg.CostLimits.Redrive, "replays"),
		s.audited(AuditWebhookReplay, auditFields), s.replayWebhookMessage)
	v1.PUT("/settings", s.audited(AuditSettingsPut, auditFields), s.putSettings)
	v1.GET("/settings", s.getSettings)
	v1.GET("/audit-log", s.listAuditLog)
	v1.POST("/campaigns", s.audited(AuditCampaignCreate, auditFields), s.createCampaign)
	v1.GET("/campaigns", s.listCampaigns)
	v1.GET("/campaigns/:campaign_id", s.getCampaign)
	v1.POST("/campaigns/:campaign_id/pause", s.audited(AuditCampaignPause, auditFields), s.controlCampaign(workflows.UpdatePause))
	v1.POST("/campaigns/:campaign_id/resume", s.audited(AuditCampaignResume, auditFields), s.controlCampaign(workflows.UpdateResume))
	v1.POST("/campaigns/:campaign_id/cancel", s.audited(AuditCampaignCancel, auditFields), s.controlCampaign(workflows.UpdateCancelCampaign))
	v1.POST("/lists", s.audited(AuditListCreate, auditUpload), s.createList)
	v1.GET("/lists/:list_id", s.getList)
	v1.DELETE("/lists/:list_id", s.audited(AuditListDelete, auditFields), s.deleteList)
	v1.POST("/topics/:topic/subscribers", s.audited(AuditTopicSubscribe, auditFields), s.addTopicSubscribers)
	v1.GET("/topics/:topic/subscribers", s.listTopicSubscribers)
	v1.DELETE("/topics/:topic/subscribers/:user_id", s.audited(AuditTopicUnsubscribe, auditFields), s.removeTopicSubscriber)
	r.GET(unsubscribe.Path, s.limitPublic("unsubscribe", MaxBodyBytes, false), s.getUnsubscribe)
	r.POST(unsubscribe.Path, s.limitPublic("unsubscribe", MaxBodyBytes, false), s.postUnsubscribe)
	r.POST("/v1/inbox/session", s.limitPublic("inbox-session", MaxBodyBytes, false), s.inboxSession)
	r.GET(InboxComponentPath, serveInboxComponent)
	r.GET(InboxDemoPath, s.serveInboxDemo)
	r.GET("/v1/sandbox/messages", s.sandboxOn, s.authenticate, s.listSandboxMessages)
	op := r.Group("/v1/operator", s.operatorAuth)
	op.GET("/tenants/:tenant_id/limits", s.getTenantLimits)
	op.PUT("/tenants/:tenant_id/limits", s.audited(AuditTenantLimitsPut, auditFields), s.putTenantLimits)
	for _, p := range webhookProviders {
		r.POST(providers.WebhookPrefix+p, s.limitPublic("webhook", s.webhookMaxBody(p), true), s.webhook(p))
	}
	return r
}

// RequestIDHeader is the request id a client or proxy may send; the access log
// carries it.
const RequestIDHeader = "X-Request-Id"

// accessLog writes one structured line per request, after it: method, route (the
// matched pattern, so ids and keys in paths stay out), status, duration, bytes
// written, the request id when one was sent and the tenant once authenticated.
// Never a header value such as Authorization, a query string or a body.
//
// It also records the request's metrics (by route template and status) and
// names the request's trace span after the route template.
func (s *Server) accessLog(c *gin.Context) {
	start := time.Now()
	c.Next()
	ctx := c.Request.Context()
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	status, took := c.Writer.Status(), time.Since(start)
	s.cfg.Metrics.HTTPRequest(c.Request.Method, route, status, took)
	if status == http.StatusTooManyRequests {
		s.cfg.Metrics.RateLimit(route, c.GetString(errorCodeKey))
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetName(c.Request.Method + " " + route)
		span.SetAttributes(attribute.String("http.route", route))
	}
	if !s.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	attrs := make([]slog.Attr, 0, 7)
	attrs = append(attrs,
		slog.String("method", c.Request.Method),
		slog.String("route", route),
		slog.Int("status", status),
		slog.Float64("duration_ms", float64(took.Microseconds())/1000),
		slog.Int("bytes", max(c.Writer.Size(), 0)))
	if id := c.GetHeader(RequestIDHeader); id != "" {
		attrs = append(attrs, slog.String("request_id", truncateID(id)))
	}
	if t, ok := c.Get(tenantKey); ok {
		attrs = append(attrs, slog.String("tenant_id", t.(store.Tenant).ID))
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "http request", attrs...)
}

// truncateID keeps a client-chosen request id from flooding the log.
func truncateID(id string) string {
	const maxLen = 128
	if len(id) > maxLen {
		return id[:maxLen]
	}
	return id
}

func (s *Server) recoverJSON(c *gin.Context) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("panic in handler", "path", c.FullPath(), "panic", p)
			s.abort(c, &Error{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error; the request can be retried"})
		}
	}()
	c.Next()
}

func (s *Server) healthz(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}

// readyz reports whether PostgreSQL and Temporal answer.
func (s *Server) readyz(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 3*time.Second)
	defer cancel()
	checks := gin.H{"postgres": "ok", "temporal": "ok"}
	status := http.StatusOK
	if err := s.store.Ping(ctx); err != nil {
		checks["postgres"] = "unreachable"
		status = http.StatusServiceUnavailable
	}
	if _, err := s.temporal.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		checks["temporal"] = "unreachable"
		status = http.StatusServiceUnavailable
	}
	word := "ready"
	if status != http.StatusOK {
		word = "not_ready"
	}
	c.JSON(status, gin.H{"status": word, "checks": checks})
}
