package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/herald-notify/herald/internal/metrics"
	"github.com/herald-notify/herald/internal/ratelimit"
	"github.com/herald-notify/herald/internal/store"
)

// middleware is what every room's routes share: the access log, panic
// recovery, authentication (authenticate, operatorAuth), the audit log
// (audited) and the rate limits (limitTenant, limitCost, limitPublic). Rooms
// get it in register and put its handlers in front of their own.
type middleware struct {
	responder
	store   *store.Store
	metrics *metrics.Metrics
	auth    *authenticator
	// settings are the tenants' settings, for their own API limits.
	settings *settingsCache
	limits   LimitConfig
	// public holds the buckets of LimitConfig.Public.
	public *publicLimiter
	// leases hands out LimitConfig.Limiter's bucket tokens in leases (nil
	// without a Limiter).
	leases      *ratelimit.Leases
	operatorKey string
}

func newMiddleware(r responder, st *store.Store, auth *authenticator, settings *settingsCache, cfg Config) *middleware {
	m := &middleware{responder: r, store: st, metrics: cfg.Metrics, auth: auth, settings: settings, limits: cfg.Limits,
		public: newPublicLimiter(cfg.Limits.Public), operatorKey: cfg.OperatorKey}
	if cfg.Limits.Limiter != nil {
		m.leases = ratelimit.NewLeases(cfg.Limits.Limiter, cfg.Limits.LeaseWindow, 0)
	}
	return m
}

// authenticate resolves the request's API key or user token to its tenant
// (authenticator.authenticate).
func (m *middleware) authenticate(c *gin.Context) { m.auth.authenticate(c) }

// requestIDHeader is the request id a client or proxy may send; the access log
// carries it.
const requestIDHeader = "X-Request-Id"

// accessLog writes one structured line per request, after it: method, route (the
// matched pattern, so ids and keys in paths stay out), status, duration, bytes
// written, the request id when one was sent and the tenant once authenticated.
// Never a header value such as Authorization, a query string or a body.
//
// It also records the request's metrics (by route template and status) and
// names the request's trace span after the route template.
func (m *middleware) accessLog(c *gin.Context) {
	start := time.Now()
	c.Next()
	ctx := c.Request.Context()
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	status, took := c.Writer.Status(), time.Since(start)
	m.metrics.HTTPRequest(c.Request.Method, route, status, took)
	if status == http.StatusTooManyRequests {
		m.metrics.RateLimit(route, c.GetString(errorCodeKey))
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetName(c.Request.Method + " " + route)
		span.SetAttributes(attribute.String("http.route", route))
	}
	if !m.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	attrs := make([]slog.Attr, 0, 7)
	attrs = append(attrs,
		slog.String("method", c.Request.Method),
		slog.String("route", route),
		slog.Int("status", status),
		slog.Float64("duration_ms", float64(took.Microseconds())/1000),
		slog.Int("bytes", max(c.Writer.Size(), 0)))
	if id := c.GetHeader(requestIDHeader); id != "" {
		attrs = append(attrs, slog.String("request_id", truncateID(id)))
	}
	if t, ok := c.Get(tenantKey); ok {
		attrs = append(attrs, slog.String("tenant_id", t.(store.Tenant).ID))
	}
	m.log.LogAttrs(ctx, slog.LevelInfo, "http request", attrs...)
}

// truncateID keeps a client-chosen request id from flooding the log.
func truncateID(id string) string {
	const maxLen = 128
	if len(id) > maxLen {
		return id[:maxLen]
	}
	return id
}

func (m *middleware) recoverJSON(c *gin.Context) {
	defer func() {
		if p := recover(); p != nil {
			m.log.Error("panic in handler", "path", c.FullPath(), "panic", p)
			m.abort(c, &httpError{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error; the request can be retried"})
		}
	}()
	c.Next()
}

// operatorAuth lets a request through only with "Authorization: Bearer
// <HERALD_OPERATOR_KEY>" (bearer).
func (m *middleware) operatorAuth(c *gin.Context) {
	if m.operatorKey == "" {
		m.abort(c, notFound("route"))
		return
	}
	m.bearer(m.operatorKey, "HERALD_OPERATOR_KEY")(c)
}

// bearer lets a request through only with "Authorization: Bearer <secret>"
// (the operator key, the metrics token; variable names it in the messages).
// Both sides are hashed before the constant-time compare, so neither the
// secret's bytes nor its length leak through timing.
func (m *middleware) bearer(secret, variable string) gin.HandlerFunc {
	want := sha256.Sum256([]byte(secret))
	return func(c *gin.Context) {
		h := c.GetHeader("Authorization")
		scheme, key, ok := strings.Cut(h, " ")
		key = strings.TrimSpace(key)
		if h == "" || !ok || !strings.EqualFold(scheme, "Bearer") || key == "" {
			c.Header("WWW-Authenticate", `Bearer realm="herald"`)
			m.abort(c, &httpError{Status: http.StatusUnauthorized, Code: "missing_api_key",
				Message: "send " + variable + " as 'Authorization: Bearer <key>'", Field: "Authorization"})
			return
		}
		got := sha256.Sum256([]byte(key))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			c.Header("WWW-Authenticate", `Bearer realm="herald", error="invalid_token"`)
			m.abort(c, &httpError{Status: http.StatusUnauthorized, Code: "invalid_api_key",
				Message: "the key is not " + variable + " (a tenant's API key is not one)", Field: "Authorization"})
			return
		}
	}
}
