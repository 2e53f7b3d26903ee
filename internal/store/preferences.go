package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/herald-notify/herald/internal/dbx"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/preferences"
	"github.com/herald-notify/herald/internal/retention"
)

// GetPreferences returns a user's own preferences (not merged with the tenant's
// defaults); a user who never set any has the zero Preferences.
func (s *Store) GetPreferences(ctx context.Context, tenantID, userID string) (preferences.Preferences, error) {
	var raw []byte
	var p preferences.Preferences
	err := s.db.QueryRow(ctx, `SELECT preferences FROM user_preferences WHERE tenant_id = $1 AND user_id = $2`, tenantID, userID).Scan(&raw)
	if err = dbx.NotFound(err); errors.Is(err, herald.ErrNotFound) {
		return p, nil
	} else if err != nil {
		return p, err
	}
	return p, json.Unmarshal(raw, &p)
}

// PutPreferences replaces a user's preferences.
func (s *Store) PutPreferences(ctx context.Context, tenantID, userID string, p preferences.Preferences) error {
	raw, err := json.Marshal(p)
	if err != nil {
		return err
	}
	_, err = s.db.Exec(ctx, `
		INSERT INTO user_preferences (tenant_id, user_id, preferences) VALUES ($1, $2, $3)
		ON CONFLICT (tenant_id, user_id) DO UPDATE SET preferences = EXCLUDED.preferences, updated_at = now()`,
		tenantID, userID, raw)
	return err
}

// SetCategoryEnabled flips one category for a user, keeping the rest of their
// preferences (one-click unsubscribe).
func (s *Store) SetCategoryEnabled(ctx context.Context, tenantID, userID, category string, enabled bool) error {
	return s.InTx(ctx, func(tx *Store) error {
		var one int
		if err := tx.db.QueryRow(ctx, `SELECT 1 FROM users WHERE tenant_id = $1 AND user_id = $2 FOR UPDATE`, tenantID, userID).Scan(&one); err != nil {
			return dbx.NotFound(err)
		}
		p, err := tx.GetPreferences(ctx, tenantID, userID)
		if err != nil {
			return err
		}
		if p.Categories == nil {
			p.Categories = map[string]preferences.CategoryPref{}
		}
		c := p.Categories[category]
		c.Enabled = &enabled
		p.Categories[category] = c
		return tx.PutPreferences(ctx, tenantID, userID, p)
	})
}

// TenantSettings are a tenant's defaults.
type TenantSettings struct {
	PreferenceDefaults preferences.Preferences `json:"preference_defaults"`
	// CategoryCaps: category → at most this many notifications per user per rolling 24 h.
	CategoryCaps  map[string]int `json:"category_caps"`
	DefaultLocale string         `json:"default_locale"`
	// RetryPolicies override the default provider retry policy per channel.
	RetryPolicies map[herald.Channel]herald.RetryPolicy `json:"retry_policies"`
	// OrderingMaxHold bounds an ordered channel's wait for an earlier one (0:
	// the server default; the API keeps it within the operator's bounds).
	OrderingMaxHold time.Duration `json:"ordering_max_hold"`
	// APIRatePerSecond, APIBurst and DailyQuota override the default limits on
	// POST /v1/notifications (0: use the default), and AllowCritical lets the
	// tenant's critical templates be critical. They are the operator's
	// (TenantLimits, table tenant_limits): GetTenantSettings reads them so the
	// accept path has everything in one round trip, PutTenantSettings never writes
	// them (PutTenantLimits does).
	APIRatePerSecond float64 `json:"api_rate_per_second"`
	APIBurst         int     `json:"api_burst"`
	DailyQuota       int     `json:"daily_quota"`
	AllowCritical    bool    `json:"allow_critical"`
	// The operator's caps on campaigns and list uploads (TenantLimits; 0: the
	// server default).
	MaxAudienceSize        int64 `json:"max_audience_size"`
	MaxConcurrentCampaigns int   `json:"max_concurrent_campaigns"`
	MaxListBytes           int64 `json:"max_list_bytes"`
	// Retention is the tenant's own retention settings (zero fields: the
	// operator's; docs/retention.md).
	Retention retention.Tenant `json:"retention"`
}

