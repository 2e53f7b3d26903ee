package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/templates"
)

// e2eTemplates are the templates every tenant of these tests has (SimpleTemplate).
var e2eTemplates = []string{"digest", "hi", "like", "order_shipped", "otp", "t"}

func TestSubmitDeliversToInbox(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	_, key := h.TenantWith("shop", e2eTemplates...)
	createUser(h, key, "ada")

	r := h.Submit(key, map[string]any{
		"user_id": "ada", "template_id": "order_shipped", "channels": []string{"in_app"},
		"data": map[string]any{"title": "Order shipped", "body": "Order #1234 is on its way"}, "idempotency_key": "order-1234-shipped",
	})
	if r.Status != http.StatusAccepted || r.Str("dedup") != "new" || r.Str("status") != "queued" {
		t.Fatalf("submit: %d %s", r.Status, r.Body)
	}
	id := r.Str("notification_id")

	got := waitDelivered(h, key, id)
	chans := got.JSON["channels"].([]any)
	if len(chans) != 1 {
		t.Fatalf("want one channel, got %s", got.Body)
	}
	ch := chans[0].(map[string]any)
	if ch["channel"] != "in_app" || ch["status"] != "delivered" || ch["attempts"].(float64) != 1 || ch["delivered_at"] == nil {
		t.Fatalf("unexpected channel state: %s", got.Body)
	}
	if got.Str("workflow_id") == "" || got.Str("run_id") == "" {
		t.Fatalf("status must name the workflow for the Temporal UI: %s", got.Body)
	}

	inbox := h.Do(http.MethodGet, "/v1/users/ada/inbox", key, nil)
	items := inbox.JSON["items"].([]any)
	if inbox.Status != http.StatusOK || len(items) != 1 {
		t.Fatalf("inbox: %d %s", inbox.Status, inbox.Body)
	}
	item := items[0].(map[string]any)
	if item["notification_id"] != id || item["title"] != "Order shipped" || item["body"] != "Order #1234 is on its way" || item["read_at"] != nil {
		t.Fatalf("inbox item: %s", inbox.Body)
	}

	read := h.Do(http.MethodPost, "/v1/users/ada/inbox/"+id+"/read", key, nil)
	if read.Status != http.StatusOK || read.JSON["read_at"] == nil {
		t.Fatalf("mark read: %d %s", read.Status, read.Body)
	}
	unread := h.Do(http.MethodGet, "/v1/users/ada/inbox?unread=true", key, nil)
	if n := len(unread.JSON["items"].([]any)); n != 0 {
		t.Fatalf("unread filter: want 0 items, got %d", n)
	}

	// The workflow is searchable by tenant, user and status in the Temporal UI.
	tenantID := tenantOfKey(t, h, key)
	query := fmt.Sprintf("HeraldTenant = '%s' AND HeraldUser = 'ada' AND HeraldStatus = 'delivered'", tenantID)
	h.Eventually(15*time.Second, "visibility to index the workflow", func() bool {
		n, err := h.Temporal.CountWorkflow(context.Background(), countRequest(query))
		return err == nil && n.GetCount() == 1
	})
}

func TestConcurrentDuplicatesCollapseToOne(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	tenantID, key := h.TenantWith("social", e2eTemplates...)
	createUser(h, key, "bob")
	body := map[string]any{"user_id": "bob", "template_id": "like", "channels": []string{"in_app"},
		"data": map[string]any{"liker": "carol"}, "idempotency_key": "like-42"}

	const n = 200
	responses := make([]apitest.Response, n)
	concurrently(n, func(i int) { responses[i] = h.Submit(key, body) })

	ids := map[string]int{}
	news := 0
	for _, r := range responses {
		switch {
		case r.Status == http.StatusAccepted && r.Str("dedup") == "new":
			news++
		case r.Status == http.StatusOK && r.Str("dedup") == "duplicate":
			if r.Str("original_accepted_at") == "" {
				t.Errorf("duplicate without original_accepted_at: %s", r.Body)
			}
		default:
			t.Fatalf("unexpected response %d %s", r.Status, r.Body)
		}
		ids[r.Str("notification_id")]++
	}
	if news != 1 || len(ids) != 1 {
		t.Fatalf("want exactly one new and one id, got %d new and ids %v", news, ids)
	}
	var id string
	for k := range ids {
		id = k
	}
	waitDelivered(h, key, id)
	if c, err := h.Store.CountInbox(context.Background(), tenantID, "bob", id); err != nil || c != 1 {
		t.Fatalf("want one inbox row, got %d (%v)", c, err)
	}
	inbox := h.Do(http.MethodGet, "/v1/users/bob/inbox", key, nil)
	if n := len(inbox.JSON["items"].([]any)); n != 1 {
		t.Fatalf("want one inbox item for the user, got %d", n)
	}
	// A retry after delivery still returns the original id, now with its status.
	again := h.Submit(key, body)
	if again.Status != http.StatusOK || again.Str("notification_id") != id || statusOf(again) != herald.NotificationDelivered {
		t.Fatalf("late duplicate: %d %s", again.Status, again.Body)
	}
	// Every duplicate was counted: the 199 of the storm and the late one.
	if got := h.MustDo(http.StatusOK, http.MethodGet, "/v1/notifications/"+id, key, nil).JSON["duplicates_suppressed"]; got != float64(n) {
		t.Fatalf("duplicates_suppressed = %v, want %d", got, n)
	}
}

