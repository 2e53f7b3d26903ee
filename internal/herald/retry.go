package herald

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// RetryPolicy is a provider retry policy: the default below, or a tenant's
// per-channel override of it, where zero fields keep the default.
type RetryPolicy struct {
	InitialInterval    Duration `json:"initial_interval,omitzero"`
	BackoffCoefficient float64  `json:"backoff_coefficient,omitempty"`
	MaximumInterval    Duration `json:"maximum_interval,omitzero"`
	MaximumAttempts    int      `json:"maximum_attempts,omitempty"`
	// Expiration bounds all attempts together (Temporal's schedule-to-close).
	Expiration Duration `json:"expiration,omitzero"`
}

// DefaultProviderRetry retries a provider send with exponential backoff (1 s,
// 2 s, 4 s … capped at 5 min) for up to 12 attempts; a provider's Retry-After
// overrides the next delay. Permanent refusals are not retried.
var DefaultProviderRetry = RetryPolicy{
	InitialInterval:    Duration{time.Second},
	BackoffCoefficient: 2,
	MaximumInterval:    Duration{5 * time.Minute},
	MaximumAttempts:    12,
}

// Over returns p applied over base: each field p sets replaces base's.
func (p RetryPolicy) Over(base RetryPolicy) RetryPolicy {
	if p.InitialInterval.Duration > 0 {
		base.InitialInterval = p.InitialInterval
	}
	if p.BackoffCoefficient >= 1 {
		base.BackoffCoefficient = p.BackoffCoefficient
	}
	if p.MaximumInterval.Duration > 0 {
		base.MaximumInterval = p.MaximumInterval
	}
	if p.MaximumAttempts > 0 {
		base.MaximumAttempts = p.MaximumAttempts
	}
	if p.Expiration.Duration > 0 {
		base.Expiration = p.Expiration
	}
	return base
}

// Bounds of a tenant's retry override, checked by Validate.
const (
	// MaxRetryDuration bounds initial_interval, maximum_interval and expiration.
	MaxRetryDuration = 7 * 24 * time.Hour
	// MaxBackoffCoefficient bounds backoff_coefficient (its minimum is 1).
	MaxBackoffCoefficient = 10
	// MaxRetryAttempts bounds maximum_attempts.
	MaxRetryAttempts = 100
)

// RetryPolicyError is an invalid retry override; Field is the JSON name of the
// field to change ("initial_interval", ...).
type RetryPolicyError struct {
	Field   string
	Message string
}

func (e *RetryPolicyError) Error() string { return e.Field + ": " + e.Message }

// Validate checks the override p whole, as Temporal will see it: every field p
// sets is in range, and the policy it makes over DefaultProviderRetry (what the
// workflow schedules every provider send with) is one Temporal accepts.
// Temporal refuses to schedule an activity whose retry policy has a maximum
// interval below its initial interval, a backoff coefficient below 1 or negative
// attempts (retrypolicy.Validate in the server); the workflow task then fails on
// every attempt and the notification hangs, holding its dedup key. Checking the
// fields one by one is not enough: "initial_interval": "10m" alone is fine, but
// over the default maximum of 5 minutes it is refused.
//
// Besides Temporal's rules: durations are positive and at most
// MaxRetryDuration, the coefficient is 1 … MaxBackoffCoefficient, attempts are
// 1 … MaxRetryAttempts (zero fields keep the default), and an expiration must
// not be shorter than the initial interval (no retry could ever start). The
// error (*RetryPolicyError) names the field to change: of two fields in
// conflict, the one p sets (both set: the first named).
//
// PUT /v1/settings refuses an invalid override with 400; the workflow re-checks
// the stored one and falls back to DefaultProviderRetry (see workflows), so a
// policy stored before this check, or written around the API, never hangs a run.
func (p RetryPolicy) Validate() error {
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"initial_interval", p.InitialInterval.Duration}, {"maximum_interval", p.MaximumInterval.Duration}, {"expiration", p.Expiration.Duration}} {
		if d.v < 0 || d.v > MaxRetryDuration {
			return &RetryPolicyError{Field: d.field, Message: fmt.Sprintf("%s must be a positive duration up to %s, such as \"500ms\" or \"2m\"", d.field, fmtDuration(MaxRetryDuration))}
		}
	}
	if c := p.BackoffCoefficient; c != 0 && !(c >= 1 && c <= MaxBackoffCoefficient) {
		return &RetryPolicyError{Field: "backoff_coefficient", Message: fmt.Sprintf("backoff_coefficient must be from 1 to %d", MaxBackoffCoefficient)}
	}
	if p.MaximumAttempts < 0 || p.MaximumAttempts > MaxRetryAttempts {
		return &RetryPolicyError{Field: "maximum_attempts", Message: fmt.Sprintf("maximum_attempts must be from 1 to %d", MaxRetryAttempts)}
	}
	m := p.Over(DefaultProviderRetry)
	if m.MaximumInterval.Duration < m.InitialInterval.Duration {
		field := "initial_interval"
		if p.InitialInterval.Duration == 0 {
			field = "maximum_interval"
		}
		return &RetryPolicyError{Field: field, Message: fmt.Sprintf("initial_interval (%s%s) must not exceed maximum_interval (%s%s): Temporal refuses such a policy",
			fmtDuration(m.InitialInterval.Duration), defaultNote(p.InitialInterval), fmtDuration(m.MaximumInterval.Duration), defaultNote(p.MaximumInterval))}
	}
	if m.Expiration.Duration > 0 && m.Expiration.Duration < m.InitialInterval.Duration {
		field := "expiration"
		if p.Expiration.Duration == 0 {
			field = "initial_interval"
		}
		return &RetryPolicyError{Field: field, Message: fmt.Sprintf("expiration (%s) must not be shorter than initial_interval (%s%s): no retry could start",
			fmtDuration(m.Expiration.Duration), fmtDuration(m.InitialInterval.Duration), defaultNote(p.InitialInterval))}
	}
	return nil
}

func defaultNote(set Duration) string {
	if set.Duration == 0 {
		return ", the default"
	}
	return ""
}

// fmtDuration writes a duration as PUT /v1/settings reads it ("5m0s" → "5m").
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Duration is a time.Duration written as a Go duration string ("1.5s") in JSON.
type Duration struct{ time.Duration }

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}
