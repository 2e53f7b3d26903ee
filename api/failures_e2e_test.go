package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/providers/providertest"
)

// failEnv is a harness whose tenant sends email through a SendGrid fake (with a
// signed event webhook) and SMS through a Twilio fake, to user "ada".
type failEnv struct {
	h        *apitest.Harness
	sg       *providertest.SendGridFake
	tw       *providertest.TwilioFake
	tenantID string
	key      string
	// sign signs a SendGrid webhook body as SendGrid would for this tenant.
	sign func(body []byte) []string
}

// startFailEnv starts the fakes and a harness whose provider HTTP client gives up
// after clientTimeout.
func startFailEnv(t *testing.T, clientTimeout time.Duration) failEnv {
	t.Helper()
	f := apitest.StartFakes(t)
	h := apitest.Start(t, apitest.Options{Process: f.Process(publicBase, clientTimeout)})
	tenantID, key := h.TenantWith("failures", "order")
	signKey := providertest.NewSendGridWebhookKey(t)
	h.ConfigureSendGrid(tenantID, `{"from":"shop@example.com","webhook_public_key":"`+signKey.PublicKey+`"}`)
	h.ConfigureTwilio(tenantID)
	h.PutUser(key, "ada", map[string]any{"email": "ada@example.com", "phone": "+14155550100"})
	return failEnv{h: h, sg: f.SendGrid, tw: f.Twilio, tenantID: tenantID, key: key,
		sign: func(body []byte) []string { return signSendGrid(t, signKey, time.Now(), body) }}
}

// notify submits a notification to ada with a fresh idempotency key; extra adds or
// overrides body fields.
func (e failEnv) notify(extra map[string]any, channels ...string) apitest.Response {
	e.h.T.Helper()
	k := freshKey("fail")
	body := map[string]any{"user_id": "ada", "template_id": "order", "channels": channels,
		"data": map[string]any{"title": "Order", "body": "order " + k}, "idempotency_key": k}
	for k, v := range extra {
		body[k] = v
	}
	return e.h.Submit(e.key, body)
}

// mustNotify submits and returns the id of a 202 with the given status.
func (e failEnv) mustNotify(t *testing.T, status string, extra map[string]any, channels ...string) string {
	t.Helper()
	r := e.notify(extra, channels...)
	if r.Status != http.StatusAccepted || r.Str("status") != status {
		t.Fatalf("submit: %d %s, want 202 %s", r.Status, r.Body, status)
	}
	return r.Str("notification_id")
}

// retries sets the tenant's retry overrides through PUT /v1/settings.
func (e failEnv) retries(t *testing.T, policies map[string]any) apitest.Response {
	t.Helper()
	return e.h.MustDo(http.StatusOK, http.MethodPut, "/v1/settings", e.key, map[string]any{"retry_policies": policies})
}

// deadLetterEvery makes every send on channels (email, sms) dead-letter: one
// attempt each, and the channel's provider fake answers 500 until Recover.
func (e failEnv) deadLetterEvery(t *testing.T, channels ...string) {
	t.Helper()
	policies := map[string]any{}
	for _, ch := range channels {
		policies[ch] = map[string]any{"maximum_attempts": 1}
	}
	e.retries(t, policies)
	for _, ch := range channels {
		switch ch {
		case "email":
			e.sg.Always(providertest.Fail500())
		case "sms":
			e.tw.Always(providertest.Fail500())
		default:
			t.Fatalf("deadLetterEvery: no provider fake for channel %q", ch)
		}
	}
}

// deadLetters lists the dead letters of the key's tenant.
func deadLetters(t *testing.T, h *apitest.Harness, key, query string) []map[string]any {
	t.Helper()
	r := h.MustDo(http.StatusOK, http.MethodGet, "/v1/dead-letters"+query, key, nil)
	var out []map[string]any
	for _, it := range r.JSON["items"].([]any) {
		out = append(out, it.(map[string]any))
	}
	return out
}

// deadLetterOf returns the dead letter of a notification's channel, or nil.
func deadLetterOf(items []map[string]any, notificationID, channel string) map[string]any {
	for _, d := range items {
		if d["notification_id"] == notificationID && d["channel"] == channel {
			return d
		}
	}
	return nil
}

