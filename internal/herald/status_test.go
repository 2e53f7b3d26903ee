package herald_test

import (
	"testing"

	"github.com/herald-notify/herald/internal/herald"
)

func TestOverallStatus(t *testing.T) {
	for _, tc := range []struct {
		channels []string
		want     string
	}{
		{[]string{herald.DeliveryDelivered, herald.DeliveryDelivered}, herald.NotificationDelivered},
		{[]string{herald.DeliveryDelivered, herald.DeliverySent}, herald.NotificationSent},
		{[]string{herald.DeliveryFailed, herald.DeliveryFailed}, herald.NotificationFailed},
		{[]string{herald.DeliveryFailed, herald.DeliverySent}, herald.NotificationPartiallyFailed},
		{[]string{herald.DeliveryCancelled}, herald.NotificationCancelled},
		{[]string{herald.DeliverySuppressed, herald.DeliveryCancelled}, herald.NotificationSuppressed},
		{[]string{herald.DeliverySuppressed, herald.DeliveryDelivered}, herald.NotificationDelivered},
		{[]string{herald.DeliveryScheduled, herald.DeliveryScheduled}, herald.NotificationScheduled},
		{[]string{herald.DeliveryScheduled, herald.DeliveryDelivered}, herald.NotificationScheduled},
		{[]string{herald.DeliveryScheduled, herald.DeliveryPending}, herald.NotificationSending},
		{[]string{herald.DeliverySending, herald.DeliveryDelivered}, herald.NotificationSending},
		{[]string{herald.DeliveryPending}, herald.NotificationSending},
	} {
		if got := herald.OverallStatus(tc.channels); got != tc.want {
			t.Errorf("OverallStatus(%v) = %q, want %q", tc.channels, got, tc.want)
		}
	}
}

func TestRetryPolicyOver(t *testing.T) {
	got := herald.RetryPolicy{MaximumAttempts: 3, BackoffCoefficient: 0.5}.Over(herald.DefaultProviderRetry)
	if got.MaximumAttempts != 3 || got.BackoffCoefficient != 2 || got.InitialInterval != herald.DefaultProviderRetry.InitialInterval {
		t.Fatalf("override applied wrongly: %+v", got)
	}
}
