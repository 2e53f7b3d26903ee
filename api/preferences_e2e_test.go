package api_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/unsubscribe"
)

// prefsOf returns GET /v1/users/{user}/preferences as raw JSON of its parts.
func prefsOf(t *testing.T, h *apitest.Harness, key, userID string) (own, effective string) {
	t.Helper()
	r := h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/"+userID+"/preferences", key, nil)
	o, _ := json.Marshal(r.JSON["preferences"])
	e, _ := json.Marshal(r.JSON["effective"])
	return string(o), string(e)
}

// simpleTemplate is apitest.SimpleTemplate's content on the given channels, as a
// PUT /v1/templates body.
func simpleTemplate(category string, critical bool, channels ...string) map[string]any {
	s := apitest.SimpleTemplate("")
	content := map[string]any{"in_app": s.InApp, "email": s.Email, "sms": s.SMS, "push": s.Push}
	t := map[string]any{"category": category, "critical": critical}
	for _, ch := range channels {
		t[ch] = content[ch]
	}
	return t
}

func TestPreferencesAndSettingsAPI(t *testing.T) {
	t.Parallel()
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	_, key := h.Tenant("prefs")
	_, otherKey := h.Tenant("prefs-other")
	h.PutUser(key, "ada", map[string]any{"email": "ada@example.com"})

	h.MustDo(http.StatusNotFound, http.MethodGet, "/v1/users/nobody/preferences", key, nil)
	h.MustDo(http.StatusNotFound, http.MethodPut, "/v1/users/nobody/preferences", key, map[string]any{})
	h.MustDo(http.StatusNotFound, http.MethodGet, "/v1/users/ada/preferences", otherKey, nil)
	if own, eff := prefsOf(t, h, key, "ada"); own != "{}" || eff != "{}" {
		t.Fatalf("never set: own %s effective %s", own, eff)
	}

	defaults := map[string]any{"categories": map[string]any{"digest": map[string]any{"enabled": false}},
		"quiet_hours": map[string]any{"start": "22:00", "end": "07:00", "timezone": "Europe/Berlin"}}
	r := h.MustDo(http.StatusOK, http.MethodPut, "/v1/preferences/defaults", key, defaults)
	if got, _ := json.Marshal(r.JSON); string(got) != `{"categories":{"digest":{"enabled":false}},"quiet_hours":{"end":"07:00","start":"22:00","timezone":"Europe/Berlin"}}` {
		t.Fatalf("defaults: %s", r.Body)
	}
	if own, eff := prefsOf(t, h, key, "ada"); own != "{}" || !strings.Contains(eff, `"digest":{"enabled":false}`) || !strings.Contains(eff, `"22:00"`) {
		t.Fatalf("inherits defaults: own %s effective %s", own, eff)
	}
	if r = h.MustDo(http.StatusOK, http.MethodGet, "/v1/preferences/defaults", otherKey, nil); len(r.JSON) != 0 {
		t.Fatalf("other tenant's defaults: %s", r.Body)
	}

	mine := map[string]any{"channels": map[string]any{"sms": false},
		"categories":  map[string]any{"digest": map[string]any{"enabled": true}, "shipping": map[string]any{"channels": map[string]any{"sms": true, "email": false}}},
		"quiet_hours": map[string]any{"start": "", "end": ""}}
	r = h.MustDo(http.StatusOK, http.MethodPut, "/v1/users/ada/preferences", key, mine)
	own, eff := prefsOf(t, h, key, "ada")
	if r.Str("user_id") != "ada" || own != `{"categories":{"digest":{"enabled":true},"shipping":{"channels":{"email":false,"sms":true}}},"channels":{"sms":false},"quiet_hours":{"end":"","start":""}}` ||
		eff != own {
		t.Fatalf("user over defaults: own %s effective %s", own, eff)
	}

	// Validation names the field; nothing is saved.
	for _, tc := range []struct {
		body        any
		code, field string
	}{
		{map[string]any{"channels": map[string]any{"fax": false}}, "invalid_field", "channels.fax"},
		{map[string]any{"categories": map[string]any{"shipping": map[string]any{"channels": map[string]any{"pigeon": true}}}}, "invalid_field", "categories.shipping.channels.pigeon"},
		{map[string]any{"quiet_hours": map[string]any{"start": "25:00", "end": "07:00"}}, "invalid_field", "quiet_hours.start"},
		{map[string]any{"quiet_hours": map[string]any{"start": "22:00", "end": ""}}, "invalid_field", "quiet_hours"},
		{map[string]any{"quiet_hours": map[string]any{"start": "22:00", "end": "07:00", "timezone": "Mars/Olympus"}}, "invalid_field", "quiet_hours.timezone"},
		{map[string]any{"channels": map[string]any{"email": "no"}}, "invalid_type", "channels"},
		{map[string]any{"categories": map[string]any{"digest": map[string]any{"enabled": true, "mute": true}}}, "unknown_field", "mute"},
		{map[string]any{"email": false}, "unknown_field", "email"},
	} {
		r := h.Do(http.MethodPut, "/v1/users/ada/preferences", key, tc.body)
		apitest.WantError(t, r, http.StatusBadRequest, tc.code, tc.field)
		r = h.Do(http.MethodPut, "/v1/preferences/defaults", key, tc.body)
		apitest.WantError(t, r, http.StatusBadRequest, tc.code, tc.field)
	}
	if again, _ := prefsOf(t, h, key, "ada"); again != own {
		t.Fatalf("a rejected PUT changed preferences: %s", again)
	}

	// Settings: caps and default locale, independent of the preference defaults.
	if r = h.MustDo(http.StatusOK, http.MethodGet, "/v1/settings", key, nil); string(r.Body) != `{"category_caps":{},"default_locale":"en","retry_policies":{},"ordering_max_hold":"5m0s","api_rate_per_second":0,"api_burst":0,"daily_quota":0`+defaultRetentionJSON {
		t.Fatalf("default settings: %s", r.Body)
	}
	r = h.MustDo(http.StatusOK, http.MethodPut, "/v1/settings", key, map[string]any{"category_caps": map[string]any{"marketing": 5}, "default_locale": "de-AT"})
	if string(r.Body) != `{"category_caps":{"marketing":5},"default_locale":"de-AT","retry_policies":{},"ordering_max_hold":"5m0s","api_rate_per_second":0,"api_burst":0,"daily_quota":0`+defaultRetentionJSON {
		t.Fatalf("settings: %s", r.Body)
	}
	apitest.WantError(t, h.Do(http.MethodPut, "/v1/settings", key, map[string]any{"category_caps": map[string]any{"marketing": 0}}), 400, "invalid_field", "category_caps.marketing")
	apitest.WantError(t, h.Do(http.MethodPut, "/v1/settings", key, map[string]any{"category_caps": map[string]any{"bad cat": 1}}), 400, "invalid_field", "category_caps.bad cat")
	apitest.WantError(t, h.Do(http.MethodPut, "/v1/settings", key, map[string]any{"category_caps": map[string]any{"marketing": 1.5}}), 400, "invalid_type", "category_caps.marketing")
	apitest.WantError(t, h.Do(http.MethodPut, "/v1/settings", key, map[string]any{"category_caps": map[string]any{"marketing": "5"}}), 400, "invalid_type", "category_caps.marketing")
	apitest.WantError(t, h.Do(http.MethodPut, "/v1/settings", key, map[string]any{"default_locale": "not a locale"}), 400, "invalid_field", "default_locale")
	apitest.WantError(t, h.Do(http.MethodPut, "/v1/settings", key, map[string]any{"preference_defaults": map[string]any{}}), 400, "unknown_field", "preference_defaults")
	if r = h.MustDo(http.StatusOK, http.MethodGet, "/v1/preferences/defaults", key, nil); r.JSON["categories"] == nil {
		t.Fatalf("PUT /v1/settings lost the preference defaults: %s", r.Body)
	}
	h.MustDo(http.StatusOK, http.MethodPut, "/v1/preferences/defaults", key, map[string]any{})
	if r = h.MustDo(http.StatusOK, http.MethodGet, "/v1/settings", key, nil); string(r.Body) != `{"category_caps":{"marketing":5},"default_locale":"de-AT","retry_policies":{},"ordering_max_hold":"5m0s","api_rate_per_second":0,"api_burst":0,"daily_quota":0`+defaultRetentionJSON {
		t.Fatalf("PUT /v1/preferences/defaults lost the settings: %s", r.Body)
	}
	if r = h.MustDo(http.StatusOK, http.MethodGet, "/v1/settings", otherKey, nil); string(r.Body) != `{"category_caps":{},"default_locale":"en","retry_policies":{},"ordering_max_hold":"5m0s","api_rate_per_second":0,"api_burst":0,"daily_quota":0`+defaultRetentionJSON {
		t.Fatalf("other tenant's settings: %s", r.Body)
	}
}