func dlID(d map[string]any) string { return fmt.Sprintf("%.0f", d["id"].(float64)) }

// history returns a channel's provider attempts.
func history(ch map[string]any) []map[string]any {
	var out []map[string]any
	for _, a := range ch["history"].([]any) {
		out = append(out, a.(map[string]any))
	}
	return out
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// TestScheduledSendIsDeliveredAtSendAt: nothing is sent before send_at (the
// notification and its channels are "scheduled" meanwhile); it is sent right after.
func TestScheduledSendIsDeliveredAtSendAt(t *testing.T) {
	t.Parallel()
	e := startFailEnv(t, 10*time.Second)
	sendAt := time.Now().Add(3 * time.Second)
	id := e.mustNotify(t, "scheduled", map[string]any{"send_at": rfc3339(sendAt)}, "email", "in_app")

	// Wait for the workflow to record the schedule, then watch until just before send_at.
	e.h.AwaitStatus(e.key, id, "scheduled", 2*time.Second)
	for time.Until(sendAt) > 300*time.Millisecond {
		overall, chans := e.h.Channels(e.key, id)
		if overall != "scheduled" {
			t.Fatalf("before send_at the notification is %s, want scheduled", overall)
		}
		for _, ch := range []herald.Channel{"email", "in_app"} {
			if chans[ch]["status"] != "scheduled" || chans[ch]["reason"] != "send_at" {
				t.Fatalf("before send_at %s is %v", ch, chans[ch])
			}
		}
		if n := e.sg.Calls(); n != 0 {
			t.Fatalf("SendGrid was called %d times before send_at", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r := e.h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/ada/inbox", e.key, nil); len(r.JSON["items"].([]any)) != 0 {
		t.Fatalf("in-app item before send_at: %s", r.Body)
	}

	e.h.AwaitChannel(e.key, id, "email", "sent", "", 5*time.Second)
	e.h.AwaitChannel(e.key, id, "in_app", "delivered", "", 5*time.Second)
	reqs := e.sg.AcceptedRequests()
	if len(reqs) != 1 {
		t.Fatalf("SendGrid accepted %d messages, want 1", len(reqs))
	}
	if early := sendAt.Sub(reqs[0].At); early > 100*time.Millisecond {
		t.Fatalf("sent %s before send_at", early)
	}
	if late := reqs[0].At.Sub(sendAt); late > 3*time.Second {
		t.Errorf("sent %s after send_at", late)
	}
	e.h.AwaitStatus(e.key, id, "sent", 5*time.Second)
}

// TestCancelScheduledNotification: a cancel before send_at answers 200 with every
// channel cancelled, and nothing is sent once send_at has passed. (The overall
// status is checked by TestCancelRightAfterAccept, skipped until its bug is fixed.)
func TestCancelScheduledNotification(t *testing.T) {
	t.Parallel()
	e := startFailEnv(t, 10*time.Second)
	sendAt := time.Now().Add(3 * time.Second)
	id := e.mustNotify(t, "scheduled", map[string]any{"send_at": rfc3339(sendAt)}, "email", "in_app")
	e.h.AwaitChannel(e.key, id, "email", "scheduled", "send_at", 2*time.Second)

	r := e.h.MustDo(http.StatusOK, http.MethodDelete, "/v1/notifications/"+id, e.key, nil)
	if r.Str("notification_id") != id || len(r.JSON["channels"].([]any)) != 2 {
		t.Fatalf("cancel answered %s", r.Body)
	}
	for _, c := range r.JSON["channels"].([]any) {
		ch := c.(map[string]any)
		if ch["status"] != "cancelled" || ch["reason"] != "cancelled_by_request" {
			t.Fatalf("channel after cancel: %v", ch)
		}
	}
	// Cancelling again is harmless.
	e.h.MustDo(http.StatusOK, http.MethodDelete, "/v1/notifications/"+id, e.key, nil)
	// Another tenant cannot cancel it (or learn that it exists).
	_, otherKey := e.h.Tenant("other")
	apitest.WantError(t, e.h.Do(http.MethodDelete, "/v1/notifications/"+id, otherKey, nil), http.StatusNotFound, "not_found", "")

	time.Sleep(time.Until(sendAt) + 1500*time.Millisecond)
	if n := e.sg.Calls(); n != 0 {
		t.Fatalf("SendGrid was called %d times for a cancelled notification", n)
	}
	_, chans := e.h.Channels(e.key, id)
	if chans["email"]["status"] != "cancelled" || chans["in_app"]["status"] != "cancelled" {
		t.Fatalf("after send_at: %v", chans)
	}
	if r := e.h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/ada/inbox", e.key, nil); len(r.JSON["items"].([]any)) != 0 {
		t.Fatalf("a cancelled notification reached the inbox: %s", r.Body)
	}
}

// TestCancelRightAfterAccept: cancels that reach the workflows right after the
// 202 (some before their first activity has recorded them) still cancel them for
// good: channels and overall status "cancelled", in the 200 answer and afterwards.
func TestCancelRightAfterAccept(t *testing.T) {
	t.Parallel()
	e := startFailEnv(t, 10*time.Second)
	sendAt := time.Now().Add(2 * time.Second)
	ids := make([]string, 10)
	for i := range ids {
		ids[i] = e.mustNotify(t, "scheduled", map[string]any{"send_at": rfc3339(sendAt)}, "email", "in_app")
	}
	answers := make([]apitest.Response, len(ids))
	concurrently(len(ids), func(i int) {
		// A 503 (the run did not take the update within the API's 10 s: a
		// loaded worker — CI runs every package at once on 2 CPUs, and one
		// run once took over a minute) says "retry shortly", and a client
		// does, for up to 3 minutes here; anything else is the answer.
		deadline := time.Now().Add(3 * time.Minute)
		for {
			answers[i] = e.h.Do(http.MethodDelete, "/v1/notifications/"+ids[i], e.key, nil)
			if answers[i].Status != http.StatusServiceUnavailable || time.Now().After(deadline) {
				return
			}
		}
	})
	for i, r := range answers {
		if r.Status != http.StatusOK || r.Str("status") != "cancelled" {
			t.Errorf("%s: cancel answered %d %s", ids[i], r.Status, r.Body)
		}
	}
	time.Sleep(time.Until(sendAt) + 1500*time.Millisecond)
	for _, id := range ids {
		e.h.Eventually(time.Minute, id+" cancelled for good", func() bool {
			overall, chans := e.h.Channels(e.key, id)
			return overall == "cancelled" && chans["email"]["status"] == "cancelled" && chans["in_app"]["status"] == "cancelled"
		})
	}
	if n := e.sg.Calls(); n != 0 {
		t.Fatalf("SendGrid was called %d times for cancelled notifications", n)
	}
}

// TestCancelAfterSentIsConflict: once sent, DELETE answers 409 not_cancellable with
// the current state; unknown and malformed ids are 404 and 400.
func TestCancelAfterSentIsConflict(t *testing.T) {
	t.Parallel()
	e := startFailEnv(t, 10*time.Second)
	id := e.mustNotify(t, "queued", nil, "email")
	e.h.AwaitChannel(e.key, id, "email", "sent", "", 10*time.Second)
	e.h.AwaitStatus(e.key, id, "sent", 5*time.Second)

	r := e.h.Do(http.MethodDelete, "/v1/notifications/"+id, e.key, nil)
	if _, code := r.ErrorField(); r.Status != http.StatusConflict || code != "not_cancellable" {
		t.Fatalf("cancel after sent: %d %s", r.Status, r.Body)
	}
	n, _ := r.JSON["notification"].(map[string]any)
	if n == nil || n["notification_id"] != id || n["status"] != "sent" {
		t.Fatalf("409 without the current state: %s", r.Body)
	}
	if ch := n["channels"].([]any)[0].(map[string]any); ch["status"] != "sent" {
		t.Fatalf("409 channel: %v", ch)
	}
	if e.sg.Accepted() != 1 {
		t.Fatalf("accepted %d, want 1", e.sg.Accepted())
	}

	unknown := "n_" + strings.Repeat("ab", 32)
	apitest.WantError(t, e.h.Do(http.MethodDelete, "/v1/notifications/"+unknown, e.key, nil), http.StatusNotFound, "not_found", "")
	apitest.WantError(t, e.h.Do(http.MethodDelete, "/v1/notifications/nope", e.key, nil), http.StatusBadRequest, "invalid_field", "notification_id")
}

// TestSendAtAndPriorityValidation: send_at in the past sends now; more than a year
// ahead or not RFC 3339 is 400, as is an unknown priority; priority picks the lane
// and a critical template always takes the critical lane.
func TestSendAtAndPriorityValidation(t *testing.T) {
	t.Parallel()
	e := startFailEnv(t, 10*time.Second)
	start := time.Now()
	id := e.mustNotify(t, "queued", map[string]any{"send_at": rfc3339(time.Now().Add(-time.Hour))}, "email")
	e.h.AwaitChannel(e.key, id, "email", "sent", "", 5*time.Second)
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("a past send_at took %s to send", took)
	}

	apitest.WantError(t, e.notify(map[string]any{"send_at": rfc3339(time.Now().Add(367 * 24 * time.Hour))}, "email"), http.StatusBadRequest, "invalid_field", "send_at")
	apitest.WantError(t, e.notify(map[string]any{"send_at": "tomorrow"}, "email"), http.StatusBadRequest, "invalid_field", "send_at")
	apitest.WantError(t, e.notify(map[string]any{"send_at": "2026-12-24 18:00:00"}, "email"), http.StatusBadRequest, "invalid_field", "send_at")
	apitest.WantError(t, e.notify(map[string]any{"send_at": 1767225600}, "email"), http.StatusBadRequest, "invalid_type", "send_at")
	apitest.WantError(t, e.notify(map[string]any{"priority": "urgent"}, "email"), http.StatusBadRequest, "invalid_field", "priority")
	apitest.WantError(t, e.notify(map[string]any{"priority": "critical"}, "email"), http.StatusBadRequest, "invalid_field", "priority")
	apitest.WantError(t, e.notify(map[string]any{"priority": ""}, "email"), http.StatusBadRequest, "invalid_field", "priority")

	// The lane is the workflow's task queue.
	crit := apitest.SimpleTemplate("otp")
	crit.Critical = true
	e.h.Template(e.key, crit)
	lane := func(id string) string {
		t.Helper()
		r := e.h.MustDo(http.StatusOK, http.MethodGet, "/v1/notifications/"+id, e.key, nil)
		d, err := e.h.Temporal.DescribeWorkflow(context.Background(), r.Str("workflow_id"), r.Str("run_id"))
		if err != nil {
			t.Fatal(err)
		}
		return d.RawResponse.GetExecutionConfig().GetTaskQueue().GetName()
	}
	bulk := e.mustNotify(t, "queued", map[string]any{"priority": "bulk"}, "email")
	normal := e.mustNotify(t, "queued", map[string]any{"priority": "normal"}, "email")
	critical := e.mustNotify(t, "queued", map[string]any{"priority": "bulk", "template_id": "otp"}, "email")
	for id, want := range map[string]string{bulk: e.h.TaskQueue + "-bulk", normal: e.h.TaskQueue, critical: e.h.TaskQueue + "-critical"} {
		e.h.AwaitChannel(e.key, id, "email", "sent", "", 10*time.Second)
		if got := lane(id); got != want {
			t.Errorf("%s ran on %s, want %s", id, got, want)
		}
	}
}

// TestDeadLetterAndRedrive: with the tenant's email policy at 2 attempts, a
// SendGrid outage dead-letters the channel with its history; after the provider
// recovers a redrive sends it exactly once, and the dead letter cannot be redriven
// twice. Another tenant sees none of it.
func TestDeadLetterAndRedrive(t *testing.T) {
	t.Parallel()
	e := startFailEnv(t, 10*time.Second)
	r := e.retries(t, map[string]any{"email": map[string]any{"initial_interval": "100ms", "backoff_coefficient": 2,
		"maximum_interval": "1s", "maximum_attempts": 2, "expiration": "1m"}})
	got, _ := json.Marshal(r.JSON["retry_policies"])
	if want := `{"email":{"backoff_coefficient":2,"expiration":"1m0s","initial_interval":"100ms","maximum_attempts":2,"maximum_interval":"1s"}}`; string(got) != want {
		t.Fatalf("retry_policies = %s, want %s", got, want)
	}
	if r := e.h.MustDo(http.StatusOK, http.MethodGet, "/v1/settings", e.key, nil); !strings.Contains(string(r.Body), `"maximum_attempts":2`) {
		t.Fatalf("GET /v1/settings lost the retry policy: %s", r.Body)
	}
	apitest.WantError(t, e.h.Do(http.MethodPut, "/v1/settings", e.key, map[string]any{"retry_policies": map[string]any{"in_app": map[string]any{}}}),
		http.StatusBadRequest, "invalid_field", "retry_policies.in_app")
	apitest.WantError(t, e.h.Do(http.MethodPut, "/v1/settings", e.key, map[string]any{"retry_policies": map[string]any{"email": map[string]any{"initial_interval": "fast"}}}),
		http.StatusBadRequest, "invalid_field", "retry_policies.email.initial_interval")
	apitest.WantError(t, e.h.Do(http.MethodPut, "/v1/settings", e.key, map[string]any{"retry_policies": map[string]any{"email": map[string]any{"maximum_attempts": 0}}}),
		http.StatusBadRequest, "invalid_field", "retry_policies.email.maximum_attempts")

	e.sg.Always(providertest.Fail500())
	id := e.mustNotify(t, "queued", nil, "email")
	ch := e.h.AwaitChannel(e.key, id, "email", "failed", "dead_lettered", 15*time.Second)
	hist := history(ch)
	if len(hist) != 2 {
		t.Fatalf("history has %d attempts, want 2: %v", len(hist), hist)
	}
	for i, a := range hist {
		if a["attempt"] != float64(i+1) || a["outcome"] != "retryable" || a["provider"] != "sendgrid" || a["error"] == nil {
			t.Errorf("attempt %d: %v", i+1, a)
		}
	}
	if e.sg.Calls() != 2 || e.sg.Accepted() != 0 {
		t.Fatalf("SendGrid calls %d accepted %d, want 2 and 0", e.sg.Calls(), e.sg.Accepted())
	}
	e.h.AwaitStatus(e.key, id, "failed", 5*time.Second)

	d := deadLetterOf(deadLetters(t, e.h, e.key, ""), id, "email")
	if d == nil {
		t.Fatal("GET /v1/dead-letters does not list the dead letter")
	}
	if d["attempts"] != 2.0 || d["status"] != "open" || d["template_id"] != "order" || d["redrives"] != 0.0 ||
		!strings.Contains(d["last_error"].(string), "500") {
		t.Fatalf("dead letter: %v", d)
	}
	// Filters.
	past, future := rfc3339(time.Now().Add(-time.Hour)), rfc3339(time.Now().Add(time.Hour))
	for q, want := range map[string]bool{
		"?channel=email": true, "?channel=sms": false, "?template_id=order": true, "?template_id=other": false,
		"?since=" + past: true, "?since=" + future: false, "?until=" + future: true, "?until=" + past: false,
		"?status=all": true, "?status=redriven": false, "?limit=1": true,
	} {
		if found := deadLetterOf(deadLetters(t, e.h, e.key, q), id, "email") != nil; found != want {
			t.Errorf("GET /v1/dead-letters%s lists it: %v, want %v", q, found, want)
		}
	}
	for q, field := range map[string]string{"?channel=fax": "channel", "?status=closed": "status", "?since=yesterday": "since",
		"?until=2026-01-01": "until", "?limit=0": "limit", "?limit=1001": "limit", "?limit=x": "limit"} {
		apitest.WantError(t, e.h.Do(http.MethodGet, "/v1/dead-letters"+q, e.key, nil), http.StatusBadRequest, "invalid_field", field)
	}

	// Tenant isolation: another tenant neither sees nor redrives it.
	_, otherKey := e.h.Tenant("other")
	if items := deadLetters(t, e.h, otherKey, "?status=all"); len(items) != 0 {
		t.Fatalf("another tenant lists %d dead letters", len(items))
	}
	apitest.WantError(t, e.h.Do(http.MethodPost, "/v1/dead-letters/"+dlID(d)+"/redrive", otherKey, nil), http.StatusNotFound, "not_found", "")
	if r := e.h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/dead-letters/redrive", otherKey, map[string]any{}); r.JSON["matched"] != 0.0 {
		t.Fatalf("another tenant's bulk redrive matched: %s", r.Body)
	}
	apitest.WantError(t, e.h.Do(http.MethodPost, "/v1/dead-letters/abc/redrive", e.key, nil), http.StatusBadRequest, "invalid_field", "dead_letter_id")
	apitest.WantError(t, e.h.Do(http.MethodPost, "/v1/dead-letters/0/redrive", e.key, nil), http.StatusBadRequest, "invalid_field", "dead_letter_id")
	apitest.WantError(t, e.h.Do(http.MethodPost, "/v1/dead-letters/999999999999/redrive", e.key, nil), http.StatusNotFound, "not_found", "")
	if _, chans := e.h.Channels(e.key, id); chans["email"]["status"] != "failed" || e.sg.Calls() != 2 {
		t.Fatalf("a rejected redrive changed something: %v, %d calls", chans["email"], e.sg.Calls())
	}

	// The provider recovers; one redrive sends it once.
	e.sg.Recover()
	r = e.h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/dead-letters/"+dlID(d)+"/redrive", e.key, nil)
	if r.JSON["dead_letter_id"] != d["id"] || r.Str("status") != "redriving" || !strings.HasPrefix(r.Str("redrive_workflow_id"), "redrive/") {
		t.Fatalf("redrive answered %s", r.Body)
	}
	ch = e.h.AwaitChannel(e.key, id, "email", "sent", "", 15*time.Second)
	if ch["provider_message_id"] == nil || ch["reason"] != nil {
		t.Errorf("redriven channel: %v", ch)
	}
	// The attempt is appended to the history right after the guard records
	// "sent": wait for it rather than race it.
	e.h.Eventually(5*time.Second, "the redrive's attempt in the history", func() bool {
		_, chans := e.h.Channels(e.key, id)
		ch = chans["email"]
		return len(history(ch)) >= 3
	})
	// The redrive's call is its run's first attempt (the number the history
	// has always shown), at the channel's sent_at.
	if hist := history(ch); len(hist) != 3 || hist[2]["outcome"] != "accepted" || hist[2]["attempt"] != 1.0 ||
		hist[2]["provider"] != "sendgrid" || hist[2]["error"] != nil || hist[2]["at"] != ch["sent_at"] {
		t.Errorf("history after the redrive: %v (sent at %v)", hist, ch["sent_at"])
	}
	e.h.Eventually(5*time.Second, "dead letter redriven", func() bool {
		d := deadLetterOf(deadLetters(t, e.h, e.key, "?status=redriven"), id, "email")
		return d != nil && d["redrives"] == 1.0
	})
	e.h.AwaitStatus(e.key, id, "sent", 5*time.Second)
	if deadLetterOf(deadLetters(t, e.h, e.key, ""), id, "email") != nil {
		t.Error("a redriven dead letter is still listed as open")
	}
	if e.sg.Accepted() != 1 || e.sg.Calls() != 3 {
		t.Fatalf("SendGrid calls %d accepted %d, want 3 and exactly 1", e.sg.Calls(), e.sg.Accepted())
	}

	// A dead letter that is not open cannot be redriven again.
	r = e.h.Do(http.MethodPost, "/v1/dead-letters/"+dlID(d)+"/redrive", e.key, nil)
	if _, code := r.ErrorField(); r.Status != http.StatusConflict || code != "not_redrivable" {
		t.Fatalf("second redrive: %d %s", r.Status, r.Body)
	}
	if dl, _ := r.JSON["dead_letter"].(map[string]any); dl == nil || dl["status"] != "redriven" {
		t.Fatalf("409 without the dead letter: %s", r.Body)
	}
	if e.sg.Accepted() != 1 {
		t.Fatalf("accepted %d after a rejected redrive", e.sg.Accepted())
	}
}