func TestSameContentWithoutKeyDedups(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	_, key := h.TenantWith("saas", e2eTemplates...)
	createUser(h, key, "cy")
	first := h.Submit(key, map[string]any{"user_id": "cy", "template_id": "digest", "channels": []string{"in_app"},
		"data": map[string]any{"a": 1, "nested": map[string]any{"x": "1", "y": []any{1, 2}}}})
	// Same content, keys in another order at every depth.
	second := h.Submit(key,
		`{"channels":["in_app"],"data":{"nested":{"y":[1,2],"x":"1"},"a":1},"template_id":"digest","user_id":"cy"}`)
	different := h.Submit(key, map[string]any{"user_id": "cy", "template_id": "digest", "channels": []string{"in_app"},
		"data": map[string]any{"a": 2, "nested": map[string]any{"x": "1", "y": []any{1, 2}}}})
	if first.Status != http.StatusAccepted || second.Status != http.StatusOK || second.Str("dedup") != "duplicate" {
		t.Fatalf("want new then duplicate, got %d %s / %d %s", first.Status, first.Body, second.Status, second.Body)
	}
	if first.Str("notification_id") != second.Str("notification_id") {
		t.Fatal("duplicate must return the original id")
	}
	if different.Status != http.StatusAccepted || different.Str("notification_id") == first.Str("notification_id") {
		t.Fatalf("different data must be a new notification: %d %s", different.Status, different.Body)
	}
}

func TestShortDedupWindowExpires(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	_, key := h.TenantWith("shop", e2eTemplates...)
	createUser(h, key, "dee")
	body := map[string]any{"user_id": "dee", "template_id": "otp", "channels": []string{"in_app"},
		"data": map[string]any{"code": "123456"}, "idempotency_key": "otp-1", "dedup_ttl_sec": 2}
	first := h.Accept(key, body)
	if dup := h.Submit(key, body); dup.Status != http.StatusOK || dup.Str("notification_id") != first {
		t.Fatalf("inside the window: %d %s", dup.Status, dup.Body)
	}
	waitDelivered(h, key, first)
	var later apitest.Response
	h.Eventually(20*time.Second, "the dedup window to pass", func() bool {
		later = h.Submit(key, body)
		return later.Status == http.StatusAccepted
	})
	if later.Str("dedup") != "new" || later.Str("notification_id") == first {
		t.Fatalf("after the window: want a new id, got %s", later.Body)
	}
	waitDelivered(h, key, later.Str("notification_id"))
	// The first notification's status is still readable after its run closed.
	h.MustDo(http.StatusOK, http.MethodGet, "/v1/notifications/"+first, key, nil)
}

func TestTenantsCannotSeeEachOther(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	_, keyA := h.TenantWith("a", e2eTemplates...)
	_, keyB := h.TenantWith("b", e2eTemplates...)
	createUser(h, keyA, "eve")
	id := h.Accept(keyA, map[string]any{"user_id": "eve", "template_id": "hi", "channels": []string{"in_app"}, "idempotency_key": "k"})
	waitDelivered(h, keyA, id)
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/v1/notifications/" + id},
		{http.MethodGet, "/v1/users/eve"},
		{http.MethodGet, "/v1/users/eve/inbox"},
		{http.MethodPost, "/v1/users/eve/inbox/" + id + "/read"},
	} {
		got := h.Do(c.method, c.path, keyB, nil)
		if got.Status != http.StatusNotFound {
			t.Errorf("tenant B %s %s: want 404, got %d %s", c.method, c.path, got.Status, got.Body)
		}
	}
	// Tenant B submitting to A's user id: that user does not exist for B.
	if got := h.Submit(keyB, map[string]any{"user_id": "eve", "template_id": "hi", "channels": []string{"in_app"}}); got.Status != http.StatusUnprocessableEntity {
		t.Errorf("tenant B submit to A's user: want 422, got %d", got.Status)
	}
	// The same idempotency key in tenant B is a different notification.
	createUser(h, keyB, "eve")
	b := h.Submit(keyB, map[string]any{"user_id": "eve", "template_id": "hi", "channels": []string{"in_app"}, "idempotency_key": "k"})
	if b.Status != http.StatusAccepted || b.Str("notification_id") == id {
		t.Fatalf("tenant B same key: %d %s", b.Status, b.Body)
	}
}