// Opt-outs suppress with the right reason; critical templates bypass category
// opt-outs, caps and quiet hours but not a channel turned off or without address.
func TestOptOutsAndCriticalBypass(t *testing.T) {
	t.Parallel()
	h := apitest.Start(t, apitest.Options{})
	_, key := h.Tenant("optout")
	h.AllowCritical(key)
	h.MustDo(http.StatusCreated, http.MethodPut, "/v1/templates/news", key, simpleTemplate("marketing", false, "in_app", "email"))
	h.MustDo(http.StatusCreated, http.MethodPut, "/v1/templates/digest", key, simpleTemplate("digest", false, "in_app"))
	h.MustDo(http.StatusCreated, http.MethodPut, "/v1/templates/reset", key, simpleTemplate("security", true, "in_app", "email", "sms"))
	h.MustDo(http.StatusOK, http.MethodPut, "/v1/preferences/defaults", key, map[string]any{"categories": map[string]any{"digest": map[string]any{"enabled": false}}})
	h.MustDo(http.StatusOK, http.MethodPut, "/v1/settings", key, map[string]any{"category_caps": map[string]any{"security": 1}})

	now := time.Now().UTC()
	users := map[string]map[string]any{
		"chan":   {"channels": map[string]any{"email": false}},
		"cat":    {"categories": map[string]any{"marketing": map[string]any{"enabled": false}}},
		"catch":  {"categories": map[string]any{"marketing": map[string]any{"channels": map[string]any{"email": false}}}},
		"dflt":   {},
		"over":   {"categories": map[string]any{"digest": map[string]any{"enabled": true}}},
		"crit":   {"categories": map[string]any{"security": map[string]any{"enabled": false}}, "quiet_hours": map[string]any{"start": now.Add(-time.Hour).Format("15:04"), "end": now.Add(2 * time.Hour).Format("15:04"), "timezone": "UTC"}},
		"critch": {"channels": map[string]any{"email": false}},
	}
	for u, p := range users {
		h.PutUser(key, u, map[string]any{"email": u + "@example.com"}) // no phone: sms has no address
		h.MustDo(http.StatusOK, http.MethodPut, "/v1/users/"+u+"/preferences", key, p)
	}

	type want struct {
		channel herald.Channel
		status  herald.DeliveryStatus
		reason  herald.Reason
	}
	cases := []struct {
		user, template string
		wants          []want
	}{
		{"chan", "news", []want{{"email", "suppressed", "opted_out_channel"}, {"in_app", "delivered", ""}}},
		{"cat", "news", []want{{"email", "suppressed", "opted_out_category"}, {"in_app", "suppressed", "opted_out_category"}}},
		{"catch", "news", []want{{"email", "suppressed", "opted_out_category"}, {"in_app", "delivered", ""}}},
		{"dflt", "digest", []want{{"in_app", "suppressed", "opted_out_category"}}},
		{"over", "digest", []want{{"in_app", "delivered", ""}}},
		// Category off, quiet hours now, cap 1: sent anyway, twice; sms has no address.
		{"crit", "reset", []want{{"email", "sent", ""}, {"in_app", "delivered", ""}, {"sms", "suppressed", "no_address"}}},
		{"crit", "reset", []want{{"email", "sent", ""}, {"in_app", "delivered", ""}, {"sms", "suppressed", "no_address"}}},
		{"critch", "reset", []want{{"email", "suppressed", "opted_out_channel"}, {"in_app", "delivered", ""}, {"sms", "suppressed", "no_address"}}},
	}
	ids := make([]string, len(cases))
	for i, c := range cases {
		ids[i] = accept(t, h, key, c.user, c.template, map[string]any{"n": i})
	}
	for i, c := range cases {
		for _, w := range c.wants {
			got := h.AwaitChannel(key, ids[i], w.channel, w.status, w.reason, 20*time.Second)
			if w.reason == "" && got["reason"] != nil {
				t.Errorf("%s/%s %s: unexpected reason %v", c.user, c.template, w.channel, got["reason"])
			}
		}
	}
	if overall, _ := h.Channels(key, ids[1]); overall != "suppressed" {
		t.Errorf("every channel suppressed: overall %s", overall)
	}
}