// TestRedriveAfterProviderAcceptedDoesNotResend: SendGrid takes the message but
// its answer never arrives (the client times out), then it is down: Herald
// dead-letters the channel although the provider has the message. Its event
// webhook then reports the message; a redrive finds that receipt behind the
// (notification_id, channel) guard and records the channel sent without a second
// send.
func TestRedriveAfterProviderAcceptedDoesNotResend(t *testing.T) {
	t.Parallel()
	e := startFailEnv(t, time.Second)
	e.retries(t, map[string]any{"email": map[string]any{"initial_interval": "100ms", "maximum_attempts": 2}})
	hold := e.sg.HoldNext(true) // accepted, but the answer is held until the client gives up
	e.sg.Always(providertest.Fail500())
	id := e.mustNotify(t, "queued", nil, "email")
	select {
	case <-hold.Arrived():
	case <-time.After(10 * time.Second):
		t.Fatal("the first attempt never reached SendGrid")
	}
	ch := e.h.AwaitChannel(e.key, id, "email", "failed", "dead_lettered", 15*time.Second)
	hold.Release()
	if hist := history(ch); len(hist) != 2 || hist[0]["outcome"] != "retryable" || hist[1]["outcome"] != "retryable" {
		t.Fatalf("history: %v", hist)
	}
	accepted := e.sg.AcceptedRequests()
	if len(accepted) != 1 || e.sg.Calls() != 2 {
		t.Fatalf("SendGrid calls %d accepted %d, want 2 calls, 1 accepted", e.sg.Calls(), len(accepted))
	}
	msgID := accepted[0].MessageID
	d := deadLetterOf(deadLetters(t, e.h, e.key, "?channel=email"), id, "email")
	if d == nil {
		t.Fatal("not dead-lettered")
	}

	// SendGrid's event webhook: "processed" for the message Herald never heard back about.
	batch := sgBatch(t, sgEv(e.tenantID, id, msgID, "processed", "ev-processed-"+id, time.Now().Unix()))
	if r := e.h.Do(http.MethodPost, "/v1/webhooks/sendgrid", "", batch, e.sign(batch)...); r.Status != http.StatusOK || r.JSON["recorded"] != 1.0 {
		t.Fatalf("webhook: %d %s", r.Status, r.Body)
	}

	e.sg.Recover()
	e.h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/dead-letters/"+dlID(d)+"/redrive", e.key, nil)
	ch = e.h.AwaitChannel(e.key, id, "email", "sent", "", 15*time.Second)
	if ch["provider_message_id"] != msgID {
		t.Errorf("provider_message_id = %v, want the accepted message's %s", ch["provider_message_id"], msgID)
	}
	e.h.Eventually(5*time.Second, "dead letter redriven", func() bool {
		return deadLetterOf(deadLetters(t, e.h, e.key, "?status=redriven"), id, "email") != nil
	})
	if e.sg.Accepted() != 1 || e.sg.Calls() != 2 {
		t.Fatalf("the redrive called SendGrid again: calls %d accepted %d, want 2 and 1", e.sg.Calls(), e.sg.Accepted())
	}

	// The delivery receipt arrives later and completes the channel.
	batch = sgBatch(t, sgEv(e.tenantID, id, msgID, "delivered", "ev-delivered-"+id, time.Now().Unix()))
	e.h.MustDo(http.StatusOK, http.MethodPost, "/v1/webhooks/sendgrid", "", batch, e.sign(batch)...)
	e.h.AwaitChannel(e.key, id, "email", "delivered", "", 5*time.Second)
	e.h.AwaitStatus(e.key, id, "delivered", 5*time.Second)
}

