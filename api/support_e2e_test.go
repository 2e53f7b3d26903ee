package api_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/herald"
)

func supportItems(t *testing.T, r apitest.Response) []map[string]any {
	t.Helper()
	raw, ok := r.JSON["items"].([]any)
	if !ok {
		t.Fatalf("no items: %d %s", r.Status, r.Body)
	}
	out := make([]map[string]any, len(raw))
	for i, it := range raw {
		out[i] = it.(map[string]any)
	}
	return out
}

func itemIDs(items []map[string]any) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it["notification_id"].(string)
	}
	return out
}

// The support view lists a user's notifications newest first with the dedup key
// hash, window end, duplicate count and every channel's outcome and reason;
// filters and pages; resolves a client key; and never shows another tenant's
// notifications, though both tenants use the same user id and the same key.
func TestSupportViewAnswersWhyNot(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	_, keyA := h.TenantWith("shop", e2eTemplates...)
	_, keyB := h.TenantWith("rival", e2eTemplates...)
	h.PutUser(keyA, "ada", map[string]any{"locale": "en-GB"}) // no email address
	createUser(h, keyB, "ada")

	submit := func(key string, body map[string]any) string {
		t.Helper()
		r := h.Submit(key, body)
		if r.Status != http.StatusAccepted {
			t.Fatalf("submit: %d %s", r.Status, r.Body)
		}
		return r.Str("notification_id")
	}
	shipped := map[string]any{"user_id": "ada", "template_id": "order_shipped", "channels": []string{"in_app", "email"},
		"data": map[string]any{"title": "Shipped"}, "idempotency_key": "order-7"}
	a1 := submit(keyA, shipped)
	h.AwaitStatus(keyA, a1, herald.NotificationDelivered, 20*time.Second) // in_app delivered, email suppressed
	for range 2 {
		h.MustDo(http.StatusOK, http.MethodPost, "/v1/notifications", keyA, shipped)
	}
	a2 := submit(keyA, map[string]any{"user_id": "ada", "template_id": "otp", "channels": []string{"in_app"}, "idempotency_key": "otp-1"})
	h.AwaitStatus(keyA, a2, herald.NotificationDelivered, 20*time.Second)
	shippedB := map[string]any{"user_id": "ada", "template_id": "order_shipped", "channels": []string{"in_app"}, "idempotency_key": "order-7"}
	b1 := submit(keyB, shippedB) // same user id, same key, other tenant
	h.AwaitStatus(keyB, b1, herald.NotificationDelivered, 20*time.Second)

	r := h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/ada/notifications", keyA, nil)
	items := supportItems(t, r)
	if got := strings.Join(itemIDs(items), ","); got != a2+","+a1 {
		t.Fatalf("tenant A's view: want [%s %s] newest first, got [%s]", a2, a1, got)
	}
	it := items[1]
	if it["duplicates_suppressed"] != float64(2) || it["template_id"] != "order_shipped" {
		t.Fatalf("dedup counts: %v", it)
	}
	if wf := it["workflow_id"].(string); !strings.HasSuffix(wf, "/"+it["dedup_key_hash"].(string)) {
		t.Fatalf("dedup_key_hash %v is not the workflow's %s", it["dedup_key_hash"], wf)
	}
	first, _ := time.Parse(time.RFC3339Nano, it["first_seen_at"].(string))
	until, err := time.Parse(time.RFC3339Nano, it["dedup_until"].(string))
	if err != nil || !until.After(first.Add(time.Minute)) { // the harness's default window
		t.Fatalf("dedup_until %v should be a window after first_seen_at %v", it["dedup_until"], it["first_seen_at"])
	}
	nd := it["not_delivered"].([]any)
	if len(nd) != 1 || nd[0].(map[string]any)["channel"] != "email" || nd[0].(map[string]any)["reason"] != string(herald.ReasonNoAddress) {
		t.Fatalf("not_delivered should name email / no_address: %v", it["not_delivered"])
	}
	if chans := it["channels"].([]any); len(chans) != 2 || chans[1].(map[string]any)["status"] != "delivered" {
		t.Fatalf("channels: %v", it["channels"])
	}

	// Filters.
	for q, want := range map[string]string{
		"template_id=otp":  a2,
		"status=delivered": a2 + "," + a1,
		"status=failed":    "",
		"until=" + url.QueryEscape(time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)): "",
		"since=" + url.QueryEscape(time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)): a2 + "," + a1,
	} {
		got := strings.Join(itemIDs(supportItems(t, h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/ada/notifications?"+q, keyA, nil))), ",")
		if got != want {
			t.Fatalf("?%s: want [%s], got [%s]", q, want, got)
		}
	}
	apitest.WantError(t, h.Do(http.MethodGet, "/v1/users/ada/notifications?status=lost", keyA, nil), http.StatusBadRequest, "invalid_field", "status")
	apitest.WantError(t, h.Do(http.MethodGet, "/v1/users/ada/notifications?since=yesterday", keyA, nil), http.StatusBadRequest, "invalid_field", "since")
	apitest.WantError(t, h.Do(http.MethodGet, "/v1/users/nobody/notifications", keyA, nil), http.StatusNotFound, "not_found", "")

	// Pages of one walk the list once.
	var walked []string
	path := "/v1/users/ada/notifications?limit=1"
	for range 5 {
		page := h.MustDo(http.StatusOK, http.MethodGet, path, keyA, nil)
		walked = append(walked, itemIDs(supportItems(t, page))...)
		next, _ := page.JSON["next_cursor"].(string)
		if next == "" {
			break
		}
		path = "/v1/users/ada/notifications?limit=1&cursor=" + url.QueryEscape(next)
	}
	if got := strings.Join(walked, ","); got != a2+","+a1 {
		t.Fatalf("paging by one: %s", got)
	}

	// Tenant isolation: B sees only its own notification, for the same user id and key.
	if got := strings.Join(itemIDs(supportItems(t, h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/ada/notifications", keyB, nil))), ","); got != b1 {
		t.Fatalf("tenant B's view: want [%s], got [%s]", b1, got)
	}
	for key, want := range map[string]string{keyA: a1, keyB: b1} {
		got := itemIDs(supportItems(t, h.MustDo(http.StatusOK, http.MethodGet, "/v1/notifications?dedup_key=order-7", key, nil)))
		if len(got) != 1 || got[0] != want {
			t.Fatalf("dedup_key=order-7: want [%s], got %v", want, got)
		}
	}
	byHash := supportItems(t, h.MustDo(http.StatusOK, http.MethodGet, "/v1/notifications?dedup_key_hash="+it["dedup_key_hash"].(string), keyA, nil))
	if len(byHash) != 1 || byHash[0]["notification_id"] != a1 {
		t.Fatalf("dedup_key_hash: %v", byHash)
	}
	if got := supportItems(t, h.MustDo(http.StatusOK, http.MethodGet, "/v1/notifications?dedup_key=never-used", keyA, nil)); len(got) != 0 {
		t.Fatalf("an unused key lists %v", got)
	}
	apitest.WantError(t, h.Do(http.MethodGet, "/v1/notifications", keyA, nil), http.StatusBadRequest, "missing_field", "dedup_key")
	apitest.WantError(t, h.Do(http.MethodGet, "/v1/notifications?dedup_key_hash=xyz", keyA, nil), http.StatusBadRequest, "invalid_field", "dedup_key_hash")
	h.MustDo(http.StatusNotFound, http.MethodGet, "/v1/notifications/"+a1, keyB, nil)
}