// Quiet hours: email waits (scheduled, quiet_hours) until the window ends in the
// user's time zone while in-app goes at once; the wait renders the template
// version accepted, not a later edit; a preference change during the wait counts.
func TestQuietHoursDeferUntilWindowEnds(t *testing.T) {
	t.Parallel()
	env := startGateEnv(t)
	h, key := env.h, env.key
	tmpl := func(v string) map[string]any {
		return map[string]any{"category": "news",
			"in_app": map[string]any{"title": v + " title", "body": "body"},
			"email":  map[string]any{"subject": v + " subject", "text": v + " text"}}
	}
	h.MustDo(http.StatusCreated, http.MethodPut, "/v1/templates/digest", key, tmpl("v1"))

	// A window from a minute ago to the next minute boundary at least 15 s away, in a
	// zone with a half-hour offset; HH:MM has minute granularity.
	const tz = "America/St_Johns"
	loc, err := time.LoadLocation(tz)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().In(loc)
	end := now.Add(15 * time.Second).Truncate(time.Minute).Add(time.Minute)
	quiet := map[string]any{"start": now.Add(-time.Minute).Format("15:04"), "end": end.Format("15:04")}
	h.PutUser(key, "qa", map[string]any{"email": "qa@example.com", "timezone": tz})
	h.PutUser(key, "qb", map[string]any{"email": "qb@example.com"})
	h.PutUser(key, "qc", map[string]any{"email": "qc@example.com", "timezone": tz})
	h.MustDo(http.StatusOK, http.MethodPut, "/v1/users/qa/preferences", key, map[string]any{"quiet_hours": quiet})
	quietB := map[string]any{"start": quiet["start"], "end": quiet["end"], "timezone": tz}
	h.MustDo(http.StatusOK, http.MethodPut, "/v1/users/qb/preferences", key, map[string]any{"quiet_hours": quietB})

	a := accept(t, h, key, "qa", "digest", map[string]any{"n": 1})
	b := accept(t, h, key, "qb", "digest", map[string]any{"n": 2}, "email")
	h.AwaitChannel(key, a, "in_app", "delivered", "", 20*time.Second)
	h.AwaitChannel(key, a, "email", "scheduled", "quiet_hours", 20*time.Second)
	h.AwaitChannel(key, b, "email", "scheduled", "quiet_hours", 20*time.Second)
	if got := inboxTitle(t, h, key, "qa", a); got != "v1 title" {
		t.Fatalf("in-app title %q", got)
	}

	// While they wait: a new template version, and qb turns email off.
	h.MustDo(http.StatusOK, http.MethodPut, "/v1/templates/digest", key, tmpl("v2"))
	h.MustDo(http.StatusOK, http.MethodPut, "/v1/users/qb/preferences", key, map[string]any{"channels": map[string]any{"email": false}, "quiet_hours": quietB})
	c := accept(t, h, key, "qc", "digest", map[string]any{"n": 3}, "email")
	h.AwaitChannel(key, c, "email", "sent", "", 20*time.Second)
	if got := mailSubject(mailOf(t, env.sg, c)); got != "v2 subject" {
		t.Fatalf("a notification accepted after the edit: subject %q", got)
	}
	if time.Now().After(end) {
		t.Fatalf("the quiet window ended before the test could check the wait (end %s)", end)
	}
	if env.sg.Accepted() != 1 {
		t.Fatalf("SendGrid accepted %d messages during the quiet hours, want only qc's", env.sg.Accepted())
	}

	sent := h.AwaitChannel(key, a, "email", "sent", "", time.Until(end)+30*time.Second)
	sentAt, err := time.Parse(time.RFC3339Nano, sent["sent_at"].(string))
	if err != nil || sentAt.Before(end) {
		t.Fatalf("email sent at %v (%v), before the window ended at %s", sentAt, err, end)
	}
	if got := mailSubject(mailOf(t, env.sg, a)); got != "v1 subject" {
		t.Fatalf("the deferred email rendered %q, not the version it was accepted with", got)
	}
	h.AwaitChannel(key, b, "email", "suppressed", "opted_out_channel", 20*time.Second)
}