// TestBulkRedriveByChannel: a bulk redrive filtered by channel redrives only that
// channel's open dead letters.
func TestBulkRedriveByChannel(t *testing.T) {
	t.Parallel()
	e := startFailEnv(t, 10*time.Second)
	e.deadLetterEvery(t, "email", "sms")
	mails := []string{e.mustNotify(t, "queued", nil, "email"), e.mustNotify(t, "queued", nil, "email")}
	sms := e.mustNotify(t, "queued", nil, "sms")
	for _, id := range mails {
		e.h.AwaitChannel(e.key, id, "email", "failed", "dead_lettered", 15*time.Second)
	}
	e.h.AwaitChannel(e.key, sms, "sms", "failed", "dead_lettered", 15*time.Second)
	if items := deadLetters(t, e.h, e.key, ""); len(items) != 3 {
		t.Fatalf("%d open dead letters, want 3", len(items))
	}
	twilioCalls := e.tw.Calls()

	for body, field := range map[string]string{`{"channel":"fax"}`: "channel", `{"limit":5000}`: "limit", `{"since":"yesterday"}`: "since",
		`{"until":"2026-01-01"}`: "until", `{"status":"open"}`: "status", `{"limit":"ten"}`: "limit"} {
		r := e.h.Do(http.MethodPost, "/v1/dead-letters/redrive", e.key, body)
		if f, _ := r.ErrorField(); r.Status != http.StatusBadRequest || f != field {
			t.Errorf("bulk redrive %s: %d %s, want 400 naming %s", body, r.Status, r.Body, field)
		}
	}
	apitest.WantError(t, e.h.Do(http.MethodPost, "/v1/dead-letters/redrive", e.key, nil), http.StatusBadRequest, "malformed_json", "")

	e.sg.Recover()
	e.tw.Recover()
	r := e.h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/dead-letters/redrive", e.key,
		map[string]any{"channel": "email", "since": rfc3339(time.Now().Add(-time.Hour)), "limit": 10})
	if r.JSON["matched"] != 2.0 || len(r.JSON["started"].([]any)) != 2 {
		t.Fatalf("bulk redrive: %s", r.Body)
	}
	for _, id := range mails {
		e.h.AwaitChannel(e.key, id, "email", "sent", "", 15*time.Second)
	}
	if e.sg.Accepted() != 2 {
		t.Fatalf("SendGrid accepted %d, want 2", e.sg.Accepted())
	}
	open := deadLetters(t, e.h, e.key, "")
	if len(open) != 1 || deadLetterOf(open, sms, "sms") == nil {
		t.Fatalf("open dead letters after the email redrive: %v", open)
	}
	if e.tw.Calls() != twilioCalls {
		t.Fatalf("the email redrive called Twilio")
	}
	e.h.Eventually(5*time.Second, "email dead letters redriven", func() bool {
		return len(deadLetters(t, e.h, e.key, "?status=redriven&channel=email")) == 2
	})
	// Nothing open is left on email.
	if r := e.h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/dead-letters/redrive", e.key, map[string]any{"channel": "email"}); r.JSON["matched"] != 0.0 {
		t.Fatalf("second email bulk redrive: %s", r.Body)
	}
	// Everything else: the SMS.
	r = e.h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/dead-letters/redrive", e.key, map[string]any{})
	if started := r.JSON["started"].([]any); r.JSON["matched"] != 1.0 || len(started) != 1 || started[0] != deadLetterOf(open, sms, "sms")["id"] {
		t.Fatalf("bulk redrive of the rest: %s", r.Body)
	}
	e.h.AwaitChannel(e.key, sms, "sms", "sent", "", 15*time.Second)
	if e.tw.Accepted() != 1 {
		t.Fatalf("Twilio accepted %d, want 1", e.tw.Accepted())
	}
}

