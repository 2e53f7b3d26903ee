package api_test

// Probes for "accepted, then stuck forever": each input here used to be
// accepted (202) and then never reach a final status, or be delivered other than
// the preview showed. Each test fails if its fix is undone.

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/templates"
)

// hardEnv is a harness with one tenant, the user "ada" (email and phone) and the
// templates the probes use.
type hardEnv struct {
	h   *apitest.Harness
	key string
}

// bigRange renders .s once per element of .r: with 1 KiB of '<' and 255
// elements, 255 KiB of text, which is 1.5 MiB as JSON (each '<' is \u003c).
const bigRange = `{{range .r}}{{$.s}}{{end}}`

func startHardEnv(t *testing.T, opts apitest.Options) hardEnv {
	t.Helper()
	h := apitest.Start(t, opts)
	_, key := h.Tenant("hardening")
	h.Template(key, templates.Template{ID: "num", Category: "c",
		InApp: &templates.InAppContent{Title: "n", Body: "x={{.x}}"},
		Email: &templates.EmailContent{Subject: "x={{.x}}", Text: "x={{.x}}"}})
	h.Template(key, apitest.SimpleTemplate("simple"))
	h.Template(key, templates.Template{ID: "big", Category: "c",
		InApp: &templates.InAppContent{Title: bigRange, Body: bigRange},
		Email: &templates.EmailContent{Subject: "big", Text: bigRange}})
	// Small in English, over the bound in German (3 MiB as JSON, over Temporal's
	// 2 MiB too): a user switching to German after acceptance gets content the
	// submit-time check could not see.
	h.Template(key, templates.Template{ID: "localized", Category: "c",
		Email:   &templates.EmailContent{Subject: "hi", Text: "hello"},
		Locales: map[string]templates.Variant{"de": {Email: &templates.EmailContent{Subject: bigRange, Text: bigRange}}}})
	h.Template(key, templates.Template{ID: "chatty", Category: "c", SMS: &templates.SMSContent{Text: `{{range .r}}{{$.s}}{{end}}`}})
	hardDo(t, h, http.StatusCreated, http.MethodPut, "/v1/users/ada", key,
		map[string]any{"email": "ada@example.com", "phone": "+14155550100", "locale": "en"})
	return hardEnv{h: h, key: key}
}

var hardSeq atomic.Int64

// body is a request for ada with a fresh idempotency key; data is raw JSON.
func (e hardEnv) body(template, data string, channels ...string) string {
	ch := ""
	if len(channels) > 0 {
		ch = `,"channels":["` + strings.Join(channels, `","`) + `"]`
	}
	return fmt.Sprintf(`{"user_id":"ada","template_id":%q,"data":%s%s,"idempotency_key":"hard-%d-%d"}`,
		template, data, ch, time.Now().UnixNano(), hardSeq.Add(1))
}

func (e hardEnv) post(body string) apitest.Response {
	e.h.T.Helper()
	return e.h.Do(http.MethodPost, "/v1/notifications", e.key, body)
}

// final waits until the notification's status is final and returns it.
func (e hardEnv) final(t *testing.T, id string) apitest.Response {
	t.Helper()
	var last apitest.Response
	e.h.Eventually(20*time.Second, "notification "+id+" to reach a final status", func() bool {
		last = e.h.Do(http.MethodGet, "/v1/notifications/"+id, e.key, nil)
		return last.Status == http.StatusOK && finalStatus(statusOf(last))
	})
	return last
}

func finalStatus(s herald.NotificationStatus) bool {
	switch s {
	case herald.NotificationDelivered, herald.NotificationSent, herald.NotificationFailed, herald.NotificationSuppressed,
		herald.NotificationCancelled, herald.NotificationPartiallyFailed,
		herald.NotificationDigested, herald.NotificationThrottled: // a flow event's own ends (its digest sends on)
		return true
	}
	return false
}

func hardDo(t *testing.T, h *apitest.Harness, want int, method, path, key string, body any) apitest.Response {
	t.Helper()
	r := h.Do(method, path, key, body)
	if r.Status != want {
		t.Fatalf("%s %s: got %d, want %d: %s", method, path, r.Status, want, r.Body)
	}
	return r
}

