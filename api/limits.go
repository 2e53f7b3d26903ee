package api

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/internal/ratelimit"
	"github.com/herald-notify/herald/internal/store"
)

// TenantLimits are limits on POST /v1/notifications per tenant: a token bucket
// (RatePerSecond refilled, Burst deep) and a quota per UTC day. Zero disables one.
type TenantLimits struct {
	RatePerSecond float64
	Burst         int
	DailyQuota    int
}

// limitsFor is the tenant's own limits where set, else the defaults. Settings are
// cached briefly per process; the buckets themselves live in PostgreSQL, so the
// limits hold across every API replica.
func (s *Server) limitsFor(c *gin.Context, tenantID string) (TenantLimits, error) {
	l := s.cfg.TenantLimits
	ts, err := s.cachedSettings(c, tenantID)
	if err != nil {
		return l, err
	}
	if ts.APIRatePerSecond > 0 {
		l.RatePerSecond = ts.APIRatePerSecond
	}
	if ts.APIBurst > 0 {
		l.Burst = ts.APIBurst
	}
	if ts.DailyQuota > 0 {
		l.DailyQuota = ts.DailyQuota
	}
	return l, nil
}

// cachedSettings are the tenant's settings, cached briefly per process (the
// accept path's limits and default locale).
func (s *Server) cachedSettings(c *gin.Context, tenantID string) (store.TenantSettings, error) {
	if cached, ok := s.settings.Get(tenantID); ok {
		return cached, nil
	}
	ts, err := s.store.GetTenantSettings(c.Request.Context(), tenantID)
	if err != nil {
		return ts, err
	}
	s.settings.Add(tenantID, ts)
	return ts, nil
}

// limitTenant answers 429 with Retry-After when the tenant exceeds its rate or its
// daily quota.
func (s *Server) limitTenant(c *gin.Context) {
	if s.cfg.Limiter == nil {
		return
	}
	tenantID := tenantOf(c).ID
	l, err := s.limitsFor(c, tenantID)
	if err != nil {
		s.abort(c, err)
		return
	}
	ctx := c.Request.Context()
	if l.RatePerSecond > 0 {
		ok, retry, err := s.cfg.Limiter.Take(ctx, "tenant:"+tenantID, l.RatePerSecond, max(1, l.Burst))
		if err != nil {
			s.abort(c, err)
			return
		}
		if !ok {
			c.Header("Retry-After", strconv.Itoa(ratelimit.RetryAfterSeconds(retry)))
			s.abort(c, &Error{Status: http.StatusTooManyRequests, Code: "rate_limited",
				Message: fmt.Sprintf("more than %g notifications per second; retry after the Retry-After seconds", l.RatePerSecond)})
			return
		}
	}
	if l.DailyQuota > 0 {
		now := time.Now().UTC()
		ok, used, resetAt, err := s.cfg.Limiter.Quota(ctx, "tenant-day:"+tenantID, l.DailyQuota, now)
		if err != nil {
			s.abort(c, err)
			return
		}
		if !ok {
			c.Header("Retry-After", strconv.Itoa(ratelimit.RetryAfterSeconds(resetAt.Sub(now))))
			s.abort(c, &Error{Status: http.StatusTooManyRequests, Code: "daily_quota_exceeded",
				Message: fmt.Sprintf("the daily quota of %d notifications is used up (%d sent); it resets at %s", l.DailyQuota, used, resetAt.Format(time.RFC3339))})
			return
		}
	}
}
