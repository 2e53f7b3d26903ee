package api_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/providers/providertest"
)

// Secret values that must never come back from the API.
const (
	sgAPIKey       = "SG.e2e-sendgrid-api-key-SECRET-1f2e3d"
	sgAPIKey2      = "SG.e2e-sendgrid-api-key-SECRET-rotated"
	twAuthToken    = "e2etwilioauthtokenSECRET0123456789"
	twWebhookToken = "e2etwilioaccounttokenSECRET987654"
	twAccountSID   = "AC0123456789abcdef0123456789abcdef"
)

// secretWatch fails the test if any response it saw contains a secret.
type secretWatch struct {
	t       *testing.T
	secrets []string
	bodies  []string
}

func (w *secretWatch) do(h *apitest.Harness, method, path, key string, body any, headers ...string) apitest.Response {
	w.t.Helper()
	r := h.Do(method, path, key, body, headers...)
	w.bodies = append(w.bodies, string(r.Body))
	for k, vs := range r.Header {
		w.bodies = append(w.bodies, k+": "+strings.Join(vs, ","))
	}
	return r
}

func (w *secretWatch) check() {
	w.t.Helper()
	for _, b := range w.bodies {
		for _, s := range w.secrets {
			if strings.Contains(b, s) {
				w.t.Errorf("a response contains the secret %q: %.300s", s, b)
			}
		}
	}
}

