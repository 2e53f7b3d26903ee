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
	"errors"
	"net/http"
	"regexp"

	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
)

// operatorOnly is the 403 for a tenant trying to set what the operator decides.
func operatorOnly(field, message string) *httpError {
	return &httpError{Status: http.StatusForbidden, Code: "operator_only", Field: field, Message: message}
}

// tenantLimitsView is a tenant's limits as the operator API shows them: the stored
// values (0: the server default) and what applies.
type tenantLimitsView struct {
	TenantID string `json:"tenant_id"`
	store.TenantLimits
	Effective effectiveLimits `json:"effective"`
}

type effectiveLimits struct {
	APIRatePerSecond       float64 `json:"api_rate_per_second"`
	APIBurst               int     `json:"api_burst"`
	DailyQuota             int     `json:"daily_quota"`
	MaxAudienceSize        int64   `json:"max_audience_size"`
	MaxConcurrentCampaigns int     `json:"max_concurrent_campaigns"`
	MaxListBytes           int64   `json:"max_list_bytes"`
}

// effective is l over the server defaults, as the limiters apply them
// (TenantLimits.over, as in limitsFor).
func (h *accountRoom) effective(l store.TenantLimits) effectiveLimits {
	e := h.defaults.over(l)
	return effectiveLimits{APIRatePerSecond: e.RatePerSecond, APIBurst: e.Burst, DailyQuota: e.DailyQuota,
		MaxAudienceSize: e.MaxAudienceSize, MaxConcurrentCampaigns: e.MaxConcurrentCampaigns, MaxListBytes: e.MaxListBytes}
}

// tenantIDPattern is what `herald tenant create` mints (t_ and 16 hex digits),
// loosely: anything else cannot be a tenant.
var tenantIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func operatorTenantID(c *gin.Context) (string, *httpError) {
	id := c.Param("tenant_id")
	if !tenantIDPattern.MatchString(id) {
		return "", badField("tenant_id", "invalid_field", "tenant_id must be a tenant id such as t_0123456789abcdef")
	}
	return id, nil
}

// getTenantLimits: GET /v1/operator/tenants/{tenant_id}/limits.
func (h *accountRoom) getTenantLimits(c *gin.Context) {
	id, verr := operatorTenantID(c)
	if verr != nil {
		h.abort(c, verr)
		return
	}
	h.answerTenantLimits(c, id)
}

// putTenantLimits replaces a tenant's limits (PUT semantics: a field left out is 0,
// the server default, or false). This process's settings cache forgets the tenant
// at once; another API replica picks the change up within its cache's 5 s.
func (h *accountRoom) putTenantLimits(c *gin.Context) {
	id, verr := operatorTenantID(c)
	if verr != nil {
		h.abort(c, verr)
		return
	}
	var req store.TenantLimits
	if err := decodeJSON(c, &req); err != nil {
		h.abort(c, err)
		return
	}
	err := h.store.PutTenantLimits(c.Request.Context(), id, req)
	h.settings.forget(id)
	var le *store.LimitError
	switch {
	case errors.As(err, &le):
		h.abort(c, badField(le.Field, "invalid_field", "%s", le.Message))
		return
	case errors.Is(err, herald.ErrNotFound):
		h.abort(c, notFound("tenant"))
		return
	case err != nil:
		h.abort(c, err)
		return
	}
	h.answerTenantLimits(c, id)
}

func (h *accountRoom) answerTenantLimits(c *gin.Context, id string) {
	l, err := h.store.GetTenantLimits(c.Request.Context(), id)
	if errors.Is(err, herald.ErrNotFound) {
		h.abort(c, notFound("tenant"))
		return
	}
	if err != nil {
		h.abort(c, err)
		return
	}
	c.JSON(http.StatusOK, tenantLimitsView{TenantID: id, TenantLimits: l, Effective: h.effective(l)})
}
