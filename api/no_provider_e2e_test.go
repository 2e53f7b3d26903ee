package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/herald"
)

// TestNoProviderFailsInsteadOfSandbox: on a production worker (no sandbox
// fallback) a channel the tenant configured no provider for fails with reason
// no_provider: nothing is "sent" and the sandbox records nothing. The in-app
// channel needs no provider and is delivered; a channel whose provider the tenant
// did configure (here the sandbox, chosen deliberately) is sent.
func TestNoProviderFailsInsteadOfSandbox(t *testing.T) {
	t.Parallel()
	h := apitest.Start(t, apitest.Options{NoSandboxFallback: true})
	_, key := h.Tenant("noprovider")
	h.Template(key, apitest.SimpleTemplate("order"))
	h.PutUser(key, "ada", map[string]any{"email": "ada@example.com", "phone": "+14155550100"})
	h.MustDo(http.StatusCreated, http.MethodPut, "/v1/users/ada/push-tokens", key, map[string]any{"token": "tok-ada-1", "platform": "android"})
	h.MustDo(http.StatusCreated, http.MethodPut, "/v1/providers/sms", key, map[string]any{"provider": "sandbox"})

	r := h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/notifications", key, map[string]any{
		"user_id": "ada", "template_id": "order", "channels": []string{"in_app", "email", "sms", "push"},
		"idempotency_key": "no-provider-1"})
	id := r.Str("notification_id")
	for _, ch := range []herald.Channel{"email", "push"} {
		got := h.AwaitChannel(key, id, ch, "failed", "no_provider", 15*time.Second)
		if got["provider"] != nil || got["sent_at"] != nil || len(history(got)) != 0 {
			t.Errorf("%s without a provider: %v", ch, got)
		}
		if msg, _ := got["last_error"].(string); !strings.Contains(msg, "no provider") {
			t.Errorf("%s last_error = %v, want it to say no provider is configured", ch, got["last_error"])
		}
	}
	h.AwaitChannel(key, id, "in_app", "delivered", "", 15*time.Second)
	h.AwaitChannel(key, id, "sms", "sent", "", 15*time.Second)
	h.Eventually(5*time.Second, "overall partially_failed", func() bool {
		o, _ := h.Channels(key, id)
		return o == "partially_failed"
	})
	list := h.MustDo(http.StatusOK, http.MethodGet, "/v1/sandbox/messages?notification_id="+id, key, nil)
	items, _ := list.JSON["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["channel"] != "sms" {
		t.Fatalf("the sandbox recorded %s; want only the SMS of the configured sandbox provider", list.Body)
	}
	if dl := deadLetters(t, h, key, "?status=all"); len(dl) != 0 {
		t.Fatalf("no_provider channels were dead-lettered: %v", dl)
	}
}
