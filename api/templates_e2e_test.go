package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/providers/providertest"
)

// publicBase is the public URL the worker puts in unsubscribe links.
const publicBase = "https://herald.example.test"

// gateEnv is a harness whose tenant sends email through a SendGrid fake.
type gateEnv struct {
	h        *apitest.Harness
	sg       *providertest.SendGridFake
	tenantID string
	key      string
}

func startGateEnv(t *testing.T) gateEnv {
	t.Helper()
	f := apitest.StartFakes(t)
	h := apitest.Start(t, apitest.Options{Process: f.Process(publicBase, 10*time.Second)})
	tenantID, key := h.Tenant("gate")
	h.ConfigureSendGrid(tenantID, `{"from":"shop@example.com"}`)
	return gateEnv{h: h, sg: f.SendGrid, tenantID: tenantID, key: key}
}

// mailOf returns the message SendGrid accepted for a notification.
func mailOf(t *testing.T, sg *providertest.SendGridFake, id string) providertest.SendGridMail {
	t.Helper()
	mails := apitest.MailsFor(t, sg, id)
	if len(mails) == 0 {
		t.Fatalf("SendGrid accepted no message for %s", id)
	}
	return mails[0].Mail
}

func mailSubject(m providertest.SendGridMail) string {
	if m.Subject != "" {
		return m.Subject
	}
	if len(m.Personalizations) > 0 {
		return m.Personalizations[0].Subject
	}
	return ""
}

// inboxTitle returns the title of the user's inbox item for a notification.
func inboxTitle(t *testing.T, h *apitest.Harness, key, userID, id string) string {
	t.Helper()
	r := h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/"+userID+"/inbox?limit=100", key, nil)
	for _, it := range r.JSON["items"].([]any) {
		if m := it.(map[string]any); m["notification_id"] == id {
			return m["title"].(string)
		}
	}
	t.Fatalf("no inbox item for %s: %s", id, r.Body)
	return ""
}

