package store

import (
	"context"
	"fmt"
	"math"

	"github.com/herald-notify/herald/internal/dbx"
	"github.com/herald-notify/herald/internal/herald"
)

// TenantLimits are the operator's decisions about one tenant (table tenant_limits):
// its limits on POST /v1/notifications and whether it may send critical
// notifications. Only the operator sets them (`herald tenant limits`, the operator
// API); a tenant's own key can read the limits (GET /v1/settings) but never change
// them. Zero means the server default (HERALD_TENANT_RATE, HERALD_TENANT_BURST,
// HERALD_TENANT_DAILY_QUOTA, HERALD_CAMPAIGN_MAX_AUDIENCE,
// HERALD_CAMPAIGN_MAX_CONCURRENT, HERALD_LIST_MAX_BYTES); AllowCritical is false
// unless granted.
type TenantLimits struct {
	APIRatePerSecond float64 `json:"api_rate_per_second"`
	APIBurst         int     `json:"api_burst"`
	// DailyQuota counts single notifications and every campaign recipient.
	DailyQuota int `json:"daily_quota"`
	// MaxAudienceSize caps one campaign's audience (known users).
	MaxAudienceSize int64 `json:"max_audience_size"`
	// MaxConcurrentCampaigns caps the tenant's campaigns scheduled, running or
	// paused at once.
	MaxConcurrentCampaigns int `json:"max_concurrent_campaigns"`
	// MaxListBytes caps one list upload's body (POST /v1/lists).
	MaxListBytes int64 `json:"max_list_bytes"`
	// AllowCritical lets the tenant's critical templates bypass category opt-outs,
	// caps and quiet hours and run on the critical lane.
	AllowCritical bool `json:"allow_critical"`
}

// Bounds of the operator's limits.
const (
	MaxAPIRatePerSecond = 100_000
	MaxAPIBurst         = 1_000_000
	MaxDailyQuota       = 1_000_000_000
	// MaxAudienceCap, MaxConcurrentCap and MaxListBytesCap bound what the
	// operator may set (a typo of a few zeros is refused, not applied).
	MaxAudienceCap   = 1_000_000_000
	MaxConcurrentCap = 10_000
	MaxListBytesCap  = 64 << 30
)

// LimitError names the limit that is out of range.
type LimitError struct {
	Field   string
	Message string
}

func (e *LimitError) Error() string { return e.Field + ": " + e.Message }

// Validate checks the bounds; the error is a *LimitError naming the field.
func (l TenantLimits) Validate() error {
	if math.IsNaN(l.APIRatePerSecond) || l.APIRatePerSecond < 0 || l.APIRatePerSecond > MaxAPIRatePerSecond {
		return &LimitError{"api_rate_per_second", fmt.Sprintf("api_rate_per_second must be from 0 to %d (0: the server default)", MaxAPIRatePerSecond)}
	}
	if l.APIBurst < 0 || l.APIBurst > MaxAPIBurst {
		return &LimitError{"api_burst", fmt.Sprintf("api_burst must be from 0 to %d (0: the server default)", MaxAPIBurst)}
	}
	if l.DailyQuota < 0 || l.DailyQuota > MaxDailyQuota {
		return &LimitError{"daily_quota", fmt.Sprintf("daily_quota must be from 0 to %d (0: the server default)", MaxDailyQuota)}
	}
	if l.MaxAudienceSize < 0 || l.MaxAudienceSize > MaxAudienceCap {
		return &LimitError{"max_audience_size", fmt.Sprintf("max_audience_size must be from 0 to %d (0: the server default)", MaxAudienceCap)}
	}
	if l.MaxConcurrentCampaigns < 0 || l.MaxConcurrentCampaigns > MaxConcurrentCap {
		return &LimitError{"max_concurrent_campaigns", fmt.Sprintf("max_concurrent_campaigns must be from 0 to %d (0: the server default)", MaxConcurrentCap)}
	}
	if l.MaxListBytes < 0 || l.MaxListBytes > MaxListBytesCap {
		return &LimitError{"max_list_bytes", fmt.Sprintf("max_list_bytes must be from 0 to %d (0: the server default)", int64(MaxListBytesCap))}
	}
	return nil
}

// GetTenantLimits returns the operator's limits of an existing tenant (the zero
// TenantLimits when never set); herald.ErrNotFound when there is no such tenant.
func (s *Store) GetTenantLimits(ctx context.Context, tenantID string) (TenantLimits, error) {
	var rate *float64
	var burst, quota, concurrent *int
	var audience, listBytes *int64
	var allow *bool
	err := s.db.QueryRow(ctx, `
		SELECT l.api_rate_per_second, l.api_burst, l.daily_quota, l.allow_critical,
			l.max_audience_size, l.max_concurrent_campaigns, l.max_list_bytes
		FROM tenants t LEFT JOIN tenant_limits l ON l.tenant_id = t.id WHERE t.id = $1`, tenantID).
		Scan(&rate, &burst, &quota, &allow, &audience, &concurrent, &listBytes)
	if err != nil {
		return TenantLimits{}, dbx.NotFound(err)
	}
	var l TenantLimits
	if rate != nil {
		l = TenantLimits{APIRatePerSecond: *rate, APIBurst: *burst, DailyQuota: *quota, AllowCritical: *allow,
			MaxAudienceSize: *audience, MaxConcurrentCampaigns: *concurrent, MaxListBytes: *listBytes}
	}
	return l, nil
}

// PutTenantLimits replaces the operator's limits of a tenant (after Validate);
// herald.ErrNotFound when there is no such tenant.
func (s *Store) PutTenantLimits(ctx context.Context, tenantID string, l TenantLimits) error {
	if err := l.Validate(); err != nil {
		return err
	}
	tag, err := s.db.Exec(ctx, `
		INSERT INTO tenant_limits (tenant_id, api_rate_per_second, api_burst, daily_quota, allow_critical,
			max_audience_size, max_concurrent_campaigns, max_list_bytes)
		SELECT id, $2, $3, $4, $5, $6, $7, $8 FROM tenants WHERE id = $1
		ON CONFLICT (tenant_id) DO UPDATE SET api_rate_per_second = EXCLUDED.api_rate_per_second,
			api_burst = EXCLUDED.api_burst, daily_quota = EXCLUDED.daily_quota,
			allow_critical = EXCLUDED.allow_critical, max_audience_size = EXCLUDED.max_audience_size,
			max_concurrent_campaigns = EXCLUDED.max_concurrent_campaigns, max_list_bytes = EXCLUDED.max_list_bytes,
			updated_at = now()`,
		tenantID, l.APIRatePerSecond, l.APIBurst, l.DailyQuota, l.AllowCritical, l.MaxAudienceSize, l.MaxConcurrentCampaigns, l.MaxListBytes)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return herald.ErrNotFound
	}
	return nil
}
