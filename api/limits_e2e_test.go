package api_test

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/herald-notify/herald/api"
	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/store"
)

func TestTenantRateLimitAnswers429WithRetryAfter(t *testing.T) {
	h := apitest.Start(t, apitest.Options{NoWorker: true, TenantLimits: api.TenantLimits{RatePerSecond: 1, Burst: 5}})
	_, key := h.TenantWith("limited", "t")
	_, other := h.TenantWith("other", "t")
	createUser(h, key, "ann")
	createUser(h, other, "ann")

	var mu sync.Mutex
	codes := map[int]int{}
	var retryAfter string
	concurrently(12, func(i int) {
		r := h.Submit(key, map[string]any{"user_id": "ann", "template_id": "t", "data": map[string]any{"i": i}})
		mu.Lock()
		defer mu.Unlock()
		codes[r.Status]++
		if r.Status == http.StatusTooManyRequests {
			if _, code := r.ErrorField(); code != "rate_limited" {
				t.Errorf("429 with code %q", code)
			}
			retryAfter = r.Header.Get("Retry-After")
		}
	})
	// The burst of 5 passes (1/s refill may add one more during the test).
	if codes[http.StatusAccepted] < 5 || codes[http.StatusAccepted] > 6 || codes[http.StatusTooManyRequests] < 6 {
		t.Fatalf("status counts %v: want 5 (or 6) accepted, the rest 429", codes)
	}
	if n, err := strconv.Atoi(retryAfter); err != nil || n < 1 {
		t.Fatalf("Retry-After = %q, want whole seconds ≥ 1", retryAfter)
	}
	// Another tenant has its own bucket.
	h.Accept(other, map[string]any{"user_id": "ann", "template_id": "t"})
}

func TestTenantDailyQuota(t *testing.T) {
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	_, key := h.TenantWith("quota", "t")
	createUser(h, key, "bo")
	h.TenantLimits(key, store.TenantLimits{DailyQuota: 3}) // the operator's
	h.Eventually(10e9, "settings cache to expire", func() bool {
		r := h.Submit(key, map[string]any{"user_id": "bo", "template_id": "t", "data": map[string]any{"probe": fmt.Sprint(h.URL)}})
		return r.Status == http.StatusAccepted || r.Status == http.StatusOK
	})
	var last int
	for i := range 5 {
		r := h.Submit(key, map[string]any{"user_id": "bo", "template_id": "t", "data": map[string]any{"i": i}})
		last = r.Status
		if r.Status == http.StatusTooManyRequests {
			if _, code := r.ErrorField(); code != "daily_quota_exceeded" || r.Header.Get("Retry-After") == "" {
				t.Fatalf("quota 429: %s (Retry-After %q)", r.Body, r.Header.Get("Retry-After"))
			}
			if i != 2 {
				t.Fatalf("quota of 3 (one used by the probe) exceeded at submission %d", i+2)
			}
			return
		}
	}
	t.Fatalf("daily quota never enforced (last status %d)", last)
}
