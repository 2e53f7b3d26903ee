package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/preferences"
	"github.com/herald-notify/herald/internal/retention"
	"github.com/herald-notify/herald/internal/store"
	"golang.org/x/text/language"
)

// settingsView is the tenant's caps and default locale.
type putSettingsRequest struct {
	// CategoryCaps values are checked one by one (see caps), so an error names
	// the category: encoding/json would only name category_caps.
	CategoryCaps  map[string]any `json:"category_caps"`
	DefaultLocale *string        `json:"default_locale"`
	// RetryPolicies override the provider retry policy per channel (email, sms, push).
	RetryPolicies map[string]retryPolicyRequest `json:"retry_policies"`
	// OrderingMaxHold bounds how long an ordered channel waits for an earlier
	// one (a Go duration within the operator's bounds; absent: the default).
	OrderingMaxHold *string `json:"ordering_max_hold"`
	// The API limits and allow_critical are the operator's (store.TenantLimits):
	// see operatorOnlyFields.
	APIRatePerSecond *float64 `json:"api_rate_per_second"`
	APIBurst         *int     `json:"api_burst"`
	DailyQuota       *int     `json:"daily_quota"`
	AllowCritical    *bool    `json:"allow_critical"`
	// Retention shortens what the tenant's rows are kept for (retentionView's
	// fields; omitted: the operator's). Values are read one by one (see
	// retention), so an error names the field.
	Retention map[string]any `json:"retention"`
	// RetentionMax is the operator's (read-only): accepted as GET returned it.
	RetentionMax map[string]any `json:"retention_max"`
}

// operatorOnlyFields refuses (403 operator_only, naming the field) an attempt to
// change what the operator decides: the API limits and allow_critical. A limit
// sent with the value it already has is accepted and changes nothing, so a client
// may PUT back the document GET /v1/settings returned; allow_critical is not in
// that document and is always refused.
func (r putSettingsRequest) operatorOnlyFields(cur store.TenantSettings) *httpError {
	const how = "; the operator sets it (herald tenant limits, or the operator API)"
	switch {
	case r.APIRatePerSecond != nil && *r.APIRatePerSecond != cur.APIRatePerSecond:
		return operatorOnly("api_rate_per_second", "a tenant cannot change its own api_rate_per_second"+how)
	case r.APIBurst != nil && *r.APIBurst != cur.APIBurst:
		return operatorOnly("api_burst", "a tenant cannot change its own api_burst"+how)
	case r.DailyQuota != nil && *r.DailyQuota != cur.DailyQuota:
		return operatorOnly("daily_quota", "a tenant cannot change its own daily_quota"+how)
	case r.AllowCritical != nil:
		return operatorOnly("allow_critical", "a tenant cannot allow itself critical notifications"+how)
	}
	return nil
}

type retryPolicyRequest struct {
	InitialInterval    *string  `json:"initial_interval"`
	BackoffCoefficient *float64 `json:"backoff_coefficient"`
	MaximumInterval    *string  `json:"maximum_interval"`
	MaximumAttempts    *int     `json:"maximum_attempts"`
	Expiration         *string  `json:"expiration"`
}

// retries validates the retry overrides: provider channels only, positive
// durations (Go syntax: "500ms", "2m"), coefficient ≥ 1, attempts 1..100, and
// each policy whole as it applies over the default (herald.RetryPolicy.Validate).
func (r putSettingsRequest) retries() (map[herald.Channel]herald.RetryPolicy, *httpError) {
	out := map[herald.Channel]herald.RetryPolicy{}
	for _, name := range sortedChannels(r.RetryPolicies) {
		in := r.RetryPolicies[name]
		ch, field := herald.Channel(name), "retry_policies."+name
		if !herald.IsProviderChannel(ch) {
			return nil, badField(field, "invalid_field", "retry policies apply to email, sms and push")
		}
		var p herald.RetryPolicy
		for _, d := range []struct {
			name string
			v    *string
			dst  *herald.Duration
		}{{"initial_interval", in.InitialInterval, &p.InitialInterval}, {"maximum_interval", in.MaximumInterval, &p.MaximumInterval}, {"expiration", in.Expiration, &p.Expiration}} {
			if d.v == nil {
				continue
			}
			v, err := time.ParseDuration(*d.v)
			if err != nil || v <= 0 || v > 7*24*time.Hour {
				return nil, badField(field+"."+d.name, "invalid_field", "%s must be a positive duration up to 168h, such as \"500ms\" or \"2m\"", d.name)
			}
			d.dst.Duration = v
		}
		if in.BackoffCoefficient != nil {
			if *in.BackoffCoefficient < 1 || *in.BackoffCoefficient > 10 {
				return nil, badField(field+".backoff_coefficient", "invalid_field", "backoff_coefficient must be from 1 to 10")
			}
			p.BackoffCoefficient = *in.BackoffCoefficient
		}
		if in.MaximumAttempts != nil {
			if *in.MaximumAttempts < 1 || *in.MaximumAttempts > 100 {
				return nil, badField(field+".maximum_attempts", "invalid_field", "maximum_attempts must be from 1 to 100")
			}
			p.MaximumAttempts = *in.MaximumAttempts
		}
		// Each field may be fine on its own and the policy still be one Temporal
		// refuses once merged over the default (initial_interval "10m" over the
		// default maximum of 5m): every provider send would be refused and the
		// notification hang. Validate checks the whole.
		var perr *herald.RetryPolicyError
		if err := p.Validate(); errors.As(err, &perr) {
			return nil, badField(field+"."+perr.Field, "invalid_field", "%s", perr.Message)
		}
		out[ch] = p
	}
	return out, nil
}