// Limits are the operator's limits among the settings.
func (ts TenantSettings) Limits() TenantLimits {
	return TenantLimits{APIRatePerSecond: ts.APIRatePerSecond, APIBurst: ts.APIBurst, DailyQuota: ts.DailyQuota, AllowCritical: ts.AllowCritical,
		MaxAudienceSize: ts.MaxAudienceSize, MaxConcurrentCampaigns: ts.MaxConcurrentCampaigns, MaxListBytes: ts.MaxListBytes}
}

// GetTenantSettings returns the tenant's settings (defaults when never set) with
// the operator's limits (see TenantSettings), in one query.
func (s *Store) GetTenantSettings(ctx context.Context, tenantID string) (TenantSettings, error) {
	ts := TenantSettings{DefaultLocale: "en", CategoryCaps: map[string]int{}, RetryPolicies: map[herald.Channel]herald.RetryPolicy{}}
	var prefs, caps, retries, keep []byte
	var locale *string
	var rate *float64
	var burst, quota, concurrent *int
	var audience, listBytes *int64
	var allow *bool
	var holdMs *int64
	err := s.db.QueryRow(ctx, `
		SELECT s.preference_defaults, s.category_caps, s.default_locale, s.retry_policies, s.retention, s.ordering_max_hold_ms,
			l.api_rate_per_second, l.api_burst, l.daily_quota, l.allow_critical,
			l.max_audience_size, l.max_concurrent_campaigns, l.max_list_bytes
		FROM (SELECT $1::text AS id) k
		LEFT JOIN tenant_settings s ON s.tenant_id = k.id
		LEFT JOIN tenant_limits l ON l.tenant_id = k.id`, tenantID).
		Scan(&prefs, &caps, &locale, &retries, &keep, &holdMs, &rate, &burst, &quota, &allow, &audience, &concurrent, &listBytes)
	if err != nil {
		return ts, err
	}
	if rate != nil {
		ts.APIRatePerSecond, ts.APIBurst, ts.DailyQuota, ts.AllowCritical = *rate, *burst, *quota, *allow
		ts.MaxAudienceSize, ts.MaxConcurrentCampaigns, ts.MaxListBytes = *audience, *concurrent, *listBytes
	}
	if locale == nil { // no tenant_settings row: the defaults
		return ts, nil
	}
	ts.DefaultLocale = *locale
	if holdMs != nil {
		ts.OrderingMaxHold = time.Duration(*holdMs) * time.Millisecond
	}
	if err := json.Unmarshal(prefs, &ts.PreferenceDefaults); err != nil {
		return ts, err
	}
	if err := json.Unmarshal(keep, &ts.Retention); err != nil {
		return ts, err
	}
	if err := json.Unmarshal(retries, &ts.RetryPolicies); err != nil {
		return ts, err
	}
	return ts, json.Unmarshal(caps, &ts.CategoryCaps)
}