func TestTemplateCRUDAndVersions(t *testing.T) {
	t.Parallel()
	h := apitest.Start(t, apitest.Options{})
	_, key := h.Tenant("tpl")
	_, otherKey := h.Tenant("tpl-other")
	h.PutUser(key, "ada", map[string]any{"email": "ada@example.com"})

	v1 := map[string]any{"category": "onboarding", "in_app": map[string]any{"title": "Hi v1", "body": "Hello {{.name}}"}}
	r := h.MustDo(http.StatusCreated, http.MethodPut, "/v1/templates/welcome", key, v1)
	if r.Str("id") != "welcome" || r.JSON["version"] != 1.0 || r.Str("category") != "onboarding" || r.JSON["critical"] != false ||
		fmt.Sprint(r.JSON["channels"]) != "[in_app]" || r.Str("created_at") == "" {
		t.Fatalf("first version: %s", r.Body)
	}
	v2 := map[string]any{"category": "onboarding", "in_app": map[string]any{"title": "Hi v2", "body": "Hello {{.name}}"},
		"email": map[string]any{"subject": "Welcome {{.name}}", "text": "Hello {{.name}}"}}
	r = h.MustDo(http.StatusOK, http.MethodPut, "/v1/templates/welcome", key, v2)
	if r.JSON["version"] != 2.0 || fmt.Sprint(r.JSON["channels"]) != "[in_app email]" {
		t.Fatalf("second version: %s", r.Body)
	}
	h.MustDo(http.StatusCreated, http.MethodPut, "/v1/templates/alpha", key, map[string]any{"category": "misc", "sms": map[string]any{"text": "hi"}})

	if r = h.MustDo(http.StatusOK, http.MethodGet, "/v1/templates/welcome", key, nil); r.JSON["version"] != 2.0 {
		t.Fatalf("latest: %s", r.Body)
	}
	r = h.MustDo(http.StatusOK, http.MethodGet, "/v1/templates/welcome?version=1", key, nil)
	if r.JSON["version"] != 1.0 || r.JSON["in_app"].(map[string]any)["title"] != "Hi v1" || r.JSON["email"] != nil {
		t.Fatalf("version 1: %s", r.Body)
	}
	h.MustDo(http.StatusNotFound, http.MethodGet, "/v1/templates/welcome?version=9", key, nil)
	apitest.WantError(t, h.Do(http.MethodGet, "/v1/templates/welcome?version=0", key, nil), 400, "invalid_field", "version")
	apitest.WantError(t, h.Do(http.MethodGet, "/v1/templates/welcome?version=x", key, nil), 400, "invalid_field", "version")
	r = h.MustDo(http.StatusOK, http.MethodGet, "/v1/templates", key, nil)
	if items := r.JSON["items"].([]any); len(items) != 2 || items[0].(map[string]any)["id"] != "alpha" ||
		items[1].(map[string]any)["version"] != 2.0 {
		t.Fatalf("list: %s", r.Body)
	}

	// Tenant isolation, bad ids and bodies.
	h.MustDo(http.StatusNotFound, http.MethodGet, "/v1/templates/welcome", otherKey, nil)
	h.MustDo(http.StatusNotFound, http.MethodDelete, "/v1/templates/welcome", otherKey, nil)
	if r = h.MustDo(http.StatusOK, http.MethodGet, "/v1/templates", otherKey, nil); len(r.JSON["items"].([]any)) != 0 {
		t.Fatalf("other tenant's list: %s", r.Body)
	}
	apitest.WantError(t, h.Do(http.MethodPut, "/v1/templates/-bad", key, v1), 400, "invalid_field", "template_id")
	apitest.WantError(t, h.Do(http.MethodPut, "/v1/templates/x", key, map[string]any{"id": "x", "category": "c", "sms": map[string]any{"text": "t"}}), 400, "unknown_field", "id")
	apitest.WantError(t, h.Do(http.MethodPut, "/v1/templates/x", key, map[string]any{"version": 3, "category": "c", "sms": map[string]any{"text": "t"}}), 400, "unknown_field", "version")
	apitest.WantError(t, h.Do(http.MethodPut, "/v1/templates/x", key, map[string]any{"category": "c", "critical": "yes", "sms": map[string]any{"text": "t"}}), 400, "invalid_type", "critical")
	apitest.WantError(t, h.Do(http.MethodPut, "/v1/templates/x", key, `{"category": "c",`), 400, "malformed_json", "")
	apitest.WantError(t, h.Do(http.MethodPut, "/v1/templates/x", key, map[string]any{"sms": map[string]any{"text": "t"}}), 422, "invalid_template", "category")
	// Bodies over the general 64 KiB limit reach template validation; 256 KiB is the cap.
	big := map[string]any{"category": "c", "email": map[string]any{"subject": "s", "html": strings.Repeat("a", 70<<10)}}
	apitest.WantError(t, h.Do(http.MethodPut, "/v1/templates/x", key, big), 422, "invalid_template", "email.html")
	big["email"].(map[string]any)["html"] = strings.Repeat("a", 300<<10)
	apitest.WantError(t, h.Do(http.MethodPut, "/v1/templates/x", key, big), 413, "body_too_large", "")
	h.MustDo(http.StatusNotFound, http.MethodGet, "/v1/templates/x", key, nil)

	// A notification pins the latest version.
	id := accept(t, h, key, "ada", "welcome", map[string]any{"name": "Ada"}, "in_app")
	h.AwaitChannel(key, id, "in_app", "delivered", "", 20*time.Second)
	if got := inboxTitle(t, h, key, "ada", id); got != "Hi v2" {
		t.Fatalf("rendered with the wrong version: title %q", got)
	}

	// Delete: gone for new notifications and for "latest", but versions stay readable.
	h.MustDo(http.StatusNoContent, http.MethodDelete, "/v1/templates/welcome", key, nil)
	h.MustDo(http.StatusNotFound, http.MethodGet, "/v1/templates/welcome", key, nil)
	h.MustDo(http.StatusNotFound, http.MethodDelete, "/v1/templates/welcome", key, nil)
	h.MustDo(http.StatusOK, http.MethodGet, "/v1/templates/welcome?version=2", key, nil)
	if r = h.MustDo(http.StatusOK, http.MethodGet, "/v1/templates", key, nil); len(r.JSON["items"].([]any)) != 1 {
		t.Fatalf("list after delete: %s", r.Body)
	}
	apitest.WantError(t, h.Submit(key, map[string]any{"user_id": "ada", "template_id": "welcome",
		"data": map[string]any{"name": "Ada"}}), 422, "unknown_template", "template_id")
	// Re-created: 201, and the version number is not reused.
	if r = h.MustDo(http.StatusCreated, http.MethodPut, "/v1/templates/welcome", key, v1); r.JSON["version"] != 3.0 {
		t.Fatalf("re-created: %s", r.Body)
	}
}

