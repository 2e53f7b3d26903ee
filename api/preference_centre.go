package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/preferences"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/templates"
)

// The preference centre (docs/preference-centre.md): a page Herald hosts at
// /preferences where a user sees every category the tenant's templates use and
// every channel, turns them on and off, and sets quiet hours. It is opened by a
// signed link (unsubscribe.Signer.PageURL, like the one-click unsubscribe link:
// no API key, the token names tenant and user), which the tenant's server gets
// from POST /v1/users/{id}/inbox/preferences-link with its API key, or the
// <herald-inbox> component with the user's token. The page is rendered on the
// server with html/template (every value escaped in its context), needs no
// script, and saves with a plain form POST to its own URL.

const preferencesLinkRoute = "/v1/users/:user_id/inbox/preferences-link"

// Branding bounds.
var brandColor = regexp.MustCompile(`^#[0-9a-fA-F]{6}$`)

const (
	maxBrandNameBytes = 100
	maxLogoURLBytes   = 2048
)

// validBranding checks a tenant's branding: a name of at most 100 bytes of
// printable UTF-8, a colour #rrggbb, a logo URL that is an absolute https URL
// without credentials. Each may be empty (the default).
func validBranding(b store.Branding) *httpError {
	if len(b.Name) > maxBrandNameBytes || !utf8.ValidString(b.Name) || strings.IndexFunc(b.Name, unicode.IsControl) >= 0 {
		return badField("branding.name", "invalid_field", "branding.name must be at most %d bytes of printable text", maxBrandNameBytes)
	}
	if b.Color != "" && !brandColor.MatchString(b.Color) {
		return badField("branding.color", "invalid_field", "branding.color must be a colour #rrggbb, such as #1a73e8")
	}
	if b.LogoURL != "" {
		u, err := url.Parse(b.LogoURL)
		if err != nil || len(b.LogoURL) > maxLogoURLBytes || u.Scheme != "https" || u.Host == "" || u.User != nil ||
			strings.ContainsAny(b.LogoURL, " \t\r\n\"'<>\\`") {
			return badField("branding.logo_url", "invalid_field", "branding.logo_url must be an https URL of at most %d bytes, such as https://cdn.example.com/logo.png", maxLogoURLBytes)
		}
	}
	return nil
}

// pageText is the page's wording in one language.
type pageText struct {
	Title, Intro, Channels, Categories, Category, All, QuietHours, QuietHint, From, Until, Timezone, Save, Saved, Invalid string
	ChannelNames                                                                                                          map[herald.Channel]string
}

// pageTexts are the page's languages; the user's locale picks one as a
// template's variant is picked (user locale, its language, the tenant's
// default locale, English).
var pageTexts = map[string]pageText{
	"en": {Title: "Notification preferences", Intro: "Choose what you hear about and where.", Channels: "Channels",
		Categories: "Topics", Category: "Topic", All: "On", QuietHours: "Quiet hours",
		QuietHint: "No email, SMS or push between these times (leave empty for none).", From: "From", Until: "Until",
		Timezone: "Time zone", Save: "Save", Saved: "Your preferences are saved.", Invalid: "Not saved:",
		ChannelNames: map[herald.Channel]string{herald.ChannelInApp: "In-app", herald.ChannelEmail: "Email", herald.ChannelSMS: "SMS", herald.ChannelPush: "Push"}},
	"de": {Title: "Benachrichtigungseinstellungen", Intro: "Wählen Sie, worüber und wo Sie benachrichtigt werden.", Channels: "Kanäle",
		Categories: "Themen", Category: "Thema", All: "An", QuietHours: "Ruhezeiten",
		QuietHint: "Keine E-Mails, SMS oder Push-Nachrichten in dieser Zeit (leer lassen für keine).", From: "Von", Until: "Bis",
		Timezone: "Zeitzone", Save: "Speichern", Saved: "Ihre Einstellungen sind gespeichert.", Invalid: "Nicht gespeichert:",
		ChannelNames: map[herald.Channel]string{herald.ChannelInApp: "In der App", herald.ChannelEmail: "E-Mail", herald.ChannelSMS: "SMS", herald.ChannelPush: "Push"}},
	"fr": {Title: "Préférences de notification", Intro: "Choisissez de quoi et où vous êtes informé.", Channels: "Canaux",
		Categories: "Sujets", Category: "Sujet", All: "Activé", QuietHours: "Heures calmes",
		QuietHint: "Ni e-mail, ni SMS, ni push pendant ces heures (laisser vide pour aucune).", From: "De", Until: "À",
		Timezone: "Fuseau horaire", Save: "Enregistrer", Saved: "Vos préférences sont enregistrées.", Invalid: "Non enregistré :",
		ChannelNames: map[herald.Channel]string{herald.ChannelInApp: "Dans l'app", herald.ChannelEmail: "E-mail", herald.ChannelSMS: "SMS", herald.ChannelPush: "Push"}},
}

