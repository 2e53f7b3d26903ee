package herald

import (
	"encoding/json"
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
