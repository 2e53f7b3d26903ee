package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/herald-notify/herald/internal/ratelimit"
	"github.com/herald-notify/herald/internal/store"
)

// TenantLimits are a tenant's limits: on POST /v1/notifications a token bucket
// (RatePerSecond refilled, Burst deep) and a quota per UTC day, which campaign
// recipients count against too; on campaigns the largest audience and how many
// may be unfinished at once; on list uploads the largest body. Zero disables
// one (MaxListBytes zero: DefaultMaxListBytes).
type TenantLimits struct {
	RatePerSecond          float64
	Burst                  int
	DailyQuota             int
	MaxAudienceSize        int64
	MaxConcurrentCampaigns int
	MaxListBytes           int64
}

// over is a tenant's own limits (0: not set) over these, the defaults: the one
// rule both the limiters (limitsFor, campaignsRoom.limitsFor) and the operator
// API (accountRoom.effective) apply.
func (d TenantLimits) over(own store.TenantLimits) TenantLimits {
	if own.APIRatePerSecond > 0 {
		d.RatePerSecond = own.APIRatePerSecond
	}
	if own.APIBurst > 0 {
		d.Burst = own.APIBurst
	}
	if own.DailyQuota > 0 {
		d.DailyQuota = own.DailyQuota
	}
	if own.MaxAudienceSize > 0 {
		d.MaxAudienceSize = own.MaxAudienceSize
	}
	if own.MaxConcurrentCampaigns > 0 {
		d.MaxConcurrentCampaigns = own.MaxConcurrentCampaigns
	}
	if own.MaxListBytes > 0 {
		d.MaxListBytes = own.MaxListBytes
	}
	if d.MaxListBytes <= 0 {
		d.MaxListBytes = DefaultMaxListBytes
	}
	return d
}

// limitsFor is the tenant's own limits where set, else the defaults. Settings are
// cached briefly per process; the buckets themselves live in PostgreSQL, so the
// limits hold across every API replica.
func (m *middleware) limitsFor(c *gin.Context, tenantID string) (TenantLimits, error) {
	ts, err := m.settings.get(c.Request.Context(), tenantID)
	if err != nil {
		return m.limits.Tenant, err
	}
	return m.limits.Tenant.over(ts.Limits()), nil
}

// limitTenant answers 429 with Retry-After when the tenant exceeds its rate or its
// daily quota.
func (m *middleware) limitTenant(c *gin.Context) {
	if m.limits.Limiter == nil {
		return
	}
	tenantID := tenantOf(c).ID
	l, err := m.limitsFor(c, tenantID)
	if err != nil {
		m.abort(c, err)
		return
	}
	ctx := c.Request.Context()
	if l.RatePerSecond > 0 && !m.takeToken(c, "tenant:"+tenantID, Bucket{RatePerSecond: l.RatePerSecond, Burst: l.Burst}, "notifications") {
		return
	}
	if l.DailyQuota > 0 {
		now := time.Now().UTC()
		ok, used, resetAt, err := m.leases.Quota(ctx, ratelimit.TenantDayQuotaKey(tenantID), l.DailyQuota, now)
		if err != nil {
			m.abort(c, err)
			return
		}
		if !ok {
			c.Header("Retry-After", strconv.Itoa(ratelimit.RetryAfterSeconds(resetAt.Sub(now))))
			m.abort(c, &httpError{Status: http.StatusTooManyRequests, Code: "daily_quota_exceeded",
				Message: fmt.Sprintf("the daily quota of %d notifications is used up (%d counted today); it resets at %s", l.DailyQuota, used, resetAt.Format(time.RFC3339))})
			return
		}
	}
}

// Bucket is a token bucket: RatePerSecond tokens a second, Burst deep (at least
// one). A zero RatePerSecond limits nothing.
type Bucket struct {
	RatePerSecond float64
	Burst         int
}