func sortedChannels[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// caps validates the category caps and returns them as integers.
func (r putSettingsRequest) caps() (map[string]int, *httpError) {
	cats := make([]string, 0, len(r.CategoryCaps))
	for cat := range r.CategoryCaps {
		cats = append(cats, cat)
	}
	sort.Strings(cats)
	if len(cats) > preferences.MaxCategories {
		return nil, badField("category_caps", "invalid_field", "at most %d category caps", preferences.MaxCategories)
	}
	out := make(map[string]int, len(cats))
	for _, cat := range cats {
		field := "category_caps." + cat
		if !categoryName.MatchString(cat) {
			return nil, badField(field, "invalid_field", "a category is 1 to 64 letters, digits, '_', '-' or '.', starting with a letter or digit")
		}
		num, ok := r.CategoryCaps[cat].(json.Number)
		if !ok {
			return nil, badField(field, "invalid_type", "%s must be an integer", field)
		}
		n, err := strconv.ParseInt(num.String(), 10, 64)
		if err != nil {
			return nil, badField(field, "invalid_type", "%s must be an integer, not %s", field, num)
		}
		if n < 1 || n > maxCategoryCap {
			return nil, badField(field, "invalid_field", "a cap is an integer from 1 to %d; leave the category out for no cap", maxCategoryCap)
		}
		out[cat] = int(n)
	}
	return out, nil
}

func (r putSettingsRequest) validLocale() *httpError {
	if r.DefaultLocale != nil {
		if _, err := language.Parse(*r.DefaultLocale); err != nil || len(*r.DefaultLocale) > 35 {
			return badField("default_locale", "invalid_field", "default_locale must be a BCP 47 language tag such as en-US")
		}
	}
	return nil
}

// putSettings replaces the tenant's category caps, default locale and retry
// policies (PUT semantics: omitted caps mean no caps, an omitted or null
// default_locale is "en"). The preference defaults are kept (see PUT
// /v1/preferences/defaults), and so are the operator's limits, which a tenant
// cannot change (operatorOnlyFields).
func (h *accountRoom) putSettings(c *gin.Context) {
	var req putSettingsRequest
	if err := decodeJSON(c, &req); err != nil {
		h.abort(c, err)
		return
	}
	caps, verr := req.caps()
	if verr == nil {
		verr = req.validLocale()
	}
	var retries map[herald.Channel]herald.RetryPolicy
	if verr == nil {
		retries, verr = req.retries()
	}
	var keep retention.Tenant
	if verr == nil {
		keep, verr = req.retention(h.retention)
	}
	var hold time.Duration
	if verr == nil {
		hold, verr = h.ordering.validHold(req.OrderingMaxHold)
	}
	if verr != nil {
		h.abort(c, verr)
		return
	}
	tenantID := tenantOf(c).ID
	ctx := c.Request.Context()
	cur, err := h.store.GetTenantSettings(ctx, tenantID)
	if err != nil {
		h.abort(c, err)
		return
	}
	if forbidden := req.operatorOnlyFields(cur); forbidden != nil {
		h.abort(c, forbidden)
		return
	}
	// The update never writes the operator's limits (PutTenantSettings), so one
	// the operator changes meanwhile is kept.
	if err := h.store.UpdateTenantSettings(ctx, tenantID, func(ts *store.TenantSettings) {
		ts.CategoryCaps = caps
		ts.RetryPolicies = retries
		ts.Retention = keep
		ts.OrderingMaxHold = hold
		ts.DefaultLocale = ""
		if req.DefaultLocale != nil {
			ts.DefaultLocale = *req.DefaultLocale
		}
	}); err != nil {
		h.abort(c, err)
		return
	}
	h.settings.forget(tenantID) // this process's accept path sees the new max_hold at once (others within seconds)
	h.answerSettings(c, tenantID)
}

func (h *accountRoom) getSettings(c *gin.Context) {
	h.answerSettings(c, tenantOf(c).ID)
}

func (h *accountRoom) answerSettings(c *gin.Context, tenantID string) {
	ts, err := h.store.GetTenantSettings(c.Request.Context(), tenantID)
	if err != nil {
		h.abort(c, err)
		return
	}
	if ts.CategoryCaps == nil {
		ts.CategoryCaps = map[string]int{}
	}
	if ts.RetryPolicies == nil {
		ts.RetryPolicies = map[herald.Channel]herald.RetryPolicy{}
	}
	c.JSON(http.StatusOK, settingsView{CategoryCaps: ts.CategoryCaps, DefaultLocale: ts.DefaultLocale, RetryPolicies: ts.RetryPolicies,
		OrderingMaxHold:  h.ordering.clamp(ts.OrderingMaxHold).String(),
		APIRatePerSecond: ts.APIRatePerSecond, APIBurst: ts.APIBurst, DailyQuota: ts.DailyQuota,
		Retention: viewRetention(ts.Retention.Policy(h.retention)), RetentionMax: viewRetention(h.retention)})
}

// retentionView is a retention policy as the settings document shows it:
// durations as Go durations ("720h0m0s"), the inbox cap as a number.
type retentionView map[string]any

func viewRetention(p retention.Policy) retentionView {
	v := retentionView{}
	for _, f := range retention.Fields {
		if f.Dur != nil {
			v[f.Name] = f.Dur(&p).String()
		} else {
			v[f.Name] = *f.Int(&p)
		}
	}
	return v
}

// operatorRetention is the operator's policy, retention.Defaults when unset.
func operatorRetention(p retention.Policy) retention.Policy {
	if p == (retention.Policy{}) {
		return retention.Defaults
	}
	return p
}

// retention validates the tenant's retention settings against the operator's
// policy op: known fields only; durations Go durations of at least 1s and at
// most the operator's; inbox_items an integer from 1 to the operator's. A
// tenant can shorten what its rows are kept for, never lengthen it.
func (r putSettingsRequest) retention(op retention.Policy) (retention.Tenant, *httpError) {
	var t retention.Tenant
	known := map[string]retention.Field{}
	for _, f := range retention.Fields {
		known[f.Name] = f
	}
	for _, name := range sortedChannels(r.Retention) {
		f, ok := known[name]
		field := "retention." + name
		if !ok {
			return t, badField(field, "unknown_field", "unknown retention setting %q", name)
		}
		raw := r.Retention[name]
		if f.Int != nil {
			num, ok := raw.(json.Number)
			n, err := strconv.ParseInt(string(num), 10, 64)
			if !ok || err != nil {
				return t, badField(field, "invalid_type", "%s must be an integer", field)
			}
			if limit := int64(*f.Int(&op)); n < 1 || n > limit {
				return t, badField(field, "invalid_field", "%s must be from 1 to %d (the operator's)", field, limit)
			}
			t.Set(name, n)
			continue
		}
		str, ok := raw.(string)
		if !ok {
			return t, badField(field, "invalid_type", "%s must be a duration string such as \"720h\"", field)
		}
		d, err := time.ParseDuration(str)
		if err != nil || d < time.Second || d%time.Second != 0 {
			return t, badField(field, "invalid_field", "%s must be a duration of whole seconds, at least 1s, such as \"720h\"", field)
		}
		if limit := *f.Dur(&op); d > limit {
			return t, badField(field, "invalid_field", "%s must be at most %s (the operator's); a tenant can shorten retention, never lengthen it", field, limit)
		}
		t.Set(name, int64(d/time.Second))
	}
	if r.RetentionMax != nil {
		for name, v := range r.RetentionMax {
			if want, ok := viewRetention(op)[name]; !ok || fmt.Sprint(want) != fmt.Sprint(v) {
				return t, operatorOnly("retention_max", "retention_max."+name+" is the operator's (HERALD_RETENTION_*); a tenant cannot change it")
			}
		}
	}
	return t, nil
}