func TestTemplateValidationNamesChannelFieldAndLine(t *testing.T) {
	t.Parallel()
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	_, key := h.Tenant("tplv")

	// One syntax error, on line 3 of the email HTML.
	r := h.Do(http.MethodPut, "/v1/templates/broken", key, map[string]any{"category": "shipping",
		"email": map[string]any{"subject": "Your order", "html": "<p>\nHello\n{{.name</p>"}})
	apitest.WantError(t, r, http.StatusUnprocessableEntity, "invalid_template", "email.html")
	e := r.JSON["error"].(map[string]any)
	errs := e["errors"].([]any)
	first := errs[0].(map[string]any)
	if len(errs) != 1 || first["channel"] != "email" || first["field"] != "html" || first["line"] != 3.0 ||
		!strings.Contains(e["message"].(string), "email.html:3") {
		t.Fatalf("syntax error not named precisely: %s", r.Body)
	}

	// Several problems are all reported, variants with their locale.
	r = h.Do(http.MethodPut, "/v1/templates/broken", key, map[string]any{"category": "shipping",
		"sms":     map[string]any{"text": "ok {{.n}}"},
		"push":    map[string]any{"title": "{{if .x}}never closed"},
		"locales": map[string]any{"de": map[string]any{"sms": map[string]any{"text": "eins\n{{.n"}}, "fr": map[string]any{"email": map[string]any{"subject": "x", "text": "y"}}},
	})
	if r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("want 422, got %d %s", r.Status, r.Body)
	}
	errs = r.JSON["error"].(map[string]any)["errors"].([]any)
	var sawPush, sawDe, sawFr bool
	for _, x := range errs {
		m := x.(map[string]any)
		switch {
		case m["channel"] == "push" && m["field"] == "title" && m["locale"] == nil:
			sawPush = true
		case m["channel"] == "sms" && m["field"] == "text" && m["locale"] == "de" && m["line"] == 2.0:
			sawDe = true
		case m["channel"] == "email" && m["locale"] == "fr":
			sawFr = true
		}
	}
	if !sawPush || !sawDe || !sawFr {
		t.Fatalf("want the push title, the de sms line 2 and the fr email problems: %s", r.Body)
	}
	h.MustDo(http.StatusNotFound, http.MethodGet, "/v1/templates/broken", key, nil) // nothing saved
}

// User data in email HTML is escaped by html/template before it reaches SendGrid.
func TestEmailHTMLEscapesData(t *testing.T) {
	t.Parallel()
	env := startGateEnv(t)
	h, key := env.h, env.key
	h.MustDo(http.StatusCreated, http.MethodPut, "/v1/templates/receipt", key, map[string]any{"category": "billing",
		"email": map[string]any{"subject": "Receipt for {{.name}}", "html": "<p>Hello {{.name}}</p><a href=\"https://shop.example/{{.name}}\">x</a>", "text": "Hello {{.name}}"}})
	h.PutUser(key, "eve", map[string]any{"email": "eve@example.com"})
	id := accept(t, h, key, "eve", "receipt", map[string]any{"name": `<script>alert("x")</script>`})
	h.AwaitChannel(key, id, "email", "sent", "", 20*time.Second)
	html := apitest.MailPart(mailOf(t, env.sg, id), "text/html")
	if strings.Contains(strings.ToLower(html), "<script") || !strings.Contains(html, "&lt;script&gt;") {
		t.Fatalf("user data reached the email HTML unescaped: %q", html)
	}
}

func TestLocaleFallback(t *testing.T) {
	t.Parallel()
	h := apitest.Start(t, apitest.Options{})
	_, key := h.Tenant("i18n")
	variant := func(title string) map[string]any {
		return map[string]any{"in_app": map[string]any{"title": title, "body": title + " {{.name}}"}}
	}
	// Base content is Spanish, so falling back to "en" is visible.
	h.MustDo(http.StatusCreated, http.MethodPut, "/v1/templates/promo", key, map[string]any{"category": "news", "default_locale": "es",
		"in_app":  map[string]any{"title": "Hola", "body": "Hola {{.name}}"},
		"locales": map[string]any{"de": variant("Hallo"), "en": variant("Hello"), "it": variant("Ciao")}})
	h.PutUser(key, "hans", map[string]any{"locale": "de-AT"})
	h.PutUser(key, "marie", map[string]any{"locale": "fr"})

	r := h.MustDo(http.StatusOK, http.MethodPut, "/v1/settings", key, map[string]any{"default_locale": "it"})
	if r.Str("default_locale") != "it" {
		t.Fatalf("settings: %s", r.Body)
	}
	send := func(user string) string {
		t.Helper()
		id := accept(t, h, key, user, "promo", map[string]any{"name": user})
		h.AwaitChannel(key, id, "in_app", "delivered", "", 20*time.Second)
		return inboxTitle(t, h, key, user, id)
	}
	if got := send("hans"); got != "Hallo" {
		t.Errorf("de-AT → de: got %q", got)
	}
	if got := send("marie"); got != "Ciao" {
		t.Errorf("fr → tenant default it: got %q", got)
	}
	// Tenant default unset → en (not the template's Spanish base).
	if r = h.MustDo(http.StatusOK, http.MethodPut, "/v1/settings", key, map[string]any{}); r.Str("default_locale") != "en" {
		t.Fatalf("settings reset: %s", r.Body)
	}
	if got := send("marie"); got != "Hello" {
		t.Errorf("fr, no tenant default → en: got %q", got)
	}
}