// defaultAccent is the accent colour without branding.
const defaultAccent = "#3b5bdb"

var preferencePage = template.Must(template.New("preferences").Parse(`<!doctype html>
<html lang="{{.Lang}}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>{{.T.Title}}{{if .Brand.Name}} · {{.Brand.Name}}{{end}}</title>
<style>
body{font-family:system-ui,sans-serif;max-width:40rem;margin:2rem auto;padding:0 1rem;line-height:1.5;color:#222}
header{display:flex;align-items:center;gap:.75rem;border-bottom:4px solid {{.Accent}};padding-bottom:.5rem}
header img{max-height:40px;max-width:160px}
table{border-collapse:collapse;width:100%}th,td{padding:.35rem .5rem;text-align:center}th:first-child,td:first-child{text-align:left}
tr:nth-child(even){background:#f5f5f5}
button{font-size:1rem;padding:.5rem 1.25rem;background:{{.Accent}};color:#fff;border:0;border-radius:4px}
.notice{padding:.5rem .75rem;border-left:4px solid {{.Accent}};background:#f0f4ff}.error{border-color:#c92a2a;background:#fff0f0}
</style>
</head>
<body>
<header>{{if .Brand.LogoURL}}<img src="{{.Brand.LogoURL}}" alt="">{{end}}<strong class="brand">{{.Brand.Name}}</strong></header>
<h1>{{.T.Title}}</h1>
<p>{{.T.Intro}}</p>
{{- if .Saved}}<p class="notice" role="status" id="saved">{{.T.Saved}}</p>{{end}}
{{- if .Problem}}<p class="notice error" role="alert" id="problem">{{.T.Invalid}} {{.Problem}}</p>{{end}}
<form method="post">
<h2>{{.T.Channels}}</h2>
<p>{{range .Channels}}<label><input type="checkbox" name="channel.{{.Name}}" value="on"{{if .On}} checked{{end}}> {{.Label}}</label> {{end}}</p>
{{- if .Categories}}
<h2>{{.T.Categories}}</h2>
<table>
<tr><th>{{$.T.Category}}</th><th>{{$.T.All}}</th>{{range $.Channels}}<th>{{.Label}}</th>{{end}}</tr>
{{- range .Categories}}
<tr data-category="{{.Name}}"><td>{{.Name}}</td><td><input type="checkbox" name="category.{{.Name}}" value="on" aria-label="{{.Name}}"{{if .Enabled}} checked{{end}}></td>
{{- $cat := .Name}}{{range .Channels}}<td><input type="checkbox" name="category.{{$cat}}.{{.Name}}" value="on" aria-label="{{$cat}} {{.Label}}"{{if .On}} checked{{end}}></td>{{end}}</tr>
{{- end}}
</table>
{{- end}}
<h2>{{.T.QuietHours}}</h2>
<p>{{.T.QuietHint}}</p>
<p><label>{{.T.From}} <input type="time" name="quiet_start" value="{{.QuietStart}}"></label>
<label>{{.T.Until}} <input type="time" name="quiet_end" value="{{.QuietEnd}}"></label>
<label>{{.T.Timezone}} <input type="text" name="quiet_timezone" value="{{.QuietZone}}" placeholder="Europe/London" maxlength="64"></label></p>
<p><button type="submit">{{.T.Save}}</button></p>
</form>
</body>
</html>
`))

type pageChannel struct {
	Name  herald.Channel
	Label string
	On    bool
}

type pageCategory struct {
	Name     string
	Enabled  bool
	Channels []pageChannel
}

type preferencePageData struct {
	Lang       string
	T          pageText
	Brand      store.Branding
	Accent     string
	Channels   []pageChannel
	Categories []pageCategory
	QuietStart string
	QuietEnd   string
	QuietZone  string
	Saved      bool
	Problem    string
}