// TestConcurrentRedrivesOfOneDeadLetter: of simultaneous redrives of one open dead
// letter, one starts it and the others answer 409 not_redrivable; it is sent once.
func TestConcurrentRedrivesOfOneDeadLetter(t *testing.T) {
	t.Parallel()
	e := startFailEnv(t, 10*time.Second)
	e.deadLetterEvery(t, "email")
	id := e.mustNotify(t, "queued", nil, "email")
	e.h.AwaitChannel(e.key, id, "email", "failed", "dead_lettered", 15*time.Second)
	d := deadLetterOf(deadLetters(t, e.h, e.key, ""), id, "email")
	e.sg.Recover()
	answers := make([]apitest.Response, 4)
	concurrently(len(answers), func(i int) {
		answers[i] = e.h.Do(http.MethodPost, "/v1/dead-letters/"+dlID(d)+"/redrive", e.key, nil)
	})
	started := 0
	for _, r := range answers {
		_, code := r.ErrorField()
		switch {
		case r.Status == http.StatusAccepted:
			started++
		case r.Status == http.StatusConflict && code == "not_redrivable":
		default:
			t.Errorf("concurrent redrive answered %d %s", r.Status, r.Body)
		}
	}
	if started != 1 {
		t.Errorf("%d redrives started, want 1", started)
	}
	e.h.AwaitChannel(e.key, id, "email", "sent", "", 15*time.Second)
	if e.sg.Accepted() != 1 {
		t.Fatalf("accepted %d, want 1", e.sg.Accepted())
	}
}
