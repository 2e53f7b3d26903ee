package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/testenv"
)

// Every change a tenant makes is in its audit log with the id of the key that
// made it, when, the action, the target and what changed; a provider secret and
// a push token never appear (neither in the answer nor in the table); failed
// changes are not recorded; another tenant sees none of it; the log filters by
// action and time and pages.
func TestAuditLogRecordsEveryChangeWithoutSecrets(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	tenantID, key := h.TenantWith("shop", e2eTemplates...)
	_, otherKey := h.Tenant("rival")
	createUser(h, key, "ada")
	const secret = "SG.audit-test-SECRET-9d8c7b6a"
	const pushToken = "device-token-AUDIT-5e4f3a2b1c"
	before := time.Now().Add(-time.Second)

	keys := h.MustDo(http.StatusOK, http.MethodGet, "/v1/api-keys", key, nil)
	firstKeyID := keys.JSON["items"].([]any)[0].(map[string]any)["id"].(string)
	created := h.MustDo(http.StatusCreated, http.MethodPost, "/v1/api-keys", key, map[string]any{"name": "ops"})
	second, secondID := created.Str("key"), created.Str("id")

	h.MustDo(http.StatusCreated, http.MethodPut, "/v1/templates/promo", second, map[string]any{"category": "marketing", "in_app": map[string]any{"title": "Sale", "body": "Now"}})
	h.MustDo(http.StatusCreated, http.MethodPut, "/v1/providers/email", key, map[string]any{
		"provider": "sendgrid", "settings": map[string]any{"from": "noreply@acme.example"}, "credentials": map[string]any{"api_key": secret}})
	h.MustDo(http.StatusOK, http.MethodPut, "/v1/settings", key, map[string]any{"default_locale": "de-AT"})
	h.MustDo(http.StatusOK, http.MethodPut, "/v1/preferences/defaults", key, map[string]any{"categories": map[string]any{"marketing": map[string]any{"enabled": false}}})
	h.MustDo(http.StatusOK, http.MethodPut, "/v1/users/ada/preferences", key, map[string]any{"channels": map[string]any{"sms": false}})
	h.MustDo(http.StatusCreated, http.MethodPut, "/v1/users/ada/push-tokens", key, map[string]any{"token": pushToken, "platform": "android"})
	h.MustDo(http.StatusNoContent, http.MethodDelete, "/v1/users/ada/push-tokens/"+pushToken, key, nil)
	id := h.Accept(key, map[string]any{"user_id": "ada", "template_id": "t", "channels": []string{"in_app"},
		"send_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "idempotency_key": "audit-cancel"})
	h.Eventually(10*time.Second, "cancel", func() bool {
		return h.Do(http.MethodDelete, "/v1/notifications/"+id, key, nil).Status == http.StatusOK
	})
	h.MustDo(http.StatusNoContent, http.MethodDelete, "/v1/providers/email/sendgrid", key, nil)
	list := h.MustDo(http.StatusCreated, http.MethodPost, "/v1/lists", key, "user_id\nada\n", "Content-Type", "text/csv")
	listID := list.Str("list_id")
	if r := h.Do(http.MethodDelete, "/v1/lists/"+listID, key, nil); r.Status >= 300 {
		t.Fatalf("delete list: %d %s", r.Status, r.Body)
	}
	h.MustDo(http.StatusOK, http.MethodDelete, "/v1/api-keys/"+secondID, key, nil)
	// Refused changes are not changes.
	h.MustDo(http.StatusBadRequest, http.MethodPut, "/v1/settings", key, map[string]any{"default_locale": 7})
	h.MustDo(http.StatusNotFound, http.MethodDelete, "/v1/templates/nope", key, nil)

	log := h.MustDo(http.StatusOK, http.MethodGet, "/v1/audit-log", key, nil)
	for _, leak := range []string{secret, pushToken, second} {
		if strings.Contains(string(log.Body), leak) {
			t.Fatalf("the audit log shows a secret %q: %s", leak, log.Body)
		}
	}
	var raw string
	if err := testenv.Pool(t).QueryRow(context.Background(),
		`SELECT coalesce(string_agg(target || ' ' || details::text, E'\n'), '') FROM audit_log WHERE tenant_id = $1`, tenantID).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{secret, pushToken, second} {
		if strings.Contains(raw, leak) {
			t.Fatalf("audit_log stores a secret %q: %s", leak, raw)
		}
	}

	items := supportItems(t, log)
	var actions []string
	for i := len(items) - 1; i >= 0; i-- { // oldest first
		actions = append(actions, items[i]["action"].(string))
	}
	want := "user.put api_key.create template.put provider.put settings.put preference_defaults.put preferences.put " +
		"push_token.put push_token.delete notification.cancel provider.delete list.create list.delete api_key.revoke"
	if got := strings.Join(actions, " "); got != want {
		t.Fatalf("actions, oldest first:\n got %s\nwant %s", got, want)
	}
	byAction := map[string]map[string]any{}
	for _, it := range items {
		byAction[it["action"].(string)] = it
		at, err := time.Parse(time.RFC3339Nano, it["at"].(string))
		if err != nil || at.Before(before) || at.After(time.Now().Add(time.Second)) {
			t.Fatalf("at %v not within the test", it["at"])
		}
	}
	if e := byAction["template.put"]; e["api_key_id"] != secondID || e["target"] != "template_id=promo" ||
		!strings.Contains(mustJSON(t, e["details"]), `"category":"marketing"`) {
		t.Fatalf("template.put by the second key: %v", e)
	}
	if e := byAction["provider.put"]; e["api_key_id"] != firstKeyID || e["target"] != "channel=email" ||
		!strings.Contains(mustJSON(t, e["details"]), `"from":"noreply@acme.example"`) || !strings.Contains(mustJSON(t, e["details"]), `"credentials":"[redacted]"`) {
		t.Fatalf("provider.put: %v", e)
	}
	if e := byAction["settings.put"]; !strings.Contains(mustJSON(t, e["details"]), `"default_locale":"de-AT"`) {
		t.Fatalf("settings.put says what changed: %v", e)
	}
	if e := byAction["user.put"]; e["target"] != "user_id=ada" || mustJSON(t, e["details"]) != `{"fields":["email","locale","timezone"]}` {
		t.Fatalf("user.put names the fields, not the personal data: %v", e)
	}
	if e := byAction["notification.cancel"]; e["target"] != "notification_id="+id {
		t.Fatalf("notification.cancel: %v", e)
	}
	if e := byAction["list.create"]; listID == "" || !strings.Contains(mustJSON(t, e["details"]), `"bytes":12`) {
		t.Fatalf("list.create (%s): %v", list.Body, e)
	}
	if e := byAction["list.delete"]; e["target"] != "list_id="+listID {
		t.Fatalf("list.delete: %v", e)
	}
	if e := byAction["api_key.revoke"]; e["target"] != "api_key_id="+secondID {
		t.Fatalf("api_key.revoke: %v", e)
	}

	// Filters and pages.
	if got := supportItems(t, h.MustDo(http.StatusOK, http.MethodGet, "/v1/audit-log?action=provider.put", key, nil)); len(got) != 1 {
		t.Fatalf("action filter: %v", got)
	}
	future := url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	if got := supportItems(t, h.MustDo(http.StatusOK, http.MethodGet, "/v1/audit-log?since="+future, key, nil)); len(got) != 0 {
		t.Fatalf("since filter: %v", got)
	}
	if got := supportItems(t, h.MustDo(http.StatusOK, http.MethodGet, "/v1/audit-log?until="+future, key, nil)); len(got) != len(items) {
		t.Fatalf("until filter: %d of %d", len(got), len(items))
	}
	apitest.WantError(t, h.Do(http.MethodGet, "/v1/audit-log?action=everything", key, nil), http.StatusBadRequest, "invalid_field", "action")
	var walked []string
	path := "/v1/audit-log?limit=4"
	for range 10 {
		page := h.MustDo(http.StatusOK, http.MethodGet, path, key, nil)
		for _, it := range supportItems(t, page) {
			walked = append(walked, it["action"].(string))
		}
		next, _ := page.JSON["next_cursor"].(string)
		if next == "" {
			break
		}
		path = "/v1/audit-log?limit=4&cursor=" + url.QueryEscape(next)
	}
	if len(walked) != len(items) {
		t.Fatalf("pages of 4 walked %d of %d entries: %v", len(walked), len(items), walked)
	}
	if got := supportItems(t, h.MustDo(http.StatusOK, http.MethodGet, "/v1/audit-log", otherKey, nil)); len(got) != 0 {
		t.Fatalf("another tenant sees %v", got)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