// CostLimits are the per-tenant token buckets of the endpoints that cost work
// besides POST /v1/notifications: each renders or validates a template, or starts
// workflows. The operator sets them for every tenant (HERALD_PREVIEW_RATE, ...;
// see internal/config). Each endpoint has a bucket of its own per tenant, so an
// editor previewing a template never eats the tenant's notification rate.
type CostLimits struct {
	// Preview: POST /v1/templates/{id}/preview (renders every channel).
	Preview Bucket
	// TemplateSave: PUT /v1/templates/{id} (parses and validates every source, and
	// stores a version that is kept for ever).
	TemplateSave Bucket
	// Redrive: POST /v1/dead-letters/{id}/redrive (starts a workflow).
	Redrive Bucket
	// BulkRedrive: POST /v1/dead-letters/redrive (up to maxBulkRedrive workflows
	// per request).
	BulkRedrive Bucket
	// UserImport: POST /v1/users/import (spools up to the tenant's
	// MaxListBytes, then writes it in one transaction).
	UserImport Bucket
	// CampaignCreate: POST /v1/campaigns (counts the audience, checks the
	// template, starts a workflow that may send to millions).
	CampaignCreate Bucket
	// ListUpload: POST /v1/lists (spools up to the tenant's MaxListBytes to disk,
	// then COPYs it into PostgreSQL).
	ListUpload Bucket
}

// limitCost is the middleware of one costly endpoint: a token from the tenant's
// bucket key+tenant, or 429 rate_limited with Retry-After, before the handler
// reads anything (a refused request costs one bucket update). what names the
// requests in the message ("previews").
func (m *middleware) limitCost(key string, b Bucket, what string) gin.HandlerFunc {
	return func(c *gin.Context) {
		if m.limits.Limiter == nil || !(b.RatePerSecond > 0) {
			return
		}
		m.takeToken(c, key+tenantOf(c).ID, b, what)
	}
}

// takeToken takes a token from bucket key in PostgreSQL (so the limit holds
// across API replicas), through this process's lease of the bucket
// (ratelimit.Leases: one round trip per many requests on a busy bucket). When the
// bucket is empty it answers 429 rate_limited with Retry-After (whole seconds
// until this process asks the bucket again) and reports false; on a database
// error it answers that and reports false too. POST /v1/notifications and every
// costly endpoint are limited through here.
func (m *middleware) takeToken(c *gin.Context, key string, b Bucket, what string) bool {
	ok, retry, err := m.leases.Take(c.Request.Context(), key, b.RatePerSecond, max(1, b.Burst))
	if err != nil {
		m.abort(c, err)
		return false
	}
	if !ok {
		c.Header("Retry-After", strconv.Itoa(ratelimit.RetryAfterSeconds(retry)))
		m.abort(c, &httpError{Status: http.StatusTooManyRequests, Code: "rate_limited",
			Message: fmt.Sprintf("more than %g %s per second; retry after the Retry-After seconds", b.RatePerSecond, what)})
		return false
	}
	return true
}

// settingsCache holds the tenants' settings for a few seconds: the accept
// path's limits, default locale and right to send critical notifications.
type settingsCache struct {
	store *store.Store
	cache *expirable.LRU[string, store.TenantSettings]
}

func newSettingsCache(st *store.Store) *settingsCache {
	return &settingsCache{store: st, cache: expirable.NewLRU[string, store.TenantSettings](10_000, nil, 5*time.Second)}
}

// get is the tenant's settings, cached briefly per process.
func (sc *settingsCache) get(ctx context.Context, tenantID string) (store.TenantSettings, error) {
	if cached, ok := sc.cache.Get(tenantID); ok {
		return cached, nil
	}
	ts, err := sc.store.GetTenantSettings(ctx, tenantID)
	if err != nil {
		return ts, err
	}
	sc.cache.Add(tenantID, ts)
	return ts, nil
}

// forget drops the tenant's cached settings (the operator changed its limits).
func (sc *settingsCache) forget(tenantID string) { sc.cache.Remove(tenantID) }

// criticalAllowed reports whether the operator lets the tenant send critical
// notifications, from the settings the accept path's limiter has just read (cached
// a few seconds). The accept path sets a notification's Critical from the template
// AND this: a template saved critical before the operator revoked the right (or
// before migration 0011) is accepted as an ordinary notification. If the settings
// cannot be read the answer is false (logged): the notification is still
// delivered, on the normal lane and under the user's quiet hours and caps.
func (sc *settingsCache) criticalAllowed(ctx context.Context, log *slog.Logger, tenantID string) bool {
	ts, ok := sc.cache.Get(tenantID)
	if !ok {
		var err error
		if ts, err = sc.store.GetTenantSettings(ctx, tenantID); err != nil {
			log.Warn("reading whether the tenant may send critical notifications failed; accepting as not critical",
				"tenant_id", tenantID, "error", err)
			return false
		}
		sc.cache.Add(tenantID, ts)
	}
	return ts.AllowCritical
}
