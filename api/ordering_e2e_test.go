package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
)

// Ordered delivery's inputs (docs/ordering.md): ordering_key on POST
// /v1/notifications, a template's ordering and the tenant's
// ordering_max_hold, each refused with a 400 naming the field when bad.
func TestOrderingInputs(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	_, key := h.TenantWith("shop", e2eTemplates...)
	createUser(h, key, "ada")
	for _, bad := range []any{"", "has space", "ü", strings.Repeat("k", 65), 7, true} {
		apitest.WantError(t, h.Submit(key, map[string]any{"user_id": "ada", "template_id": "hi", "ordering_key": bad}),
			http.StatusBadRequest, map[bool]string{true: "invalid_type", false: "invalid_field"}[bad == 7 || bad == true], "ordering_key")
	}
	apitest.WantError(t, h.Submit(key, map[string]any{"user_id": "ada", "flow_id": "f", "ordering_key": "user"}),
		http.StatusBadRequest, "invalid_field", "ordering_key")
	id := h.Accept(key, map[string]any{"user_id": "ada", "template_id": "hi", "channels": []string{"email"}, "ordering_key": "orders/42:eu_1.x-y"})
	r := h.AwaitStatus(key, id, "sent", 20*time.Second)
	if o := channelOf(t, r, "email")["ordering"].(map[string]any); o["ordering_key"] != "orders/42:eu_1.x-y" || o["seq"] != float64(1) {
		t.Fatalf("ordering: %v", o)
	}

	tpl := map[string]any{"category": "shipping", "email": map[string]any{"subject": "s", "text": "t"}}
	tpl["ordering"] = "not ok"
	apitest.WantError(t, h.Do(http.MethodPut, "/v1/templates/ordered", key, tpl), http.StatusBadRequest, "invalid_field", "ordering")
	tpl["ordering"] = "user"
	if r := h.MustDo(http.StatusCreated, http.MethodPut, "/v1/templates/ordered", key, tpl); r.Str("ordering") != "user" {
		t.Fatalf("template: %s", r.Body)
	}
	// The template's ordering is the default key; the request's wins.
	byTemplate := h.Accept(key, map[string]any{"user_id": "ada", "template_id": "ordered"})
	byRequest := h.Accept(key, map[string]any{"user_id": "ada", "template_id": "ordered", "ordering_key": "mine", "data": map[string]any{"n": 1}})
	for id, want := range map[string]string{byTemplate: "user", byRequest: "mine"} {
		r := h.AwaitStatus(key, id, "sent", 20*time.Second)
		if o, _ := channelOf(t, r, "email")["ordering"].(map[string]any); o["ordering_key"] != want {
			t.Fatalf("%s: ordering %v, want key %s", id, o, want)
		}
	}
	// An unordered notification shows no ordering.
	plain := h.Accept(key, map[string]any{"user_id": "ada", "template_id": "hi", "channels": []string{"email"}, "data": map[string]any{"n": 2}})
	if _, ok := channelOf(t, h.AwaitStatus(key, plain, "sent", 20*time.Second), "email")["ordering"]; ok {
		t.Fatal("an unordered channel shows an ordering")
	}

	for _, bad := range []string{"500ms", "2h", "soon", "-1s"} {
		apitest.WantError(t, h.Do(http.MethodPut, "/v1/settings", key, map[string]any{"ordering_max_hold": bad}),
			http.StatusBadRequest, "invalid_field", "ordering_max_hold")
	}
	if r := h.MustDo(http.StatusOK, http.MethodPut, "/v1/settings", key, map[string]any{"ordering_max_hold": "90s"}); r.Str("ordering_max_hold") != "1m30s" {
		t.Fatalf("settings: %s", r.Body)
	}
	if r := h.MustDo(http.StatusOK, http.MethodPut, "/v1/settings", key, map[string]any{}); r.Str("ordering_max_hold") != "5m0s" {
		t.Fatalf("settings after a PUT without it: %s", r.Body)
	}
}