func hardWantError(t *testing.T, r apitest.Response, status int, code, field string) {
	t.Helper()
	gotField, gotCode := r.ErrorField()
	if r.Status != status || gotCode != code || gotField != field {
		t.Fatalf("got %d %s/%q, want %d %s/%q: %s", r.Status, gotCode, gotField, status, code, field, r.Body)
	}
}

func hardChannel(r apitest.Response, ch string) map[string]any {
	for _, c := range r.JSON["channels"].([]any) {
		if m := c.(map[string]any); m["channel"] == ch {
			return m
		}
	}
	return nil
}

// Numbers: what is delivered is what the preview shows, digit for digit; what no
// delivery can render exactly is refused, naming the field.
func TestAcceptKeepsNumbersExact(t *testing.T) {
	t.Parallel()
	e := startHardEnv(t, apitest.Options{})
	for _, tc := range []struct{ sent, want string }{
		{"9007199254740993", "9007199254740993"}, // 2^53 + 1: was delivered as ...992
		{"123456789012345678901234567890", "123456789012345678901234567890"},
		{"12345678.9", "12345678.9"}, // was 1.23456789e+07
		{"0.00001", "0.00001"},       // was 1e-05
	} {
		preview := hardDo(t, e.h, http.StatusOK, http.MethodPost, "/v1/templates/num/preview", e.key, `{"data":{"x":`+tc.sent+`}}`)
		email := preview.JSON["channels"].(map[string]any)["email"].(map[string]any)["email"].(map[string]any)
		if email["text"] != "x="+tc.want {
			t.Errorf("%s: preview renders %v, want x=%s", tc.sent, email["text"], tc.want)
		}
		r := e.post(e.body("num", `{"x":`+tc.sent+`}`))
		if r.Status != http.StatusAccepted {
			t.Fatalf("%s: %d %s", tc.sent, r.Status, r.Body)
		}
		id := r.Str("notification_id")
		if got := e.final(t, id); statusOf(got) != herald.NotificationSent && statusOf(got) != herald.NotificationDelivered {
			t.Fatalf("%s: %s", tc.sent, got.Body)
		}
		inbox := hardDo(t, e.h, http.StatusOK, http.MethodGet, "/v1/users/ada/inbox?limit=1", e.key, nil)
		if item := inbox.JSON["items"].([]any)[0].(map[string]any); item["notification_id"] != id || item["body"] != "x="+tc.want {
			t.Errorf("%s: inbox has %v, want x=%s (as the preview)", tc.sent, item["body"], tc.want)
		}
		sent := hardDo(t, e.h, http.StatusOK, http.MethodGet, "/v1/sandbox/messages?notification_id="+id, e.key, nil)
		if items := sent.JSON["items"].([]any); len(items) != 1 || items[0].(map[string]any)["body"] != "x="+tc.want {
			t.Errorf("%s: email sent %s, want x=%s", tc.sent, sent.Body, tc.want)
		}
	}
	for _, sent := range []string{"1e999", "-1e999", "1e-400", "0.1000000000000000055511151231257827"} {
		hardWantError(t, e.post(e.body("num", `{"x":`+sent+`}`)), http.StatusBadRequest, "invalid_field", "data.x")
		hardWantError(t, e.h.Do(http.MethodPost, "/v1/templates/num/preview", e.key, `{"data":{"x":`+sent+`}}`),
			http.StatusBadRequest, "invalid_field", "data.x")
	}
	hardWantError(t, e.post(e.body("num", `{"x":1,"order":{"lines":[{"qty":1e999}]}}`)), http.StatusBadRequest, "invalid_field", "data.order.lines[0].qty")
}

// Strings no channel can carry are refused, naming the field (a NUL used to be
// accepted and then fail the inbox insert, retried for a day).
func TestAcceptRefusesTextNoChannelCanCarry(t *testing.T) {
	t.Parallel()
	e := startHardEnv(t, apitest.Options{NoWorker: true})
	for _, tc := range []struct{ data, field string }{
		{`{"body":"a\u0000b"}`, "data.body"},
		{`{"body":"ok","list":["x","\u0000"]}`, "data.list[1]"},
		{`{"a\u0000b":"key"}`, `data["a\u0000b"]`},
		{"{\"body\":\"caf\xc3\"}", "data.body"},
		{`{"body":"\ud800"}`, "data.body"},
	} {
		hardWantError(t, e.post(e.body("simple", tc.data, "in_app")), http.StatusBadRequest, "invalid_field", tc.field)
	}
	// A U+FFFD the client sent as such, and a proper surrogate pair, are text.
	if r := e.post(e.body("simple", `{"body":"\ufffd \ud83d\ude00"}`, "in_app")); r.Status != http.StatusAccepted {
		t.Fatalf("valid text refused: %d %s", r.Status, r.Body)
	}
}