func TestBadInputs(t *testing.T) {
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	_, key := h.TenantWith("shop", e2eTemplates...)
	h.Template(key, templates.Template{ID: "inbox_only", Category: "shipping",
		InApp: &templates.InAppContent{Title: "Order {{.order.id}}", Body: "Hi {{.name}}"}})
	createUser(h, key, "fay")
	valid := `"user_id":"fay","template_id":"t","channels":["in_app"]`
	cases := []struct {
		name      string
		method    string
		path      string
		key       string
		body      any
		status    int
		field     string
		code      string
		headerKey string
	}{
		{"no key", "POST", "/v1/notifications", "", "{" + valid + "}", 401, "Authorization", "missing_api_key", ""},
		{"basic auth", "POST", "/v1/notifications", "", "{" + valid + "}", 401, "Authorization", "missing_api_key", "basic"},
		{"bad key", "POST", "/v1/notifications", "hk_nope", "{" + valid + "}", 401, "Authorization", "invalid_api_key", ""},
		{"malformed json", "POST", "/v1/notifications", key, `{"user_id":`, 400, "", "malformed_json", ""},
		{"empty body", "POST", "/v1/notifications", key, ``, 400, "", "malformed_json", ""},
		{"array body", "POST", "/v1/notifications", key, `[1]`, 400, "", "malformed_json", ""},
		{"missing user_id", "POST", "/v1/notifications", key, `{"template_id":"t","channels":["in_app"]}`, 400, "user_id", "missing_field", ""},
		{"missing template_id", "POST", "/v1/notifications", key, `{"user_id":"fay","channels":["in_app"]}`, 400, "template_id", "missing_field", ""},
		{"bad template_id", "POST", "/v1/notifications", key, `{"user_id":"fay","template_id":"a b","channels":["in_app"]}`, 400, "template_id", "invalid_field", ""},
		{"empty channels", "POST", "/v1/notifications", key, `{"user_id":"fay","template_id":"t","channels":[]}`, 400, "channels", "invalid_field", ""},
		{"unknown template", "POST", "/v1/notifications", key, `{"user_id":"fay","template_id":"nope","channels":["in_app"]}`, 422, "template_id", "unknown_template", ""},
		{"channel not in template", "POST", "/v1/notifications", key, `{"user_id":"fay","template_id":"inbox_only","channels":["sms"]}`, 422, "channels[0]", "channel_not_in_template", ""},
		{"missing variables", "POST", "/v1/notifications", key, `{"user_id":"fay","template_id":"inbox_only","data":{"order":{}}}`, 422, "data", "missing_variables", ""},
		{"unknown channel", "POST", "/v1/notifications", key, `{"user_id":"fay","template_id":"t","channels":["in_app","pigeon"]}`, 400, "channels[1]", "unknown_channel", ""},
		{"duplicate channel", "POST", "/v1/notifications", key, `{"user_id":"fay","template_id":"t","channels":["in_app","in_app"]}`, 400, "channels[1]", "duplicate_channel", ""},
		{"channels wrong type", "POST", "/v1/notifications", key, `{"user_id":"fay","template_id":"t","channels":"in_app"}`, 400, "channels", "invalid_type", ""},
		{"data not object", "POST", "/v1/notifications", key, "{" + valid + `,"data":[1]}`, 400, "data", "invalid_type", ""},
		{"unknown field", "POST", "/v1/notifications", key, "{" + valid + `,"colour":"red"}`, 400, "colour", "unknown_field", ""},
		{"ttl too small", "POST", "/v1/notifications", key, "{" + valid + `,"dedup_ttl_sec":0}`, 400, "dedup_ttl_sec", "invalid_field", ""},
		{"ttl too large", "POST", "/v1/notifications", key, "{" + valid + `,"dedup_ttl_sec":604801}`, 400, "dedup_ttl_sec", "invalid_field", ""},
		{"ttl not integer", "POST", "/v1/notifications", key, "{" + valid + `,"dedup_ttl_sec":1.5}`, 400, "dedup_ttl_sec", "invalid_type", ""},
		{"empty idempotency key", "POST", "/v1/notifications", key, "{" + valid + `,"idempotency_key":""}`, 400, "idempotency_key", "invalid_field", ""},
		{"conflicting idempotency keys", "POST", "/v1/notifications", key, "{" + valid + `,"idempotency_key":"a"}`, 400, "idempotency_key", "conflicting_idempotency_key", "b"},
		{"unknown user", "POST", "/v1/notifications", key, `{"user_id":"nobody","template_id":"t","channels":["in_app"]}`, 422, "user_id", "unknown_user", ""},
		{"body too large", "POST", "/v1/notifications", key, "{" + valid + `,"data":{"x":"` + strings.Repeat("a", 70_000) + `"}}`, 413, "", "body_too_large", ""},
		{"malformed notification id", "GET", "/v1/notifications/n_123", key, nil, 400, "notification_id", "invalid_field", ""},
		{"unknown notification id", "GET", "/v1/notifications/n_" + strings.Repeat("ab", 32), key, nil, 404, "", "not_found", ""},
		{"unknown user get", "GET", "/v1/users/nobody", key, nil, 404, "", "not_found", ""},
		{"bad email", "PUT", "/v1/users/gus", key, `{"email":"not-an-address"}`, 400, "email", "invalid_field", ""},
		{"bad phone", "PUT", "/v1/users/gus", key, `{"phone":"0155 123"}`, 400, "phone", "invalid_field", ""},
		{"bad timezone", "PUT", "/v1/users/gus", key, `{"timezone":"Mars/Olympus"}`, 400, "timezone", "invalid_field", ""},
		{"bad locale", "PUT", "/v1/users/gus", key, `{"locale":"not a locale!"}`, 400, "locale", "invalid_field", ""},
		{"bad inbox limit", "GET", "/v1/users/fay/inbox?limit=0", key, nil, 400, "limit", "invalid_field", ""},
		{"bad inbox cursor", "GET", "/v1/users/fay/inbox?cursor=zzz", key, nil, 400, "cursor", "invalid_field", ""},
		{"bad unread", "GET", "/v1/users/fay/inbox?unread=maybe", key, nil, 400, "unread", "invalid_field", ""},
		{"read unknown inbox item", "POST", "/v1/users/fay/inbox/n_" + strings.Repeat("cd", 32) + "/read", key, nil, 404, "", "not_found", ""},
		{"unknown route", "GET", "/v1/nothing", key, nil, 404, "", "not_found", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var headers []string
			switch c.headerKey {
			case "":
			case "basic":
				headers = []string{"Authorization", "Basic dXNlcjpwYXNz"}
			default:
				headers = []string{"Idempotency-Key", c.headerKey}
			}
			r := h.Do(c.method, c.path, c.key, c.body, headers...)
			field, code := r.ErrorField()
			if r.Status != c.status || field != c.field || code != c.code {
				t.Fatalf("want %d field=%q code=%q, got %d %s", c.status, c.field, c.code, r.Status, r.Body)
			}
			if strings.Contains(string(r.Body), "pgx") || strings.Contains(string(r.Body), "sql") {
				t.Fatalf("error leaks internals: %s", r.Body)
			}
		})
	}
}