func TestProviderConfigRoundTripWithoutSecrets(t *testing.T) {
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	tenantID, key := h.TenantWith("providers", "welcome")
	_, keyB := h.TenantWith("other", "welcome")
	pub := providertest.NewSendGridWebhookKey(t).PublicKey
	sa, pemKey := providertest.ServiceAccount(t, "herald-e2e", "https://oauth2.googleapis.com/token")
	// The PEM body is the secret part of the service account key.
	pemBody := strings.Split(pemKey, "\n")[1]
	w := &secretWatch{t: t, secrets: []string{sgAPIKey, sgAPIKey2, twAuthToken, twWebhookToken, pemBody, "private_key"}}
	defer w.check()
	ctx := context.Background()

	// Create: 201, no credentials in the answer.
	r := w.do(h, http.MethodPut, "/v1/providers/email", key, map[string]any{
		"provider":    "sendgrid",
		"settings":    map[string]any{"from": "noreply@acme.example", "from_name": "Acme", "webhook_public_key": pub},
		"credentials": map[string]any{"api_key": sgAPIKey},
	})
	if r.Status != http.StatusCreated || r.Str("channel") != "email" || r.Str("provider") != "sendgrid" ||
		r.JSON["has_credentials"] != true || r.JSON["enabled"] != true || r.JSON["priority"].(float64) != 0 || r.Str("updated_at") == "" {
		t.Fatalf("create sendgrid: %d %s", r.Status, r.Body)
	}
	if _, ok := r.JSON["credentials"]; ok {
		t.Fatalf("credentials returned: %s", r.Body)
	}
	settings := r.JSON["settings"].(map[string]any)
	if settings["from"] != "noreply@acme.example" || settings["from_name"] != "Acme" || settings["webhook_public_key"] != pub {
		t.Fatalf("settings: %s", r.Body)
	}
	pc, err := h.Providers.GetProviderConfig(ctx, tenantID, "email", "sendgrid")
	if err != nil || !pc.HasSecret || !strings.Contains(string(pc.Secret), sgAPIKey) {
		t.Fatalf("stored config: %v %v", pc, err)
	}

	// Replace without credentials: 200, the stored credentials are kept.
	r = w.do(h, http.MethodPut, "/v1/providers/email", key, map[string]any{
		"provider": "sendgrid", "settings": map[string]any{"from": "hello@acme.example"}, "priority": 5, "enabled": false,
	})
	if r.Status != http.StatusOK || r.JSON["has_credentials"] != true || r.JSON["enabled"] != false || r.JSON["priority"].(float64) != 5 {
		t.Fatalf("replace sendgrid: %d %s", r.Status, r.Body)
	}
	if s := r.JSON["settings"].(map[string]any); s["from"] != "hello@acme.example" || s["from_name"] != nil || s["webhook_public_key"] != nil {
		t.Fatalf("settings are replaced as a whole: %s", r.Body)
	}
	if pc, err = h.Providers.GetProviderConfig(ctx, tenantID, "email", "sendgrid"); err != nil || !strings.Contains(string(pc.Secret), sgAPIKey) {
		t.Fatalf("credentials must be kept by a PUT without them: %v", err)
	}
	// Rotate the key.
	r = w.do(h, http.MethodPut, "/v1/providers/email", key, map[string]any{
		"provider": "sendgrid", "settings": map[string]any{"from": "hello@acme.example"}, "credentials": map[string]any{"api_key": sgAPIKey2},
	})
	if r.Status != http.StatusOK {
		t.Fatalf("rotate: %d %s", r.Status, r.Body)
	}
	if pc, err = h.Providers.GetProviderConfig(ctx, tenantID, "email", "sendgrid"); err != nil || !strings.Contains(string(pc.Secret), sgAPIKey2) {
		t.Fatalf("rotated credentials: %v", err)
	}

	r = w.do(h, http.MethodPut, "/v1/providers/sms", key, map[string]any{
		"provider": "twilio", "settings": map[string]any{"account_sid": twAccountSID, "from": "+15005550006"},
		"credentials": map[string]any{"auth_token": twAuthToken},
	})
	if r.Status != http.StatusCreated || r.JSON["has_credentials"] != true {
		t.Fatalf("create twilio: %d %s", r.Status, r.Body)
	}
	r = w.do(h, http.MethodPut, "/v1/providers/sms", key, map[string]any{
		"provider": "twilio", "settings": map[string]any{"account_sid": twAccountSID, "messaging_service_sid": "MG0123456789abcdef0123456789abcdef",
			"api_key_sid": "SK0123456789abcdef0123456789abcdef"},
		"credentials": map[string]any{"auth_token": twAuthToken, "webhook_auth_token": twWebhookToken},
	})
	if r.Status != http.StatusOK {
		t.Fatalf("replace twilio with an API key: %d %s", r.Status, r.Body)
	}
	r = w.do(h, http.MethodPut, "/v1/providers/push", key, map[string]any{
		"provider": "fcm", "settings": map[string]any{"project_id": "herald-e2e"}, "credentials": sa,
	})
	if r.Status != http.StatusCreated || r.JSON["has_credentials"] != true {
		t.Fatalf("create fcm: %d %s", r.Status, r.Body)
	}
	r = w.do(h, http.MethodPut, "/v1/providers/push", key, map[string]any{"provider": "sandbox", "priority": 10})
	if r.Status != http.StatusCreated || r.JSON["has_credentials"] != false || len(r.JSON["settings"].(map[string]any)) != 0 {
		t.Fatalf("create sandbox: %d %s", r.Status, r.Body)
	}

	list := w.do(h, http.MethodGet, "/v1/providers", key, nil)
	items, _ := list.JSON["items"].([]any)
	if list.Status != http.StatusOK || len(items) != 4 {
		t.Fatalf("list: %d %s", list.Status, list.Body)
	}
	var got []string
	for _, it := range items {
		m := it.(map[string]any)
		got = append(got, m["channel"].(string)+"/"+m["provider"].(string))
	}
	if strings.Join(got, ",") != "email/sendgrid,sms/twilio,push/fcm,push/sandbox" {
		t.Fatalf("list order: %v", got)
	}
	if other := w.do(h, http.MethodGet, "/v1/providers", keyB, nil); other.Status != http.StatusOK || len(other.JSON["items"].([]any)) != 0 {
		t.Fatalf("another tenant sees configs: %d %s", other.Status, other.Body)
	}
	// Deletes, in order; a 204 has no body.
	for _, c := range []struct {
		what, path, key string
		want            int
	}{
		{"another tenant deletes a config", "push/sandbox", keyB, http.StatusNotFound},
		{"delete", "push/sandbox", key, http.StatusNoContent},
		{"delete again", "push/sandbox", key, http.StatusNotFound},
		{"delete a provider the channel cannot have", "push/twilio", key, http.StatusNotFound},
		{"delete on in_app", "in_app/sandbox", key, http.StatusBadRequest},
	} {
		if d := w.do(h, http.MethodDelete, "/v1/providers/"+c.path, c.key, nil); d.Status != c.want || (c.want == http.StatusNoContent && len(d.Body) != 0) {
			t.Fatalf("%s: %d %s", c.what, d.Status, d.Body)
		}
	}
	if _, err := h.Providers.GetProviderConfig(ctx, tenantID, "push", "sandbox"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("deleted config still stored: %v", err)
	}
}

