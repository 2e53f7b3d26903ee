package api_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/herald"
)

// TestPreferenceCentreInChromium: <herald-inbox>'s "Preferences" gets the
// user's signed link; the page (German for a de-AT user, with the tenant's
// hostile-looking name shown as text, its colour and logo) lists the tenant's
// categories; unticking "marketing" and saving makes GET
// /v1/users/{id}/preferences say so, and the next marketing notification is
// suppressed while a shipping one is delivered. Branding is validated; a
// forged link shows nothing.
func TestPreferenceCentreInChromium(t *testing.T) {
	bin := chromiumPath(t)
	h := apitest.Start(t, apitest.Options{})
	_, key := h.TenantWith("prefcentre")
	for id, cat := range map[string]string{"promo-mail": "marketing", "shipped": "shipping"} {
		tmpl := apitest.SimpleTemplate(id)
		tmpl.Category = cat
		h.Template(key, tmpl)
	}
	h.PutUser(key, "ada", map[string]any{"email": "ada@example.com", "locale": "de-AT"})
	token := h.UserToken(key, "ada")

	// Branding: hostile values are refused, naming the field; a hostile name is
	// kept (it is text) and must come out escaped.
	for field, b := range map[string]map[string]any{
		"branding.color":    {"color": "red;}</style><script>alert(1)</script>"},
		"branding.logo_url": {"logo_url": "javascript:alert(1)"},
		"branding.name":     {"name": "line\nbreak"},
	} {
		apitest.WantError(t, h.Do(http.MethodPut, "/v1/inbox/settings", key, map[string]any{"allowed_origins": []string{}, "branding": b}),
			http.StatusBadRequest, "invalid_field", field)
	}
	const hostileName = `<script>window.__xss=1</script>Acme & "Co"`
	s := h.MustDo(http.StatusOK, http.MethodPut, "/v1/inbox/settings", key, map[string]any{"allowed_origins": []string{},
		"branding": map[string]any{"name": hostileName, "color": "#c2255c", "logo_url": "https://cdn.example.com/logo.png"}})
	if b, _ := s.JSON["branding"].(map[string]any); b["name"] != hostileName || b["color"] != "#c2255c" {
		t.Fatalf("settings: %s", s.Body)
	}

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(900, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	defer cancelTimeout()
	eval := func(js string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return v
	}
	waitFor := func(what, js string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for eval(js) != "true" {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// The component's "Preferences" opens the signed link (window.open caught).
	if err := chromedp.Do(ctx, chromedp.Navigate(h.URL+"/inbox/demo#user=ada&token="+token), chromedp.WaitReady(chromedp.CSS("herald-inbox"))); err != nil {
		t.Fatal(err)
	}
	const root = `document.querySelector('herald-inbox').shadowRoot`
	eval(`(() => { window.open = (u) => { window.__opened = u; }; return ""; })()`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.JSPath(root+`.querySelector('button.preferences')`))); err != nil {
		t.Fatal(err)
	}
	waitFor("the preference link", `String(!!window.__opened)`)
	link := eval(`window.__opened`)
	if !strings.Contains(link, "/preferences?token=") {
		t.Fatalf("opened %q", link)
	}
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}

	// The page: German, branded, the hostile name as text, both categories.
	if err := chromedp.Do(ctx, chromedp.Navigate(h.URL+u.RequestURI()), chromedp.WaitReady(chromedp.CSS("form"))); err != nil {
		t.Fatal(err)
	}
	if got := eval(`document.querySelector('h1').textContent`); got != "Benachrichtigungseinstellungen" {
		t.Fatalf("title %q", got)
	}
	if got := eval(`document.querySelector('.brand').textContent`); got != hostileName {
		t.Fatalf("brand name shown as %q", got)
	}
	if got := eval(`String(window.__xss)`); got != "undefined" {
		t.Fatal("the tenant's name ran as script")
	}
	if got := eval(`document.querySelector('header img').getAttribute('src')`); got != "https://cdn.example.com/logo.png" {
		t.Fatalf("logo %q", got)
	}
	if got := eval(`[...document.querySelectorAll('tr[data-category]')].map(r => r.dataset.category).join(',')`); got != "marketing,shipping" {
		t.Fatalf("categories %q", got)
	}
	// Untick marketing (a real click) and save.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`input[name="category.marketing"]`)),
		chromedp.Click(chromedp.CSS(`button[type="submit"]`)), chromedp.WaitVisible(chromedp.CSS(`#saved`))); err != nil {
		t.Fatal(err)
	}
	if got := eval(`String(document.querySelector('input[name="category.marketing"]').checked)`); got != "false" {
		t.Fatal("the saved page shows marketing on")
	}

	prefs := h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/ada/preferences", key, nil)
	own, _ := prefs.JSON["preferences"].(map[string]any)
	cats, _ := own["categories"].(map[string]any)
	marketing, _ := cats["marketing"].(map[string]any)
	shipping, _ := cats["shipping"].(map[string]any)
	if marketing["enabled"] != false || shipping["enabled"] != true {
		t.Fatalf("preferences after the page: %s", prefs.Body)
	}
	promo := h.Accept(key, map[string]any{"user_id": "ada", "template_id": "promo-mail", "channels": []string{"in_app"},
		"data": map[string]any{"title": "Sale"}})
	h.AwaitChannel(key, promo, "in_app", "suppressed", herald.ReasonOptedOutCategory, 30*time.Second)
	ship := h.Accept(key, map[string]any{"user_id": "ada", "template_id": "shipped", "channels": []string{"in_app"},
		"data": map[string]any{"title": "Shipped"}})
	h.AwaitChannel(key, ship, "in_app", "delivered", "", 30*time.Second)

	// A forged or tampered link shows nothing of anyone.
	q := u.Query()
	q.Set("token", q.Get("token")+"x")
	bad := h.Do(http.MethodGet, "/preferences?"+q.Encode(), "", nil)
	if bad.Status != http.StatusBadRequest || strings.Contains(string(bad.Body), "marketing") {
		t.Fatalf("tampered link: %d %s", bad.Status, bad.Body)
	}
	// Invalid quiet hours re-render the page with the problem; nothing saved.
	form := url.Values{"channel.in_app": {"on"}, "quiet_start": {"22:00"}, "quiet_end": {"07:00"}, "quiet_timezone": {"Mars/Olympus"}}
	r := h.Do(http.MethodPost, u.RequestURI(), "", form.Encode(), "Content-Type", "application/x-www-form-urlencoded")
	if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), `id="problem"`) {
		t.Fatalf("invalid quiet hours: %d %s", r.Status, r.Body)
	}
	if again := h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/ada/preferences", key, nil); strings.Contains(string(again.Body), "Mars") {
		t.Fatalf("invalid input was saved: %s", again.Body)
	}
	// Valid quiet hours are saved (and the shipping category kept on).
	form = url.Values{"channel.in_app": {"on"}, "category.shipping": {"on"}, "category.shipping.in_app": {"on"},
		"quiet_start": {"22:00"}, "quiet_end": {"07:00"}, "quiet_timezone": {"Europe/Berlin"}}
	if r := h.Do(http.MethodPost, u.RequestURI(), "", form.Encode(), "Content-Type", "application/x-www-form-urlencoded"); r.Status != http.StatusOK {
		t.Fatalf("valid quiet hours: %d %s", r.Status, r.Body)
	}
	saved := h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/ada/preferences", key, nil)
	quiet, _ := saved.JSON["preferences"].(map[string]any)["quiet_hours"].(map[string]any)
	if quiet["start"] != "22:00" || quiet["end"] != "07:00" || quiet["timezone"] != "Europe/Berlin" {
		t.Fatalf("quiet hours after the page: %s", saved.Body)
	}
	// Every save on the page is in the tenant's audit log, by the page, not by a key.
	audit := supportItems(t, h.MustDo(http.StatusOK, http.MethodGet, "/v1/audit-log?action=preferences.put", key, nil))
	if len(audit) < 2 {
		t.Fatalf("page saves audited: %d entries", len(audit))
	}
	for _, e := range audit {
		if e["api_key_id"] != "preference-centre" || e["target"] != "ada" || e["status"] != float64(http.StatusOK) {
			t.Fatalf("audit entry of a page save: %v", e)
		}
	}
	// Revoking the user's tokens ends the links minted before, as it ends the tokens.
	h.MustDo(http.StatusNoContent, http.MethodDelete, "/v1/users/ada/tokens", key, nil)
	if r := h.Do(http.MethodGet, u.RequestURI(), "", nil); r.Status != http.StatusBadRequest || strings.Contains(string(r.Body), "marketing") {
		t.Fatalf("a link minted before DELETE /v1/users/ada/tokens: %d %s", r.Status, r.Body)
	}
	fresh := h.MustDo(http.StatusOK, http.MethodPost, "/v1/users/ada/inbox/preferences-link", key, nil)
	fu, err := url.Parse(fresh.JSON["url"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if r := h.Do(http.MethodGet, fu.RequestURI(), "", nil); r.Status != http.StatusOK {
		t.Fatalf("a link minted after the revocation: %d %s", r.Status, r.Body)
	}
}
