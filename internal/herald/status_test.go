package herald_test

import (
	"testing"

	"github.com/herald-notify/herald/internal/herald"
)

func TestOverallStatus(t *testing.T) {
	for _, tc := range []struct {
		channels []herald.DeliveryStatus
		want     herald.NotificationStatus
	}{
		{[]herald.DeliveryStatus{herald.DeliveryDelivered, herald.DeliveryDelivered}, herald.NotificationDelivered},
		{[]herald.DeliveryStatus{herald.DeliveryDelivered, herald.DeliverySent}, herald.NotificationSent},
		{[]herald.DeliveryStatus{herald.DeliveryFailed, herald.DeliveryFailed}, herald.NotificationFailed},
		{[]herald.DeliveryStatus{herald.DeliveryFailed, herald.DeliverySent}, herald.NotificationPartiallyFailed},
		{[]herald.DeliveryStatus{herald.DeliveryCancelled}, herald.NotificationCancelled},
		{[]herald.DeliveryStatus{herald.DeliverySuppressed, herald.DeliveryCancelled}, herald.NotificationSuppressed},
		{[]herald.DeliveryStatus{herald.DeliverySuppressed, herald.DeliveryDelivered}, herald.NotificationDelivered},
		{[]herald.DeliveryStatus{herald.DeliveryScheduled, herald.DeliveryScheduled}, herald.NotificationScheduled},
		{[]herald.DeliveryStatus{herald.DeliveryScheduled, herald.DeliveryDelivered}, herald.NotificationScheduled},
		{[]herald.DeliveryStatus{herald.DeliveryScheduled, herald.DeliveryPending}, herald.NotificationSending},
		{[]herald.DeliveryStatus{herald.DeliverySending, herald.DeliveryDelivered}, herald.NotificationSending},
		{[]herald.DeliveryStatus{herald.DeliveryPending}, herald.NotificationSending},
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