// 50 simultaneous notifications against a cap of 5: exactly 5 delivered.
func TestCapsUnderConcurrency(t *testing.T) {
	t.Parallel()
	h := apitest.Start(t, apitest.Options{})
	_, key := h.Tenant("caps")
	h.MustDo(http.StatusCreated, http.MethodPut, "/v1/templates/promo", key, simpleTemplate("marketing", false, "in_app"))
	h.MustDo(http.StatusCreated, http.MethodPut, "/v1/templates/ship", key, simpleTemplate("shipping", false, "in_app"))
	h.MustDo(http.StatusOK, http.MethodPut, "/v1/settings", key, map[string]any{"category_caps": map[string]any{"marketing": 5}})
	h.PutUser(key, "max", map[string]any{})
	h.PutUser(key, "min", map[string]any{})

	const n = 50
	ids := make([]string, n)
	statuses := make([]int, n)
	concurrently(n, func(i int) {
		r := h.Submit(key, map[string]any{"user_id": "max", "template_id": "promo", "idempotency_key": fmt.Sprintf("promo-%d", i)})
		statuses[i], ids[i] = r.Status, r.Str("notification_id")
	})
	for i, s := range statuses {
		if s != http.StatusAccepted {
			t.Fatalf("submission %d: %d", i, s)
		}
	}
	other := accept(t, h, key, "max", "ship", nil)      // another category: not capped
	otherUser := accept(t, h, key, "min", "promo", nil) // another user: own cap

	counts := map[string]int{}
	pending := append([]string(nil), ids...)
	h.Eventually(60*time.Second, "every capped notification final", func() bool {
		var still []string
		for _, id := range pending {
			_, chans := h.Channels(key, id)
			switch st := chans["in_app"]; {
			case st == nil:
				still = append(still, id)
			case st["status"] == "delivered":
				counts["delivered"]++
			case st["status"] == "suppressed" && st["reason"] == "cap_exceeded":
				counts["cap_exceeded"]++
			case st["status"] == "suppressed" || st["status"] == "failed":
				t.Fatalf("%s: unexpected state %v", id, st)
			default:
				still = append(still, id)
			}
		}
		pending = still
		return len(pending) == 0
	})
	if counts["delivered"] != 5 || counts["cap_exceeded"] != 45 {
		t.Fatalf("cap 5 of 50: %v", counts)
	}
	h.AwaitChannel(key, other, "in_app", "delivered", "", 20*time.Second)
	h.AwaitChannel(key, otherUser, "in_app", "delivered", "", 20*time.Second)
}

