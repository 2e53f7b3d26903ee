package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/metrics"
	"github.com/herald-notify/herald/providers/providertest"
)

// TestMetricsMoveWithSendsFailuresAndDuplicates scrapes GET /metrics, sends
// (one straight through, one after a retryable provider error, one refused
// for good), submits a duplicate and an unknown user, scrapes again and checks
// every counter moved by exactly what happened.
func TestMetricsMoveWithSendsFailuresAndDuplicates(t *testing.T) {
	t.Parallel()
	e := startFailEnv(t, 10*time.Second)
	h := e.h
	before := h.Scrape()

	ok := e.mustNotify(t, "queued", nil, "email", "in_app")
	h.AwaitChannel(e.key, ok, "email", "sent", "", 10*time.Second)
	h.AwaitChannel(e.key, ok, "in_app", "delivered", "", 10*time.Second)

	e.sg.Next(providertest.Fail500())
	retried := e.mustNotify(t, "queued", nil, "email")
	h.AwaitChannel(e.key, retried, "email", "sent", "", 20*time.Second)

	e.sg.Next(providertest.Behavior{Status: http.StatusBadRequest})
	refused := e.mustNotify(t, "queued", nil, "email")
	h.AwaitChannel(e.key, refused, "email", "failed", "", 10*time.Second)

	k := freshKey("dup")
	body := map[string]any{"user_id": "ada", "template_id": "order", "channels": []string{"in_app"}, "idempotency_key": k}
	dup := h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/notifications", e.key, body).Str("notification_id")
	h.AwaitChannel(e.key, dup, "in_app", "delivered", "", 10*time.Second)
	if r := h.Submit(e.key, body); r.Status != http.StatusOK || r.Str("dedup") != "duplicate" {
		t.Fatalf("resubmission: %d %s", r.Status, r.Body)
	}
	apitest.WantError(t, h.Submit(e.key, map[string]any{"user_id": "nobody", "template_id": "order"}),
		http.StatusUnprocessableEntity, "unknown_user", "user_id")

	after := h.Scrape()
	delta := func(name string, labels ...string) float64 {
		return after.Value(name, labels...) - before.Value(name, labels...)
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{metrics.NotificationsAccepted, []string{"lane", "normal"}, 4},
		{metrics.NotificationsDup, nil, 1},
		{metrics.NotificationsRejected, []string{"reason", "unknown_user"}, 1},
		{metrics.Deliveries, []string{"channel", "email", "provider", "sendgrid", "outcome", metrics.OutcomeSent}, 2},
		{metrics.Deliveries, []string{"channel", "email", "provider", "sendgrid", "outcome", metrics.OutcomeRetryable}, 1},
		{metrics.Deliveries, []string{"channel", "email", "provider", "sendgrid", "outcome", metrics.OutcomePermanent}, 1},
		{metrics.Deliveries, []string{"channel", "in_app", "outcome", metrics.OutcomeDelivered}, 2},
		{metrics.ProviderCallDuration, []string{"channel", "email", "provider", "sendgrid"}, 4},
		{metrics.DeliveryRetries, []string{"channel", "email"}, 1},
		{metrics.HTTPRequests, []string{"route", "/v1/notifications", "status", "202"}, 4},
		{metrics.HTTPRequests, []string{"route", "/v1/notifications", "status", "200"}, 1},
		{metrics.HTTPRequests, []string{"route", "/v1/notifications", "status", "422"}, 1},
		{metrics.HTTPRequestDuration, []string{"route", "/v1/notifications"}, 6},
	} {
		if got := delta(c.name, c.labels...); got != c.want {
			t.Errorf("%s%v moved by %g, want %g", c.name, c.labels, got, c.want)
		}
	}
	// Route templates, never raw paths: the id of a status read is not a label.
	h.MustDo(http.StatusOK, http.MethodGet, "/v1/notifications/"+ok, e.key, nil)
	last := h.Scrape()
	if last.Value(metrics.HTTPRequests, "route", "/v1/notifications/:notification_id") < 1 {
		t.Errorf("no request counted under the route template; routes: %v", last[metrics.HTTPRequests])
	}
	for _, s := range last[metrics.HTTPRequests] {
		if s.Labels["route"] == "/v1/notifications/"+ok {
			t.Errorf("a raw path is a label value: %v", s.Labels)
		}
	}
	// No user or tenant labels by default.
	for _, name := range last.Names() {
		for _, l := range last.LabelNames(name) {
			if l == "user" || l == "user_id" || l == "tenant" || l == "tenant_id" {
				t.Errorf("%s has label %s", name, l)
			}
		}
	}
	// The Temporal SDK's worker metrics are in the same exposition.
	for _, name := range []string{"temporal_workflow_task_execution_latency_seconds", "temporal_activity_execution_latency_seconds", "temporal_worker_task_slots_available"} {
		if len(last[name]) == 0 {
			t.Errorf("no %s in /metrics; temporal families: %v", name, temporalNames(last))
		}
	}
	if _, ok := last[metrics.DeadLettersOpen]; !ok {
		t.Errorf("no %s gauge", metrics.DeadLettersOpen)
	}
}

func temporalNames(s apitest.Samples) []string {
	var out []string
	for _, n := range s.Names() {
		if len(n) > 9 && n[:9] == "temporal_" {
			out = append(out, n)
		}
	}
	return out
}