func TestProviderConfigValidation(t *testing.T) {
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	_, key := h.TenantWith("providers", "welcome")
	w := &secretWatch{t: t, secrets: []string{sgAPIKey, "tok en-SECRET", twAuthToken}}
	defer w.check()
	// A twilio config that exists, with credentials, for the "credentials kept" cases.
	if r := w.do(h, http.MethodPut, "/v1/providers/sms", key, map[string]any{
		"provider": "twilio", "settings": map[string]any{"account_sid": twAccountSID, "from": "+15005550006"},
		"credentials": map[string]any{"auth_token": twAuthToken},
	}); r.Status != http.StatusCreated {
		t.Fatalf("setup: %d %s", r.Status, r.Body)
	}
	sg := func(settings, creds string) string {
		return `{"provider":"sendgrid","settings":` + settings + `,"credentials":` + creds + `}`
	}
	okCreds := `{"api_key":"` + sgAPIKey + `"}`
	cases := []struct {
		name, channel, body string
		status              int
		field, code         string
	}{
		{"in_app has no providers", "in_app", sg(`{"from":"a@b.example"}`, okCreds), 400, "channel", "unknown_channel"},
		{"unknown channel", "pigeon", sg(`{"from":"a@b.example"}`, okCreds), 400, "channel", "unknown_channel"},
		{"missing provider", "email", `{"settings":{"from":"a@b.example"}}`, 400, "provider", "missing_field"},
		{"provider of another channel", "email", `{"provider":"twilio"}`, 400, "provider", "invalid_field"},
		{"unknown provider", "push", `{"provider":"apns"}`, 400, "provider", "invalid_field"},
		{"malformed json", "email", `{"provider":`, 400, "", "malformed_json"},
		{"unknown top-level field", "email", `{"provider":"sendgrid","secret":"x"}`, 400, "secret", "unknown_field"},
		{"priority not integer", "email", `{"provider":"sendgrid","priority":1.5}`, 400, "priority", "invalid_type"},
		{"priority negative", "email", `{"provider":"sendgrid","settings":{"from":"a@b.example"},"credentials":` + okCreds + `,"priority":-1}`, 400, "priority", "invalid_field"},
		{"sendgrid without settings", "email", `{"provider":"sendgrid","credentials":` + okCreds + `}`, 400, "settings.from", "missing_field"},
		{"sendgrid settings not object", "email", sg(`"a@b.example"`, okCreds), 400, "settings", "invalid_type"},
		{"sendgrid bad from", "email", sg(`{"from":"Acme <a@b.example>"}`, okCreds), 400, "settings.from", "invalid_field"},
		{"sendgrid from wrong type", "email", sg(`{"from":42}`, okCreds), 400, "settings.from", "invalid_type"},
		{"sendgrid unknown setting", "email", sg(`{"from":"a@b.example","colour":"red"}`, okCreds), 400, "settings.colour", "unknown_field"},
		{"sendgrid bad webhook key", "email", sg(`{"from":"a@b.example","webhook_public_key":"bm90IGEga2V5"}`, okCreds), 400, "settings.webhook_public_key", "invalid_field"},
		{"sendgrid create without credentials", "email", `{"provider":"sendgrid","settings":{"from":"a@b.example"}}`, 400, "credentials", "missing_field"},
		{"sendgrid credentials not object", "email", sg(`{"from":"a@b.example"}`, `"`+sgAPIKey+`"`), 400, "credentials", "invalid_type"},
		{"sendgrid empty api key", "email", sg(`{"from":"a@b.example"}`, `{"api_key":""}`), 400, "credentials.api_key", "missing_field"},
		{"sendgrid api key with space", "email", sg(`{"from":"a@b.example"}`, `{"api_key":"tok en-SECRET"}`), 400, "credentials.api_key", "invalid_field"},
		{"sendgrid unknown credential", "email", sg(`{"from":"a@b.example"}`, `{"api_key":"`+sgAPIKey+`","password":"x"}`), 400, "credentials.password", "unknown_field"},
		{"twilio missing account", "sms", `{"provider":"twilio","settings":{"from":"+15005550006"}}`, 400, "settings.account_sid", "missing_field"},
		{"twilio bad account", "sms", `{"provider":"twilio","settings":{"account_sid":"AC123","from":"+15005550006"}}`, 400, "settings.account_sid", "invalid_field"},
		{"twilio no sender", "sms", `{"provider":"twilio","settings":{"account_sid":"` + twAccountSID + `"}}`, 400, "settings.from", "missing_field"},
		{"twilio bad from", "sms", `{"provider":"twilio","settings":{"account_sid":"` + twAccountSID + `","from":"0155 123"}}`, 400, "settings.from", "invalid_field"},
		{"twilio bad messaging service", "sms", `{"provider":"twilio","settings":{"account_sid":"` + twAccountSID + `","messaging_service_sid":"MGxyz"}}`, 400, "settings.messaging_service_sid", "invalid_field"},
		{"twilio api key without account token", "sms", `{"provider":"twilio","settings":{"account_sid":"` + twAccountSID + `","from":"+15005550006","api_key_sid":"SK0123456789abcdef0123456789abcdef"},"credentials":{"auth_token":"` + twAuthToken + `"}}`, 400, "credentials.webhook_auth_token", "missing_field"},
		{"twilio empty token", "sms", `{"provider":"twilio","settings":{"account_sid":"` + twAccountSID + `","from":"+15005550006"},"credentials":{"auth_token":""}}`, 400, "credentials.auth_token", "missing_field"},
		{"fcm missing project", "push", `{"provider":"fcm","settings":{},"credentials":{"type":"service_account"}}`, 400, "settings.project_id", "missing_field"},
		{"fcm bad project", "push", `{"provider":"fcm","settings":{"project_id":"Not A Project"}}`, 400, "settings.project_id", "invalid_field"},
		{"fcm not a service account", "push", `{"provider":"fcm","settings":{"project_id":"herald-e2e"},"credentials":{"type":"authorized_user"}}`, 400, "credentials.type", "invalid_field"},
		{"fcm no private key", "push", `{"provider":"fcm","settings":{"project_id":"herald-e2e"},"credentials":{"type":"service_account","client_email":"a@b.iam.gserviceaccount.com"}}`, 400, "credentials.private_key", "missing_field"},
		{"fcm create without credentials", "push", `{"provider":"fcm","settings":{"project_id":"herald-e2e"}}`, 400, "credentials", "missing_field"},
		{"sandbox with credentials", "email", `{"provider":"sandbox","credentials":{"api_key":"x"}}`, 400, "credentials", "invalid_field"},
		{"sandbox with settings", "email", `{"provider":"sandbox","settings":{"from":"a@b.example"}}`, 400, "settings.from", "unknown_field"},
		{"body too large", "email", `{"provider":"sendgrid","settings":{"from_name":"` + strings.Repeat("a", 70_000) + `"}}`, 413, "", "body_too_large"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := w.do(h, http.MethodPut, "/v1/providers/"+c.channel, key, c.body)
			field, code := r.ErrorField()
			if r.Status != c.status || field != c.field || code != c.code {
				t.Fatalf("want %d field=%q code=%q, got %d %s", c.status, c.field, c.code, r.Status, r.Body)
			}
		})
	}
	// The failed PUTs changed nothing.
	list := w.do(h, http.MethodGet, "/v1/providers", key, nil)
	if items := list.JSON["items"].([]any); len(items) != 1 || items[0].(map[string]any)["provider"] != "twilio" {
		t.Fatalf("failed PUTs must not store anything: %s", list.Body)
	}
	if r := w.do(h, http.MethodGet, "/v1/providers", "", nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("no key: %d", r.Status)
	}
}

