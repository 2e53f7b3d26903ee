// Package api is Herald's REST API (gin). It authenticates the tenant from the API
// key, validates input, and turns POST /v1/notifications into a workflow start: the
// start is both the durable acceptance and the Layer-1 dedup check.
//
// The handlers live in rooms, one per resource, each holding only what it needs
// and registering its own routes: notificationsRoom (accept, status, cancel,
// dead letters, support view), campaignsRoom (campaigns, lists, topics),
// inboxRoom (inbox, stream, user tokens, inbox settings), usersRoom (users,
// preferences, unsubscribe), templatesRoom, providersRoom (providers, push
// tokens, receipt webhooks, sandbox), webhookEndpointsRoom and accountRoom (API
// keys, audit log, settings, operator). They share the middleware
// (middleware.go) and the caches of users, templates and settings; Temporal is
// reached only through workflows.Client.
package api

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/internal/inboxlive"
	"github.com/herald-notify/herald/internal/metrics"
	"github.com/herald-notify/herald/internal/ratelimit"
	"github.com/herald-notify/herald/internal/retention"
	"github.com/herald-notify/herald/internal/secrets"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/unsubscribe"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/workflows"
)

// Config is what the API needs besides its dependencies, grouped by the rooms
// that use it.
type Config struct {
	// NoDueSequence: the accept path does not number notifications in their
	// users' due sequences (app.Options.NoDueSequence, the bench's floor).
	NoDueSequence bool
	// DefaultDedupWindow is a notification's dedup window when the request
	// names none.
	DefaultDedupWindow time.Duration
	// AuthCacheTTL bounds how long a revoked key or a deleted user can still be
	// honoured by one API process; 0 disables the caches.
	AuthCacheTTL time.Duration
	// PublicBaseURL is how providers and browsers reach this API (Twilio signs
	// the full URL; the inbox demo page is served from it).
	PublicBaseURL string
	// TemporalNamespace is the namespace Herald's workflows run in (a user's
	// erasure deletes the user's closed runs there; "": "default").
	TemporalNamespace string
	// OperatorKey (HERALD_OPERATOR_KEY) opens the operator API
	// (/v1/operator/...); "" turns it off (404).
	OperatorKey string
	// Metrics records requests and submissions; nil records nothing. The API
	// port serves it at GET /metrics only to "Authorization: Bearer
	// <MetricsToken>" (HERALD_METRICS_TOKEN); with no token it serves none
	// there (404): the process's metrics listener (HERALD_METRICS_ADDR,
	// loopback by default) serves them instead.
	Metrics      *metrics.Metrics
	MetricsToken string
	// Unsubscribe verifies one-click unsubscribe links (the worker signs them).
	Unsubscribe *unsubscribe.Signer

	Limits    LimitConfig
	Users     UserConfig
	Providers ProviderConfig
	Inbox     InboxConfig
	Webhooks  WebhookConfig
	Campaigns CampaignConfig
	// Retention is the operator's retention policy (HERALD_RETENTION_*): each
	// tenant's default and the longest it may set (PUT /v1/settings
	// "retention"); the zero Policy is retention.Defaults.
	Retention retention.Policy
	Ordering  OrderingConfig
}

// LimitConfig are the API's rate limits and quotas.
type LimitConfig struct {
	// Limiter and Tenant limit POST /v1/notifications per tenant; a nil Limiter
	// limits nothing. Tenant are the defaults; the operator sets a tenant's own
	// (store.TenantLimits).
	Limiter *ratelimit.Limiter
	Tenant  TenantLimits
	// LeaseWindow sizes the token leases this process takes from the limiter's
	// buckets (ratelimit.Leases; 0: ratelimit.DefaultLeaseWindow).
	LeaseWindow time.Duration
	// Public limit the endpoints without an API key (zero: the defaults).
	Public PublicLimits
	// AuthFailures limits, per source address, the API keys looked up in
	// PostgreSQL that turn out not to exist (zero: DefaultAuthFailures;
	// PerSecond < 0: off). A key refused once is remembered and costs no more
	// lookups; over the bucket, every uncached key is 429 before any lookup.
	AuthFailures Rate
	// Cost limit the other endpoints that cost work, per tenant (zero buckets:
	// none).
	Cost CostLimits
}

// UserConfig bounds the user endpoints.
type UserConfig struct {
	// PushTokensPerUser is how many device tokens a user keeps (0:
	// providers.DefaultPushTokensPerUser), through PUT
	// /v1/users/{id}/push-tokens and imports alike.
	PushTokensPerUser int
}

// ProviderConfig is what the provider endpoints need.
type ProviderConfig struct {
	// Store stores provider configs, push tokens and receipts.
	Store *providers.Store
	// Registry is every provider a tenant can configure (providers/registry.New()):
	// it validates configs and receives the providers' webhooks.
	Registry *providers.Registry
	// WebhookTolerance bounds the age of a signed SendGrid webhook timestamp.
	WebhookTolerance time.Duration
	// Sandbox, when set, serves GET /v1/sandbox/messages from this recorder (dev only).
	Sandbox providers.SandboxRecorder
}

// InboxConfig is what the inbox endpoints and user tokens need.
type InboxConfig struct {
	// UserTokenKey signs and verifies user tokens (empty: user tokens off);
	// Secrets seals the tenants' inbox HMAC secrets (nil: off). See
	// user_tokens.go.
	UserTokenKey []byte
	Secrets      *secrets.Keyring
	// Hub wakes the inbox streams of this process (nil: streams off);
	// Heartbeat is the streams' heartbeat (0: DefaultInboxHeartbeat).
	Hub       *inboxlive.Hub
	Heartbeat time.Duration
	// ActionRate limits each user's inbox actions (item actions and
	// mark-alls; each may append an event every stream of the user reads):
	// zero is DefaultInboxActions, PerSecond < 0 none.
	ActionRate Rate
}

