package api

// The operator API: what only the operator of a Herald deployment decides about a
// tenant — its limits on POST /v1/notifications and whether it may send critical
// notifications (which bypass category opt-outs, caps and quiet hours and share
// the critical lane with every tenant's OTPs and password resets). A tenant's API
// key can read its limits (GET /v1/settings) but never change them: PUT
// /v1/settings answers 403 operator_only for them, and PUT /v1/templates answers
// 403 operator_only for critical: true unless the operator allowed it.
//
// The operator authenticates with HERALD_OPERATOR_KEY (Config.OperatorKey) as a
// Bearer token, compared in constant time. Without a key configured the operator
// routes answer 404, exactly as a route that does not exist. `herald tenant
// limits` sets the same values from the command line, straight in PostgreSQL.

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"regexp"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
)

// operatorAuth lets a request through only with "Authorization: Bearer
// <HERALD_OPERATOR_KEY>". Both sides are hashed before the constant-time compare,
// so neither the key's bytes nor its length leak through timing.
func (s *Server) operatorAuth(c *gin.Context) {
	if s.cfg.OperatorKey == "" {
		s.abort(c, notFound("route"))
		return
	}
	h := c.GetHeader("Authorization")
	scheme, key, ok := strings.Cut(h, " ")
	key = strings.TrimSpace(key)
	if h == "" || !ok || !strings.EqualFold(scheme, "Bearer") || key == "" {
		c.Header("WWW-Authenticate", `Bearer realm="herald"`)
		s.abort(c, &Error{Status: http.StatusUnauthorized, Code: "missing_api_key",
			Message: "send the operator key (HERALD_OPERATOR_KEY) as 'Authorization: Bearer <key>'", Field: "Authorization"})
		return
	}
	got, want := sha256.Sum256([]byte(key)), sha256.Sum256([]byte(s.cfg.OperatorKey))
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		c.Header("WWW-Authenticate", `Bearer realm="herald", error="invalid_token"`)
		s.abort(c, &Error{Status: http.StatusUnauthorized, Code: "invalid_api_key",
			Message: "the operator key is not valid (a tenant's API key is not an operator key)", Field: "Authorization"})
		return
	}
}

// operatorOnly is the 403 for a tenant trying to set what the operator decides.
func operatorOnly(field, message string) *Error {
	return &Error{Status: http.StatusForbidden, Code: "operator_only", Field: field, Message: message}
}

// tenantLimitsView is a tenant's limits as the operator API shows them: the stored
// values (0: the server default) and what applies.
type tenantLimitsView struct {
	TenantID string `json:"tenant_id"`
	store.TenantLimits
	Effective effectiveLimits `json:"effective"`
}

type effectiveLimits struct {
	APIRatePerSecond float64 `json:"api_rate_per_second"`
	APIBurst         int     `json:"api_burst"`
	DailyQuota       int     `json:"daily_quota"`
}

// effective is l over the server defaults, as the limiter applies them (see
// limitsFor).
func (s *Server) effective(l store.TenantLimits) effectiveLimits {
	e := effectiveLimits{APIRatePerSecond: s.cfg.TenantLimits.RatePerSecond, APIBurst: s.cfg.TenantLimits.Burst, DailyQuota: s.cfg.TenantLimits.DailyQuota}
	if l.APIRatePerSecond > 0 {
		e.APIRatePerSecond = l.APIRatePerSecond
	}
	if l.APIBurst > 0 {
		e.APIBurst = l.APIBurst
	}
	if l.DailyQuota > 0 {
		e.DailyQuota = l.DailyQuota
	}
	return e
}

// tenantIDPattern is what `herald tenant create` mints (t_ and 16 hex digits),
// loosely: anything else cannot be a tenant.
var tenantIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func operatorTenantID(c *gin.Context) (string, *Error) {
	id := c.Param("tenant_id")
	if !tenantIDPattern.MatchString(id) {
		return "", badField("tenant_id", "invalid_field", "tenant_id must be a tenant id such as t_0123456789abcdef")
	}
	return id, nil
}

// getTenantLimits: GET /v1/operator/tenants/{tenant_id}/limits.
func (s *Server) getTenantLimits(c *gin.Context) {
	id, verr := operatorTenantID(c)
	if verr != nil {
		s.abort(c, verr)
		return
	}
	s.answerTenantLimits(c, id)
}

// putTenantLimits replaces a tenant's limits (PUT semantics: a field left out is 0,
// the server default, or false). This process's settings cache forgets the tenant
// at once; another API replica picks the change up within its cache's 5 s.
func (s *Server) putTenantLimits(c *gin.Context) {
	id, verr := operatorTenantID(c)
	if verr != nil {
		s.abort(c, verr)
		return
	}
	var req store.TenantLimits
	if err := decodeJSON(c, &req); err != nil {
		s.abort(c, err)
		return
	}
	err := s.store.PutTenantLimits(c.Request.Context(), id, req)
	s.settings.Remove(id)
	var le *store.LimitError
	switch {
	case errors.As(err, &le):
		s.abort(c, badField(le.Field, "invalid_field", "%s", le.Message))
		return
	case errors.Is(err, herald.ErrNotFound):
		s.abort(c, notFound("tenant"))
		return
	case err != nil:
		s.abort(c, err)
		return
	}
	s.answerTenantLimits(c, id)
}

func (s *Server) answerTenantLimits(c *gin.Context, id string) {
	l, err := s.store.GetTenantLimits(c.Request.Context(), id)
	if errors.Is(err, herald.ErrNotFound) {
		s.abort(c, notFound("tenant"))
		return
	}
	if err != nil {
		s.abort(c, err)
		return
	}
	c.JSON(http.StatusOK, tenantLimitsView{TenantID: id, TenantLimits: l, Effective: s.effective(l)})
}

// criticalAllowed reports whether the operator lets the tenant send critical
// notifications, from the settings the accept path's limiter has just read (cached
// a few seconds). The accept path sets a notification's Critical from the template
// AND this: a template saved critical before the operator revoked the right (or
// before migration 0011) is accepted as an ordinary notification. If the settings
// cannot be read the answer is false (logged): the notification is still
// delivered, on the normal lane and under the user's quiet hours and caps.
func (s *Server) criticalAllowed(c *gin.Context, tenantID string) bool {
	ts, ok := s.settings.Get(tenantID)
	if !ok {
		var err error
		if ts, err = s.store.GetTenantSettings(c.Request.Context(), tenantID); err != nil {
			s.log.Warn("reading whether the tenant may send critical notifications failed; accepting as not critical",
				"tenant_id", tenantID, "error", err)
			return false
		}
		s.settings.Add(tenantID, ts)
	}
	return ts.AllowCritical
}