func TestPushTokens(t *testing.T) {
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	_, key := h.TenantWith("push", "welcome")
	_, keyB := h.TenantWith("other", "welcome")
	createUser(h, key, "ada")
	createUser(h, key, "bob")
	const tok = "fcm:APA91bH-e2e_token.0123456789"
	put := func(user, token, platform string) apitest.Response {
		return h.Do(http.MethodPut, "/v1/users/"+user+"/push-tokens", key, map[string]any{"token": token, "platform": platform})
	}
	list := func(user string) []any {
		r := h.Do(http.MethodGet, "/v1/users/"+user+"/push-tokens", key, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("list %s: %d %s", user, r.Status, r.Body)
		}
		return r.JSON["items"].([]any)
	}

	r := put("ada", tok, "android")
	if r.Status != http.StatusCreated || r.Str("token") != tok || r.Str("platform") != "android" || r.Str("user_id") != "ada" {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	time.Sleep(5 * time.Millisecond)
	again := put("ada", tok, "android")
	if again.Status != http.StatusOK || again.Str("created_at") != r.Str("created_at") || again.Str("last_seen_at") == r.Str("last_seen_at") {
		t.Fatalf("re-register: %d %s (first %s)", again.Status, again.Body, r.Body)
	}
	if items := list("ada"); len(items) != 1 || items[0].(map[string]any)["token"] != tok {
		t.Fatalf("ada's tokens: %v", items)
	}
	// The device changed hands: the token moves to bob.
	if moved := put("bob", tok, "ios"); moved.Status != http.StatusCreated || moved.Str("user_id") != "bob" || moved.Str("platform") != "ios" {
		t.Fatalf("move: %d %s", moved.Status, moved.Body)
	}
	if items := list("ada"); len(items) != 0 {
		t.Fatalf("the moved token is still ada's: %v", items)
	}
	if items := list("bob"); len(items) != 1 {
		t.Fatalf("bob's tokens: %v", items)
	}
	if r := put("bob", "web-token-2", "web"); r.Status != http.StatusCreated {
		t.Fatalf("second token: %d %s", r.Status, r.Body)
	}
	if items := list("bob"); len(items) != 2 || items[0].(map[string]any)["token"] != tok {
		t.Fatalf("bob's tokens, oldest first: %v", items)
	}

	// Another tenant sees none of it.
	h.MustDo(http.StatusNotFound, http.MethodGet, "/v1/users/bob/push-tokens", keyB, nil)
	h.MustDo(http.StatusNotFound, http.MethodDelete, "/v1/users/bob/push-tokens/"+url.PathEscape(tok), keyB, nil)

	h.MustDo(http.StatusNotFound, http.MethodDelete, "/v1/users/ada/push-tokens/"+url.PathEscape(tok), key, nil)
	h.MustDo(http.StatusNoContent, http.MethodDelete, "/v1/users/bob/push-tokens/"+url.PathEscape(tok), key, nil)
	h.MustDo(http.StatusNotFound, http.MethodDelete, "/v1/users/bob/push-tokens/"+url.PathEscape(tok), key, nil)
	if items := list("bob"); len(items) != 1 || items[0].(map[string]any)["token"] != "web-token-2" {
		t.Fatalf("after delete: %v", items)
	}

	for _, c := range []struct {
		name, method, path, body string
		status                   int
		field, code              string
	}{
		{"unknown user put", "PUT", "/v1/users/nobody/push-tokens", `{"token":"t","platform":"ios"}`, 404, "", "not_found"},
		{"unknown user list", "GET", "/v1/users/nobody/push-tokens", "", 404, "", "not_found"},
		{"unknown user delete", "DELETE", "/v1/users/nobody/push-tokens/t", "", 404, "", "not_found"},
		{"missing token", "PUT", "/v1/users/ada/push-tokens", `{"platform":"ios"}`, 400, "token", "missing_field"},
		{"token with space", "PUT", "/v1/users/ada/push-tokens", `{"token":"a b","platform":"ios"}`, 400, "token", "invalid_field"},
		{"token with slash", "PUT", "/v1/users/ada/push-tokens", `{"token":"a/b","platform":"ios"}`, 400, "token", "invalid_field"},
		{"token too long", "PUT", "/v1/users/ada/push-tokens", `{"token":"` + strings.Repeat("a", 4097) + `","platform":"ios"}`, 400, "token", "invalid_field"},
		{"missing platform", "PUT", "/v1/users/ada/push-tokens", `{"token":"t"}`, 400, "platform", "missing_field"},
		{"bad platform", "PUT", "/v1/users/ada/push-tokens", `{"token":"t","platform":"blackberry"}`, 400, "platform", "invalid_field"},
		{"platform wrong type", "PUT", "/v1/users/ada/push-tokens", `{"token":"t","platform":1}`, 400, "platform", "invalid_type"},
		{"unknown field", "PUT", "/v1/users/ada/push-tokens", `{"token":"t","platform":"ios","app":"x"}`, 400, "app", "unknown_field"},
		{"bad delete token", "DELETE", "/v1/users/ada/push-tokens/a%20b", "", 400, "token", "invalid_field"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var body any
			if c.body != "" {
				body = c.body
			}
			r := h.Do(c.method, c.path, key, body)
			field, code := r.ErrorField()
			if r.Status != c.status || field != c.field || code != c.code {
				t.Fatalf("want %d field=%q code=%q, got %d %s", c.status, c.field, c.code, r.Status, r.Body)
			}
		})
	}
}