// preferencePageHeaders: no caching (the token is in the URL), no Referer
// leaking it, no framing (no clickjacked toggles), no script at all; images
// (the tenant's logo) from https only.
func preferencePageHeaders(c *gin.Context) {
	c.Header("Cache-Control", "no-store")
	c.Header("Referrer-Policy", "no-referrer")
	c.Header("X-Content-Type-Options", "nosniff")
	c.Header("X-Frame-Options", "DENY")
	c.Header("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src https:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
}

// verifyPage checks the page token: signed by this deployment for the
// preference centre, naming a user that exists.
func (h *usersRoom) verifyPage(c *gin.Context) (tenantID string, user store.User, ok bool) {
	fail := func() {
		preferencePageHeaders(c)
		c.Data(http.StatusBadRequest, "text/html; charset=utf-8", []byte(`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Link not valid</title></head>`+
			`<body><h1>Link not valid</h1><p>This link is not valid. Use the link from your most recent message.</p></body></html>`))
		c.Abort()
	}
	if h.unsubscribe == nil {
		h.abort(c, notFound("route"))
		return "", user, false
	}
	tenantID, userID, issued, err := h.unsubscribe.VerifyPage(c.Query("token"), time.Now())
	if err != nil {
		fail()
		return "", user, false
	}
	// DELETE /v1/users/{id}/tokens ends the user's links as it ends their tokens:
	// a link minted with a user token must not outlive that token's revocation.
	notBefore, err := h.store.UserTokensNotBefore(c.Request.Context(), tenantID, userID)
	if err != nil {
		h.abort(c, err)
		return "", user, false
	}
	if issued.Before(notBefore) {
		fail()
		return "", user, false
	}
	user, err = h.store.GetUser(c.Request.Context(), tenantID, userID)
	if errors.Is(err, herald.ErrNotFound) {
		fail()
		return "", user, false
	}
	if err != nil {
		h.abort(c, err)
		return "", user, false
	}
	return tenantID, user, true
}

// pageState reads what the page shows: the user's effective preferences, the
// categories (the tenant's templates', its defaults', the user's own), the
// branding and the language.
func (h *usersRoom) pageState(c *gin.Context, tenantID string, user store.User) (preferencePageData, preferences.Preferences, []string, error) {
	ctx := c.Request.Context()
	var d preferencePageData
	own, err := h.store.GetPreferences(ctx, tenantID, user.UserID)
	if err != nil {
		return d, own, nil, err
	}
	ts, err := h.store.GetTenantSettings(ctx, tenantID)
	if err != nil {
		return d, own, nil, err
	}
	cats, err := h.store.TenantCategories(ctx, tenantID)
	if err != nil {
		return d, own, nil, err
	}
	for _, doc := range []preferences.Preferences{ts.PreferenceDefaults, own} {
		for cat := range doc.Categories {
			if !slices.Contains(cats, cat) && len(cats) < preferences.MaxCategories {
				cats = append(cats, cat)
			}
		}
	}
	sort.Strings(cats)
	if d.Brand, err = h.store.GetInboxBranding(ctx, tenantID); err != nil {
		return d, own, nil, err
	}
	d.Accent = defaultAccent
	if brandColor.MatchString(d.Brand.Color) {
		d.Accent = d.Brand.Color
	}
	locale := ""
	if user.Locale != nil {
		locale = *user.Locale
	}
	d.Lang = templates.ResolveLocale(locale, []string{"de", "en", "fr"}, ts.DefaultLocale)
	if _, ok := pageTexts[d.Lang]; !ok {
		d.Lang = "en"
	}
	d.T = pageTexts[d.Lang]
	eff := preferences.Merge(ts.PreferenceDefaults, own)
	for _, ch := range herald.Channels {
		d.Channels = append(d.Channels, pageChannel{Name: ch, Label: d.T.ChannelNames[ch], On: !isOffIn(eff.Channels, ch)})
	}
	for _, cat := range cats {
		cp := eff.Categories[cat]
		pc := pageCategory{Name: cat, Enabled: cp.Enabled == nil || *cp.Enabled}
		for _, ch := range herald.Channels {
			pc.Channels = append(pc.Channels, pageChannel{Name: ch, Label: d.T.ChannelNames[ch], On: !isOffIn(cp.Channels, ch)})
		}
		d.Categories = append(d.Categories, pc)
	}
	if q := eff.QuietHours; q != nil {
		d.QuietStart, d.QuietEnd, d.QuietZone = q.Start, q.End, q.Timezone
	}
	return d, own, cats, nil
}

func isOffIn(m map[herald.Channel]bool, ch herald.Channel) bool {
	v, ok := m[ch]
	return ok && !v
}

func (h *usersRoom) renderPreferencePage(c *gin.Context, status int, d preferencePageData) {
	var b bytes.Buffer
	if err := preferencePage.Execute(&b, d); err != nil {
		h.abort(c, err)
		return
	}
	preferencePageHeaders(c)
	c.Data(status, "text/html; charset=utf-8", b.Bytes())
}

// getPreferencePage is GET /preferences?token=…: the page.
func (h *usersRoom) getPreferencePage(c *gin.Context) {
	tenantID, user, ok := h.verifyPage(c)
	if !ok {
		return
	}
	d, _, _, err := h.pageState(c, tenantID, user)
	if err != nil {
		h.abort(c, err)
		return
	}
	h.renderPreferencePage(c, http.StatusOK, d)
}

// maxPageForm bounds the page's form (a checkbox per category and channel).
const maxPageForm = 64 << 10

// postPreferencePage is the page's form: every channel and category shown is
// saved as the user chose it (a checkbox left unticked is off), quiet hours as
// entered (both times empty: none). The user's document is replaced with what
// the page showed and the choices made, as PUT /v1/users/{id}/preferences
// would; categories it did not show are kept. Invalid input (quiet hours, a
// time zone) re-renders the page with the problem and saves nothing.
func (h *usersRoom) postPreferencePage(c *gin.Context) {
	tenantID, user, ok := h.verifyPage(c)
	if !ok {
		return
	}
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, maxPageForm)
	if err := c.Request.ParseForm(); err != nil {
		h.abort(c, &httpError{Status: http.StatusBadRequest, Code: "unreadable_body", Message: "could not read the form"})
		return
	}
	form := c.Request.PostForm
	d, own, cats, err := h.pageState(c, tenantID, user)
	if err != nil {
		h.abort(c, err)
		return
	}
	on := func(name string) bool { return form.Get(name) == "on" }
	p := preferences.Preferences{Channels: map[herald.Channel]bool{}, Categories: map[string]preferences.CategoryPref{}}
	for cat, cp := range own.Categories {
		p.Categories[cat] = cp // categories the page did not show stay as they were
	}
	for _, ch := range herald.Channels {
		p.Channels[ch] = on("channel." + string(ch))
	}
	for _, cat := range cats {
		enabled := on("category." + cat)
		cp := preferences.CategoryPref{Enabled: &enabled, Channels: map[herald.Channel]bool{}}
		for _, ch := range herald.Channels {
			cp.Channels[ch] = on("category." + cat + "." + string(ch))
		}
		p.Categories[cat] = cp
	}
	start, end, zone := strings.TrimSpace(form.Get("quiet_start")), strings.TrimSpace(form.Get("quiet_end")), strings.TrimSpace(form.Get("quiet_timezone"))
	p.QuietHours = &preferences.QuietHours{Start: start, End: end}
	if start != "" || end != "" {
		p.QuietHours.Timezone = zone
	}
	if errs := p.Validate(); len(errs) > 0 {
		d.Problem = errs[0].Error()
		d.QuietStart, d.QuietEnd, d.QuietZone = start, end, zone
		h.renderPreferencePage(c, http.StatusBadRequest, d)
		return
	}
	if err := h.savePagePreferences(c, tenantID, user.UserID, p); err != nil {
		h.abort(c, err)
		return
	}
	d, _, _, err = h.pageState(c, tenantID, user)
	if err != nil {
		h.abort(c, err)
		return
	}
	d.Saved = true
	h.renderPreferencePage(c, http.StatusOK, d)
}