// Content over the bound is refused at submit time with the channel named; the
// preview says the same. It used to be accepted, after which Temporal terminated
// the run on the oversized payload: the in-app message was delivered but the
// dedup key released (the same idempotency key delivered it again), the email
// stayed "sending" forever.
func TestAcceptRefusesOversizedContent(t *testing.T) {
	t.Parallel()
	e := startHardEnv(t, apitest.Options{NoWorker: true})
	data := `{"s":"` + strings.Repeat("<", 1024) + `","r":[` + strings.TrimSuffix(strings.Repeat("1,", 255), ",") + `]}`
	for _, ch := range []string{"in_app", "email"} {
		r := e.post(e.body("big", data, ch))
		hardWantError(t, r, http.StatusUnprocessableEntity, "content_too_large", "data")
		if got := r.JSON["error"].(map[string]any)["channel"]; got != ch {
			t.Fatalf("the error names channel %s: %s", ch, r.Body)
		}
	}
	p := e.h.Do(http.MethodPost, "/v1/templates/big/preview", e.key, `{"data":`+data+`}`)
	hardWantError(t, p, http.StatusUnprocessableEntity, "content_too_large", "data")
	// Well under the bound is accepted.
	small := `{"s":"` + strings.Repeat("<", 100) + `","r":[1,1,1]}`
	if r := e.post(e.body("big", small)); r.Status != http.StatusAccepted {
		t.Fatalf("small content refused: %d %s", r.Status, r.Body)
	}
	// A channel that cannot render the data is refused now too, naming it: an SMS
	// of more than 10 segments.
	r := e.post(e.body("chatty", `{"s":"`+strings.Repeat("a", 200)+`","r":[1,1,1,1,1,1,1,1,1,1]}`))
	hardWantError(t, r, http.StatusUnprocessableEntity, "render_failed", "data")
	if r.JSON["error"].(map[string]any)["channel"] != "sms" {
		t.Fatalf("the render error names the channel: %s", r.Body)
	}
}

// Oversized content the submit-time check could not see (the user switched to a
// locale whose variant is over the bound) fails the channel visibly in the
// worker, with the reason; the run is not terminated, so it still deduplicates.
func TestOversizedContentAfterAcceptFailsVisibly(t *testing.T) {
	t.Parallel()
	e := startHardEnv(t, apitest.Options{NoWorker: true})
	data := `{"s":"` + strings.Repeat("<", 1024) + `","r":[` + strings.TrimSuffix(strings.Repeat("1,", 255), ",") + `]}`
	body := e.body("localized", data, "email")
	r := e.post(body)
	if r.Status != http.StatusAccepted {
		t.Fatalf("submit: %d %s", r.Status, r.Body)
	}
	id := r.Str("notification_id")
	hardDo(t, e.h, http.StatusOK, http.MethodPut, "/v1/users/ada", e.key, map[string]any{"email": "ada@example.com", "locale": "de"})
	e.h.StartWorkers(1)
	got := e.final(t, id)
	email := hardChannel(got, "email")
	if statusOf(got) != herald.NotificationFailed || email["status"] != string(herald.DeliveryFailed) || email["reason"] != string(herald.ReasonContentTooLarge) ||
		!strings.Contains(fmt.Sprint(email["last_error"]), "524288") {
		t.Fatalf("want email failed with reason content_too_large: %s", got.Body)
	}
	hardDo(t, e.h, http.StatusOK, http.MethodPut, "/v1/users/ada", e.key, map[string]any{"email": "ada@example.com", "locale": "en"})
	if dup := e.post(body); dup.Status != http.StatusOK || dup.Str("dedup") != "duplicate" || dup.Str("notification_id") != id {
		t.Fatalf("the run must still hold its dedup key: %d %s", dup.Status, dup.Body)
	}
}