func TestSandboxListsWhatWouldHaveBeenSent(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	_, key := h.TenantWith("dev", "welcome")
	_, keyB := h.TenantWith("other", "welcome")
	h.PutUser(key, "ada", map[string]any{"email": "ada@example.com", "phone": "+14155550100"})
	id := h.Accept(key, map[string]any{"user_id": "ada", "template_id": "welcome", "channels": []string{"email", "sms"},
		"data": map[string]any{"title": "Welcome", "body": "Hello Ada"}})
	got := h.AwaitStatus(key, id, "sent", 30*time.Second)
	for _, ch := range []herald.Channel{"email", "sms"} {
		if c := channelOf(t, got, ch); c["status"] != "sent" || c["provider"] != "sandbox" {
			t.Fatalf("channel %s: %s", ch, got.Body)
		}
	}

	list := h.Do(http.MethodGet, "/v1/sandbox/messages?notification_id="+id, key, nil)
	items, _ := list.JSON["items"].([]any)
	if list.Status != http.StatusOK || len(items) != 2 {
		t.Fatalf("sandbox messages: %d %s", list.Status, list.Body)
	}
	seen := map[string]map[string]any{}
	for _, it := range items {
		m := it.(map[string]any)
		if m["notification_id"] != id {
			t.Fatalf("message for another notification: %s", list.Body)
		}
		seen[m["channel"].(string)] = m
	}
	if e := seen["email"]; e == nil || e["recipient"] != "ada@example.com" || e["subject"] != "Welcome" || e["body"] != "Hello Ada" ||
		e["idempotency_key"] != id+":email" {
		t.Fatalf("email message: %s", list.Body)
	}
	if s := seen["sms"]; s == nil || s["recipient"] != "+14155550100" || s["body"] != "Hello Ada" || s["subject"] != "" {
		t.Fatalf("sms message: %s", list.Body)
	}
	if one := h.Do(http.MethodGet, "/v1/sandbox/messages?limit=1", key, nil); one.Status != http.StatusOK || len(one.JSON["items"].([]any)) != 1 {
		t.Fatalf("limit=1: %d %s", one.Status, one.Body)
	}
	if other := h.Do(http.MethodGet, "/v1/sandbox/messages", keyB, nil); other.Status != http.StatusOK || len(other.JSON["items"].([]any)) != 0 {
		t.Fatalf("another tenant sees the messages: %d %s", other.Status, other.Body)
	}
	for _, q := range []struct{ query, field string }{{"limit=0", "limit"}, {"limit=501", "limit"}, {"limit=x", "limit"}, {"notification_id=n_1", "notification_id"}} {
		r := h.Do(http.MethodGet, "/v1/sandbox/messages?"+q.query, key, nil)
		if field, code := r.ErrorField(); r.Status != http.StatusBadRequest || field != q.field || code != "invalid_field" {
			t.Fatalf("%s: %d %s", q.query, r.Status, r.Body)
		}
	}
	h.MustDo(http.StatusUnauthorized, http.MethodGet, "/v1/sandbox/messages", "", nil)
}

func TestSandboxAPIOffIsAnUnknownRoute(t *testing.T) {
	h := apitest.Start(t, apitest.Options{NoWorker: true, NoSandboxAPI: true})
	_, key := h.TenantWith("prod", "welcome")
	for _, k := range []string{key, ""} {
		r := h.Do(http.MethodGet, "/v1/sandbox/messages", k, nil)
		if _, code := r.ErrorField(); r.Status != http.StatusNotFound || code != "not_found" {
			t.Fatalf("sandbox API off: %d %s", r.Status, r.Body)
		}
	}
}