// savePagePreferences stores what the page's form chose, audited like PUT
// /v1/users/{id}/preferences (action preferences.put) under
// auditPreferenceCentreKeyID, with the field names only (the tenant's log holds
// no user's choices verbatim).
func (h *usersRoom) savePagePreferences(c *gin.Context, tenantID, userID string, p preferences.Preferences) error {
	ctx := c.Request.Context()
	details, _ := json.Marshal(map[string]any{"fields": []string{"channels", "categories", "quiet_hours"}})
	id, err := h.store.BeginAudit(ctx, tenantID, store.AuditEntry{APIKeyID: auditPreferenceCentreKeyID,
		Action: auditPreferencesPut, Target: userID, Details: details})
	if err != nil {
		return err
	}
	status := http.StatusOK
	err = h.store.PutPreferences(ctx, tenantID, userID, p)
	if err != nil {
		status = http.StatusInternalServerError
	}
	if ferr := h.store.FinishAudit(ctx, tenantID, id, status, err == nil); err == nil {
		err = ferr
	}
	return err
}

// preferencesLink is POST /v1/users/{id}/inbox/preferences-link: the user's
// signed preference-centre URL, for the tenant's server (API key) or the
// user's own browser (user token: <herald-inbox>'s "Preferences").
func (h *usersRoom) preferencesLink(c *gin.Context) {
	tenantID, userID, ok := h.users.knownUser(c)
	if !ok {
		return
	}
	if h.unsubscribe == nil {
		h.abort(c, notFound("route"))
		return
	}
	c.JSON(http.StatusOK, gin.H{"url": h.unsubscribe.PageURL(h.publicBaseURL(c), tenantID, userID, time.Now())})
}

// publicBaseURL is how browsers reach this API (Config.PublicBaseURL, else the
// request's own scheme and host).
func (h *usersRoom) publicBaseURL(c *gin.Context) string {
	if h.baseURL != "" {
		return h.baseURL
	}
	scheme := "http"
	if c.Request.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + c.Request.Host
}
