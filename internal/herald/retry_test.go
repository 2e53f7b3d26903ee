package herald_test

import (
	"errors"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/herald"
)

func d(v time.Duration) herald.Duration { return herald.Duration{Duration: v} }

func TestRetryPolicyValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		p     herald.RetryPolicy
		field string // "" when valid
	}{
		{"empty keeps the default", herald.RetryPolicy{}, ""},
		{"the default itself", herald.DefaultProviderRetry, ""},
		{"attempts only", herald.RetryPolicy{MaximumAttempts: 3}, ""},
		{"initial and maximum together", herald.RetryPolicy{InitialInterval: d(10 * time.Minute), MaximumInterval: d(20 * time.Minute)}, ""},
		{"expiration after the first retry", herald.RetryPolicy{InitialInterval: d(time.Second), Expiration: d(time.Hour)}, ""},
		{"initial over the default maximum", herald.RetryPolicy{InitialInterval: d(10 * time.Minute)}, "initial_interval"},
		{"maximum under the default initial", herald.RetryPolicy{MaximumInterval: d(500 * time.Millisecond)}, "maximum_interval"},
		{"initial over its own maximum", herald.RetryPolicy{InitialInterval: d(2 * time.Minute), MaximumInterval: d(time.Minute)}, "initial_interval"},
		{"expiration before the first retry", herald.RetryPolicy{InitialInterval: d(30 * time.Second), Expiration: d(10 * time.Second)}, "expiration"},
		{"expiration before the default initial", herald.RetryPolicy{Expiration: d(500 * time.Millisecond)}, "expiration"},
		{"coefficient below 1", herald.RetryPolicy{BackoffCoefficient: 0.5}, "backoff_coefficient"},
		{"coefficient too large", herald.RetryPolicy{BackoffCoefficient: 11}, "backoff_coefficient"},
		{"negative attempts", herald.RetryPolicy{MaximumAttempts: -1}, "maximum_attempts"},
		{"too many attempts", herald.RetryPolicy{MaximumAttempts: 101}, "maximum_attempts"},
		{"negative initial", herald.RetryPolicy{InitialInterval: d(-time.Second)}, "initial_interval"},
		{"maximum over a week", herald.RetryPolicy{MaximumInterval: d(8 * 24 * time.Hour)}, "maximum_interval"},
	} {
		err := tc.p.Validate()
		var perr *herald.RetryPolicyError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.field != "" && (!errors.As(err, &perr) || perr.Field != tc.field):
			t.Errorf("%s: got %v, want an error on %s", tc.name, err, tc.field)
		}
	}
	err := herald.RetryPolicy{InitialInterval: d(10 * time.Minute)}.Validate()
	if err == nil || err.Error() != "initial_interval: initial_interval (10m) must not exceed maximum_interval (5m, the default): Temporal refuses such a policy" {
		t.Errorf("message: %v", err)
	}
}