// CampaignConfig sizes every campaign's batches (0: the workflow's defaults).
type CampaignConfig struct {
	PageSize int
	Window   int
	// InDoubtWait: see contract.CampaignSpec.InDoubtWait.
	InDoubtWait time.Duration
}

// room is one resource's handlers: it holds only what they need and registers
// their routes, tenant ones under /v1 (authenticated) and public ones at the
// root.
type room interface {
	register(v1, public gin.IRouter, mw *middleware)
}

// Server is the API: its rooms and the middleware they share.
type Server struct {
	store     *store.Store
	workflows *workflows.Client
	mw        *middleware
	inbox     *inboxRoom
	rooms     []room
	// metricsToken opens GET /metrics on the API port ("": not served there).
	metricsToken string
}

// CloseStreams ends every open inbox stream (their clients reconnect, with
// Last-Event-ID, to another replica): http.Server.Shutdown waits for requests
// to finish, and a stream never would. Register it with RegisterOnShutdown.
func (s *Server) CloseStreams() { s.inbox.closeStreams() }

// New builds the API server.
func New(st *store.Store, wf *workflows.Client, cfg Config, log *slog.Logger) *Server {
	r := responder{log: log}
	auth := newAuthenticator(r, st, cfg.Metrics, cfg.AuthCacheTTL, cfg.Inbox.UserTokenKey, cfg.Limits.AuthFailures)
	settings := newSettingsCache(st)
	users := newUserDirectory(r, st, cfg.AuthCacheTTL)
	templates := newTemplateCache(st)
	flowDefs := newFlowCache(st)
	engine := engineFlows{workflows: wf, store: st, signals: newDigestSignals(wf.SignalDigestEvent)}
	mw := newMiddleware(r, st, auth, settings, cfg)
	inbox := newInboxRoom(r, st, users, auth, cfg.Inbox, cfg.PublicBaseURL)
	inbox.workflows = wf
	campaigns := newCampaignsRoom(r, st, wf, templates, settings, cfg)
	return &Server{store: st, workflows: wf, mw: mw, inbox: inbox, metricsToken: cfg.MetricsToken, rooms: []room{
		&notificationsRoom{responder: r, store: st, workflows: wf, users: users, templates: templates, settings: settings,
			flows: flowDefs, engine: engine, defaultDedupWindow: cfg.DefaultDedupWindow, metrics: cfg.Metrics,
			numberDue: !cfg.NoDueSequence, retention: cfg.Retention, ordering: cfg.Ordering},
		campaigns,
		inbox,
		&usersRoom{responder: r, store: st, users: users, unsubscribe: cfg.Unsubscribe,
			limitsFor: campaigns.limitsFor, uploads: &campaigns.uploads, pushTokensPerUser: cfg.Users.PushTokensPerUser,
			baseURL: cfg.PublicBaseURL, inboxCORS: inbox.inboxCORS},
		&templatesRoom{responder: r, store: st, templates: templates},
		&flowsRoom{responder: r, store: st, flows: flowDefs, users: users, engine: engine},
		&providersRoom{responder: r, store: st, users: users, cfg: cfg.Providers, baseURL: cfg.PublicBaseURL,
			pushTokensPerUser: cfg.Users.PushTokensPerUser,
			emitter:           cfg.Webhooks.Emitter},
		&webhookEndpointsRoom{responder: r, store: st, cfg: cfg.Webhooks},
		&suppressionsRoom{responder: r, store: st},
		&accountRoom{responder: r, store: st, auth: auth, settings: settings, defaults: cfg.Limits.Tenant, retention: operatorRetention(cfg.Retention),
			ordering: cfg.Ordering},
		newErasureRoom(r, st, users, store.ErasureKeyFrom(cfg.Inbox.UserTokenKey), wf, cfg.TemporalNamespace),
	}}
}

// Handler returns the HTTP routes.
func (s *Server) Handler() http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.HandleMethodNotAllowed = true
	mw := s.mw
	r.Use(mw.accessLog, mw.recoverJSON, preflight)
	r.NoRoute(func(c *gin.Context) { mw.abort(c, notFound("route")) })
	r.NoMethod(func(c *gin.Context) {
		mw.abort(c, &httpError{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed", Message: c.Request.Method + " is not allowed here"})
	})

	r.GET("/healthz", s.healthz)
	r.GET("/readyz", s.readyz)
	r.GET("/openapi.yaml", serveOpenAPI)
	r.GET("/metrics", s.metricsOnAPIPort())

	v1 := r.Group("/v1", mw.authenticate)
	for _, rm := range s.rooms {
		rm.register(v1, r, mw)
	}
	return r
}

// metricsOnAPIPort serves GET /metrics to the metrics token only, and answers
// 404 (as for any unknown path) when there is none.
func (s *Server) metricsOnAPIPort() gin.HandlerFunc {
	if s.metricsToken == "" {
		return func(c *gin.Context) { s.mw.abort(c, notFound("route")) }
	}
	auth, serve := s.mw.bearer(s.metricsToken, "HERALD_METRICS_TOKEN"), gin.WrapH(s.mw.metrics.Handler())
	return func(c *gin.Context) {
		if auth(c); !c.IsAborted() {
			serve(c)
		}
	}
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
	if err := s.workflows.CheckHealth(ctx); err != nil {
		checks["temporal"] = "unreachable"
		status = http.StatusServiceUnavailable
	}
	word := "ready"
	if status != http.StatusOK {
		word = "not_ready"
	}
	c.JSON(status, gin.H{"status": word, "checks": checks})
}