// unsubscribeLink returns the path+query of the List-Unsubscribe link of a mail.
func unsubscribeLink(t *testing.T, headers map[string]string) (path string, token string) {
	t.Helper()
	raw := headers["List-Unsubscribe"]
	if !strings.HasPrefix(raw, "<"+publicBase+unsubscribe.Path+"?") || !strings.HasSuffix(raw, ">") ||
		headers["List-Unsubscribe-Post"] != "List-Unsubscribe=One-Click" {
		t.Fatalf("RFC 8058 headers: %v", headers)
	}
	u, err := url.Parse(strings.Trim(raw, "<>"))
	if err != nil {
		t.Fatal(err)
	}
	return u.RequestURI(), u.Query().Get("token")
}

func TestOneClickUnsubscribe(t *testing.T) {
	t.Parallel()
	env := startGateEnv(t)
	h, key := env.h, env.key
	h.AllowCritical(key)
	h.MustDo(http.StatusCreated, http.MethodPut, "/v1/templates/weekly", key, simpleTemplate("marketing", false, "in_app", "email"))
	h.MustDo(http.StatusCreated, http.MethodPut, "/v1/templates/alert", key, simpleTemplate("security", true, "email"))
	h.PutUser(key, "ada", map[string]any{"email": "ada@example.com"})
	_, otherKey := h.Tenant("unsub-other")

	first := accept(t, h, key, "ada", "weekly", map[string]any{"n": 1}, "email")
	alert := accept(t, h, key, "ada", "alert", map[string]any{"n": 2})
	h.AwaitChannel(key, first, "email", "sent", "", 20*time.Second)
	h.AwaitChannel(key, alert, "email", "sent", "", 20*time.Second)
	if hdr := mailOf(t, env.sg, alert).Headers; hdr["List-Unsubscribe"] != "" {
		t.Fatalf("a critical email carries an unsubscribe link: %v", hdr)
	}
	link, token := unsubscribeLink(t, mailOf(t, env.sg, first).Headers)
	form := []string{"Content-Type", "application/x-www-form-urlencoded"}
	before, _ := prefsOf(t, h, key, "ada")

	// GET shows a confirmation page and changes nothing.
	r := h.MustDo(http.StatusOK, http.MethodGet, link, "", nil)
	if page := string(r.Body); !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") || !strings.Contains(page, `<form method="post">`) ||
		!strings.Contains(page, "marketing") || r.Header.Get("X-Frame-Options") != "DENY" || r.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("confirmation page: %v %s", r.Header, page)
	}

	// Bad tokens: 400, nothing changes.
	payload, sig, _ := strings.Cut(token, ".")
	flipped := []byte(sig)
	flipped[3] ^= 1
	forged, _ := json.Marshal(unsubscribe.Claims{TenantID: env.tenantID, UserID: "ada", Category: "shipping"})
	mine := unsubscribe.NewSigner([]byte(h.SecretsKey))
	for name, bad := range map[string]string{
		"tampered signature": payload + "." + string(flipped),
		"swapped payload":    base64.RawURLEncoding.EncodeToString(forged) + "." + sig,
		"foreign key":        unsubscribe.NewSigner([]byte("another deployment")).Token(unsubscribe.Claims{TenantID: env.tenantID, UserID: "ada", Category: "marketing"}),
		"unknown user":       mine.Token(unsubscribe.Claims{TenantID: env.tenantID, UserID: "nobody", Category: "marketing"}),
		"malformed":          "not-a-token",
	} {
		r := h.Do(http.MethodPost, unsubscribe.Path+"?token="+url.QueryEscape(bad), "", "List-Unsubscribe=One-Click", form...)
		if f, code := r.ErrorField(); r.Status != http.StatusBadRequest || code != "invalid_token" || f != "token" {
			t.Errorf("%s: %d %s", name, r.Status, r.Body)
		}
		if r := h.Do(http.MethodGet, unsubscribe.Path+"?token="+url.QueryEscape(bad), "", nil); r.Status != http.StatusBadRequest ||
			!strings.Contains(string(r.Body), "not valid") {
			t.Errorf("%s: GET %d %s", name, r.Status, r.Body)
		}
	}
	apitest.WantError(t, h.Do(http.MethodPost, unsubscribe.Path, "", "List-Unsubscribe=One-Click", form...), 400, "missing_field", "token")
	if after, _ := prefsOf(t, h, key, "ada"); after != before {
		t.Fatalf("a rejected unsubscribe changed preferences: %s → %s", before, after)
	}

	// The link from the email, as a mail client posts it (RFC 8058), twice.
	for range 2 {
		r = h.MustDo(http.StatusOK, http.MethodPost, link, "", "List-Unsubscribe=One-Click", form...)
		if r.JSON["unsubscribed"] != true || r.Str("category") != "marketing" {
			t.Fatalf("unsubscribe: %s", r.Body)
		}
	}
	if own, _ := prefsOf(t, h, key, "ada"); own != `{"categories":{"marketing":{"enabled":false}}}` {
		t.Fatalf("preferences after unsubscribe: %s", own)
	}
	// A browser submitting the confirmation form gets a page back.
	r = h.MustDo(http.StatusOK, http.MethodPost, link, "", "List-Unsubscribe=One-Click", append(form, "Accept", "text/html,*/*;q=0.8")...)
	if !strings.Contains(string(r.Body), "Unsubscribed") {
		t.Fatalf("HTML answer: %s", r.Body)
	}
	h.MustDo(http.StatusNotFound, http.MethodGet, "/v1/users/ada/preferences", otherKey, nil)

	next := accept(t, h, key, "ada", "weekly", map[string]any{"n": 3})
	h.AwaitChannel(key, next, "email", "suppressed", "opted_out_category", 20*time.Second)
	h.AwaitChannel(key, next, "in_app", "suppressed", "opted_out_category", 20*time.Second)
	critical := accept(t, h, key, "ada", "alert", map[string]any{"n": 4})
	h.AwaitChannel(key, critical, "email", "sent", "", 20*time.Second)
}

// defaultRetentionJSON ends a settings document of a tenant with the
// operator's default retention (docs/retention.md).
const defaultRetentionJSON = `,"retention":{"audit":"8760h0m0s","campaigns":"720h0m0s","dead_letters":"720h0m0s","inbox_age":"2160h0m0s","inbox_items":100,"notifications":"720h0m0s","sandbox":"168h0m0s","webhooks":"720h0m0s"},"retention_max":{"audit":"8760h0m0s","campaigns":"720h0m0s","dead_letters":"720h0m0s","inbox_age":"2160h0m0s","inbox_items":100,"notifications":"720h0m0s","sandbox":"168h0m0s","webhooks":"720h0m0s"}}`