// A retry override Temporal would refuse is refused by PUT /v1/settings, naming
// the field; one stored anyway (before the check existed, or written around the
// API) is replaced by the default in the workflow, so sends go out instead of
// every provider send being refused and the run hanging with its dedup key.
func TestRetryOverridesAreValidatedWhole(t *testing.T) {
	t.Parallel()
	e := startHardEnv(t, apitest.Options{})
	for _, tc := range []struct {
		policy map[string]any
		field  string
	}{
		{map[string]any{"initial_interval": "10m"}, "retry_policies.email.initial_interval"},   // over the default maximum (5m)
		{map[string]any{"maximum_interval": "500ms"}, "retry_policies.email.maximum_interval"}, // under the default initial (1s)
		{map[string]any{"initial_interval": "2m", "maximum_interval": "1m"}, "retry_policies.email.initial_interval"},
		{map[string]any{"initial_interval": "30s", "expiration": "10s"}, "retry_policies.email.expiration"},
		{map[string]any{"backoff_coefficient": 0.5}, "retry_policies.email.backoff_coefficient"},
		{map[string]any{"maximum_attempts": -1}, "retry_policies.email.maximum_attempts"},
		{map[string]any{"initial_interval": "-1s"}, "retry_policies.email.initial_interval"},
	} {
		r := e.h.Do(http.MethodPut, "/v1/settings", e.key, map[string]any{"retry_policies": map[string]any{"email": tc.policy}})
		hardWantError(t, r, http.StatusBadRequest, "invalid_field", tc.field)
	}
	ok := hardDo(t, e.h, http.StatusOK, http.MethodPut, "/v1/settings", e.key,
		map[string]any{"retry_policies": map[string]any{"email": map[string]any{"initial_interval": "10m", "maximum_interval": "20m"}}})
	if p := ok.JSON["retry_policies"].(map[string]any)["email"].(map[string]any); p["initial_interval"] != "10m0s" {
		t.Fatalf("a consistent override is kept: %s", ok.Body)
	}

	// Store an invalid override directly: the workflow must fall back to the default.
	tenantID := e.tenantID(t)
	if err := e.h.Store.UpdateTenantSettings(context.Background(), tenantID, func(ts *store.TenantSettings) {
		ts.RetryPolicies = map[herald.Channel]herald.RetryPolicy{herald.ChannelEmail: {InitialInterval: herald.Duration{Duration: 10 * time.Minute}}}
	}); err != nil {
		t.Fatal(err)
	}
	r := e.post(e.body("simple", `{}`, "email"))
	if r.Status != http.StatusAccepted {
		t.Fatalf("submit: %d %s", r.Status, r.Body)
	}
	if got := e.final(t, r.Str("notification_id")); statusOf(got) != herald.NotificationSent && statusOf(got) != herald.NotificationDelivered {
		t.Fatalf("want the email sent with the default retry policy: %s", got.Body)
	}
}

func (e hardEnv) tenantID(t *testing.T) string {
	t.Helper()
	tn, err := e.h.Store.TenantByAPIKey(context.Background(), e.key)
	if err != nil {
		t.Fatal(err)
	}
	return tn.ID
}

// The same strings are refused in every request body, naming the field, instead
// of a 500 from PostgreSQL (a user's name, a template's content).
func TestBodiesRefuseTextNoColumnCanHold(t *testing.T) {
	t.Parallel()
	e := startHardEnv(t, apitest.Options{NoWorker: true})
	hardWantError(t, e.h.Do(http.MethodPut, "/v1/users/zed", e.key, `{"name":"a\u0000b"}`), http.StatusBadRequest, "invalid_field", "name")
	hardWantError(t, e.h.Do(http.MethodPut, "/v1/templates/nul", e.key, `{"category":"c","in_app":{"body":"a\u0000b"}}`),
		http.StatusBadRequest, "invalid_field", "in_app.body")
	// A template whose output would carry a NUL fails to render: 422 at submit.
	e.h.Template(e.key, templates.Template{ID: "nul_literal", Category: "c", InApp: &templates.InAppContent{Body: `a{{"\x00"}}b`}})
	r := e.post(e.body("nul_literal", `{}`))
	hardWantError(t, r, http.StatusUnprocessableEntity, "render_failed", "data")
}