func TestAcceptedWithoutWorkerIsVisibleAndQueued(t *testing.T) {
	// No worker: the start is durable, so the id resolves at once (never a 404) and
	// reports "queued" until a worker picks it up.
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	_, key := h.TenantWith("shop", e2eTemplates...)
	createUser(h, key, "hal")
	id := h.Accept(key, map[string]any{"user_id": "hal", "template_id": "t", "channels": []string{"in_app"}})
	got := h.Do(http.MethodGet, "/v1/notifications/"+id, key, nil)
	if got.Status != http.StatusOK || got.Str("status") != "queued" || got.Str("workflow_id") == "" ||
		got.Str("user_id") != "hal" || got.Str("template_id") != "t" {
		t.Fatalf("status of a queued notification: %d %s", got.Status, got.Body)
	}
	if chans := got.JSON["channels"].([]any); len(chans) != 1 || chans[0].(map[string]any)["status"] != "pending" {
		t.Fatalf("a queued notification lists its channels as pending: %s", got.Body)
	}
	dup := h.Submit(key, map[string]any{"user_id": "hal", "template_id": "t", "channels": []string{"in_app"}})
	if dup.Status != http.StatusOK || dup.Str("status") != "queued" || dup.Str("original_accepted_at") == "" {
		t.Fatalf("duplicate of a queued notification: %d %s", dup.Status, dup.Body)
	}
}