// PutTenantSettings replaces the tenant's settings (not the operator's limits).
func (s *Store) PutTenantSettings(ctx context.Context, tenantID string, ts TenantSettings) error {
	prefs, err := json.Marshal(ts.PreferenceDefaults)
	if err != nil {
		return err
	}
	if ts.CategoryCaps == nil {
		ts.CategoryCaps = map[string]int{}
	}
	caps, err := json.Marshal(ts.CategoryCaps)
	if err != nil {
		return err
	}
	if ts.DefaultLocale == "" {
		ts.DefaultLocale = "en"
	}
	if ts.RetryPolicies == nil {
		ts.RetryPolicies = map[herald.Channel]herald.RetryPolicy{}
	}
	retries, err := json.Marshal(ts.RetryPolicies)
	if err != nil {
		return err
	}
	keep, err := json.Marshal(ts.Retention)
	if err != nil {
		return err
	}
	var holdMs *int64
	if ts.OrderingMaxHold > 0 {
		ms := max(ts.OrderingMaxHold.Milliseconds(), 1)
		holdMs = &ms
	}
	// The operator's limits in ts are not written: they live in tenant_limits.
	_, err = s.db.Exec(ctx, `
		INSERT INTO tenant_settings (tenant_id, preference_defaults, category_caps, default_locale, retry_policies, retention, ordering_max_hold_ms)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (tenant_id) DO UPDATE SET preference_defaults = EXCLUDED.preference_defaults,
			category_caps = EXCLUDED.category_caps, default_locale = EXCLUDED.default_locale,
			retry_policies = EXCLUDED.retry_policies, retention = EXCLUDED.retention,
			ordering_max_hold_ms = EXCLUDED.ordering_max_hold_ms, updated_at = now()`,
		tenantID, prefs, caps, ts.DefaultLocale, retries, keep, holdMs)
	return err
}

// CapWindow is the rolling window of per-user category caps.
const CapWindow = 24 * time.Hour

// ClaimCapParams is one notification ClaimCap counts against a category cap.
type ClaimCapParams struct {
	TenantID       string
	UserID         string
	Category       string
	NotificationID string
	Limit          int // notifications of Category per CapWindow
	At             time.Time
}

// ClaimCap counts a notification against the user's cap for its category: it is
// allowed while fewer than Limit notifications of that category were claimed in the
// window before At. Claims for one (tenant, user, category) serialize on an advisory
// lock, so concurrent notifications never exceed the cap; a retried claim for the
// same notification returns its first answer.
func (s *Store) ClaimCap(ctx context.Context, p ClaimCapParams) (allowed bool, err error) {
	err = s.InTx(ctx, func(tx *Store) error {
		if _, err := tx.db.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1 || '/' || $2 || '/' || $3, 1))`,
			p.TenantID, p.UserID, p.Category); err != nil {
			return err
		}
		var already bool
		if err := tx.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM cap_ledger WHERE tenant_id = $1 AND notification_id = $2)`,
			p.TenantID, p.NotificationID).Scan(&already); err != nil {
			return err
		}
		if already {
			allowed = true
			return nil
		}
		var used int
		if err := tx.db.QueryRow(ctx, `
			SELECT count(*) FROM cap_ledger
			WHERE tenant_id = $1 AND user_id = $2 AND category = $3 AND claimed_at > $4`,
			p.TenantID, p.UserID, p.Category, p.At.Add(-CapWindow)).Scan(&used); err != nil {
			return err
		}
		if used >= p.Limit {
			allowed = false
			return nil
		}
		allowed = true
		_, err := tx.db.Exec(ctx, `INSERT INTO cap_ledger (tenant_id, user_id, category, notification_id, claimed_at) VALUES ($1, $2, $3, $4, $5)`,
			p.TenantID, p.UserID, p.Category, p.NotificationID, p.At)
		return err
	})
	return allowed, err
}

// UpdateTenantSettings changes the tenant's settings atomically: fn edits them
// under a row lock, so concurrent updates of different parts (preference defaults,
// caps, limits) never lose one another.
func (s *Store) UpdateTenantSettings(ctx context.Context, tenantID string, fn func(*TenantSettings)) error {
	return s.InTx(ctx, func(tx *Store) error {
		if _, err := tx.db.Exec(ctx, `INSERT INTO tenant_settings (tenant_id) VALUES ($1) ON CONFLICT DO NOTHING`, tenantID); err != nil {
			return err
		}
		if _, err := tx.db.Exec(ctx, `SELECT 1 FROM tenant_settings WHERE tenant_id = $1 FOR UPDATE`, tenantID); err != nil {
			return err
		}
		ts, err := tx.GetTenantSettings(ctx, tenantID)
		if err != nil {
			return err
		}
		fn(&ts)
		return tx.PutTenantSettings(ctx, tenantID, ts)
	})
}
