package activities_test

import (
	"testing"
	"time"

	"github.com/herald-notify/herald/providers/providertest"
)

// TestFCMTokenIsExchangedOncePerConfigVersion: the worker keeps the FCM client
// (and its OAuth token source) of a provider config across deliveries, so N
// pushes cost one token exchange, not N; a config update builds a new client,
// whose first push exchanges the new key once.
func TestFCMTokenIsExchangedOncePerConfigVersion(t *testing.T) {
	h, f, tenantID, key := setup(t)
	const n = 5
	for range n {
		id := send(h, key, "push")
		h.AwaitChannel(key, id, "push", "sent", "", 20*time.Second)
	}
	if got := f.FCM.Accepted(); got != n {
		t.Fatalf("FCM accepted %d pushes, want %d", got, n)
	}
	if got := f.FCM.TokenRequests(); got != 1 {
		t.Fatalf("%d pushes made %d token exchanges, want 1", n, got)
	}

	// A new service account key: a new config version, so one more exchange.
	h.ConfigureFCM(tenantID, f.FCM.URL+providertest.TokenPath)
	for range n {
		id := send(h, key, "push")
		h.AwaitChannel(key, id, "push", "sent", "", 20*time.Second)
	}
	if got := f.FCM.TokenRequests(); got != 2 {
		t.Fatalf("after a key rotation and %d more pushes: %d token exchanges, want 2", n, got)
	}
}
