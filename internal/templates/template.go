// Package templates holds tenant-authored notification templates: their
// shape, validation on save, the variables they need, locale fallback and
// rendering into per-channel content.
//
// The package is pure: no database, no HTTP, no Temporal, no clock, no
// goroutines. Every function is deterministic — the same inputs give the same
// output or the same error — so rendering may run inside a Temporal activity
// and a render error can be treated as non-retryable.
//
// # Security model
//
// Templates are written by tenants, and both text/template and html/template
// trust their authors, so the package narrows what an author can do:
//
//   - Only a small allow-listed function set is available (see FuncNames);
//     the dangerous builtin call is disabled and printf refuses
//     width/precision arguments that could allocate huge strings.
//   - {{define}}, {{block}} and {{template}} are rejected, so a template cannot
//     recurse.
//   - Render data is normalised to plain JSON values (maps, slices, strings,
//     numbers, bools, nil) before execution, so a template can never call a Go
//     method on anything it is given.
//   - missingkey=error: a variable the data lacks is an error, never "<no value>".
//   - Work is capped deterministically rather than by wall-clock time, by one
//     budget per Render (budget.go): every {{range}} charges its iterations
//     (MaxRangeIterations) and iterations × the nodes of its body
//     (MaxRenderSteps) before it starts; every builtin that builds a string
//     (print, printf, println, html, js, urlquery) is replaced by one that
//     refuses, before building, a result over MaxBuiltStringBytes or over
//     what is left of MaxBuiltBytes, and the package's own functions are held
//     to the same budget; what comparisons, index keys and printed values read
//     is charged against MaxReadBytes (html/template's escapers may filter a
//     long value down to a short one); every rendered field writes into a
//     writer that fails past MaxRenderedFieldBytes. A template can therefore
//     neither loop for long (even without output), nor build unbounded text in
//     a variable ({{$x = print $x $x}} repeated), nor produce unbounded output,
//     and no goroutine is left running on a timeout. Validate runs every field
//     against no data under the same budget, so a template that exceeds it
//     without needing data is refused when it is saved.
//   - Email HTML is rendered with html/template (data is contextually escaped)
//     and the result is then sanitized with bluemonday (see EmailHTMLPolicy).
//   - Email subjects have CR/LF folded to spaces (no header injection), in-app
//     action URLs may not use javascript:, data:, vbscript: or file: schemes.
//
// Text channels (SMS, push, in-app, email subject and text part) are rendered
// with text/template and are NOT HTML-escaped: whoever displays them as HTML
// (an in-app web client, say) must escape them in its own context.
package templates

import (
	"sort"
	"strings"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/herald-notify/herald/internal/herald"
	"golang.org/x/text/language"
)

// FallbackLocale is the last step of the locale fallback chain and the locale
// of a template's base content when Template.DefaultLocale is empty.
const FallbackLocale = "en"

// Template is one version of a tenant's notification template.
//
// The per-channel content fields hold the base content, written in
// DefaultLocale. Locales holds per-locale variants keyed by BCP 47 tag
// ("de", "pt-BR"); see Variant for how a variant overrides the base.
type Template struct {
	ID       string `json:"id"`
	Version  int    `json:"version"`
	Category string `json:"category"`
	// Critical templates (password reset, security alerts) bypass category
	// opt-outs, caps and quiet hours; see package preferences.
	Critical bool `json:"critical"`
	// DefaultLocale is the locale of the base content; empty means "en".
	DefaultLocale string `json:"default_locale,omitempty"`
	// Ordering is the ordering key of the notifications sent with the template
	// when the request gives none (herald.OrderingPerUser, "user": one lane per
	// user and channel); empty: unordered (docs/ordering.md).
	Ordering string `json:"ordering,omitempty"`

	Email *EmailContent `json:"email,omitempty"`
	SMS   *SMSContent   `json:"sms,omitempty"`
	Push  *PushContent  `json:"push,omitempty"`
	InApp *InAppContent `json:"in_app,omitempty"`

	Locales map[string]Variant `json:"locales,omitempty"`
}

// EmailContent is the email channel's content. HTML is an html/template,
// Subject and Text are text/templates. At least one of HTML and Text is needed.
type EmailContent struct {
	Subject string `json:"subject"`
	HTML    string `json:"html,omitempty"`
	Text    string `json:"text,omitempty"`
}

// SMSContent is the SMS channel's content (a text/template).
type SMSContent struct {
	Text string `json:"text"`
}

// PushContent is the push channel's content. Title, Body and every Data value
// are text/templates; Data keys are literal.
type PushContent struct {
	Title string            `json:"title,omitempty"`
	Body  string            `json:"body,omitempty"`
	Data  map[string]string `json:"data,omitempty"`
}

// InAppContent is the in-app inbox channel's content (text/templates).
type InAppContent struct {
	Title     string `json:"title,omitempty"`
	Body      string `json:"body"`
	ActionURL string `json:"action_url,omitempty"`
}

// Variant is a per-locale override of a template's content. It overrides field
// by field: a non-empty field replaces the base field, an empty one keeps the
// base (so a half-translated variant falls back to the base text rather than
// sending an empty part). Push Data keys present in the variant replace the
// base values of the same keys. A variant may only carry channels the base
// template has.
type Variant struct {
	Email *EmailContent `json:"email,omitempty"`
	SMS   *SMSContent   `json:"sms,omitempty"`
	Push  *PushContent  `json:"push,omitempty"`
	InApp *InAppContent `json:"in_app,omitempty"`
}

// Channels returns the channels the template has base content for, in the
// canonical order of the package-level Channels. It is the default channel
// list of a notification sent with this template.
func (t Template) Channels() []herald.Channel {
	var out []herald.Channel
	for _, ch := range herald.Channels {
		if t.hasChannel(ch) {
			out = append(out, ch)
		}
	}
	return out
}

// HasChannel reports whether the template has base content for channel.
func (t Template) HasChannel(channel herald.Channel) bool { return t.hasChannel(channel) }

func (t Template) hasChannel(ch herald.Channel) bool {
	switch ch {
	case herald.ChannelEmail:
		return t.Email != nil
	case herald.ChannelSMS:
		return t.SMS != nil
	case herald.ChannelPush:
		return t.Push != nil
	case herald.ChannelInApp:
		return t.InApp != nil
	}
	return false
}

// BaseLocale is the locale of the base content: DefaultLocale, or "en".
func (t Template) BaseLocale() string {
	if strings.TrimSpace(t.DefaultLocale) == "" {
		return FallbackLocale
	}
	return t.DefaultLocale
}

// AvailableLocales returns the locales the template can render: BaseLocale
// first, then the variant locales sorted. Pass it to ResolveLocale.
func (t Template) AvailableLocales() []string {
	out := []string{t.BaseLocale()}
	keys := make([]string, 0, len(t.Locales))
	for k := range t.Locales {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return append(out, keys...)
}

// field is one template source inside a template, addressed the way
// FieldError and RenderError report it.
type field struct {
	channel herald.Channel
	name    string // "subject", "html", "text", "title", "body", "action_url", "data.<key>"
	src     string
	html    bool // parsed with html/template
}

// fields lists the fields of channel content c for channel ch, in a fixed
// order (push data keys sorted).
func channelFields(ch herald.Channel, email *EmailContent, sms *SMSContent, push *PushContent, inApp *InAppContent) []field {
	var fs []field
	switch ch {
	case herald.ChannelEmail:
		if email != nil {
			fs = append(fs,
				field{ch, "subject", email.Subject, false},
				field{ch, "html", email.HTML, true},
				field{ch, "text", email.Text, false})
		}
	case herald.ChannelSMS:
		if sms != nil {
			fs = append(fs, field{ch, "text", sms.Text, false})
		}
	case herald.ChannelPush:
		if push != nil {
			fs = append(fs, field{ch, "title", push.Title, false}, field{ch, "body", push.Body, false})
			for _, k := range sortedKeys(push.Data) {
				fs = append(fs, field{ch, "data." + k, push.Data[k], false})
			}
		}
	case herald.ChannelInApp:
		if inApp != nil {
			fs = append(fs,
				field{ch, "title", inApp.Title, false},
				field{ch, "body", inApp.Body, false},
				field{ch, "action_url", inApp.ActionURL, false})
		}
	}
	return fs
}

// content is the effective content of a template for one locale: the base
// content with the locale's variant applied.
type content struct {
	Email *EmailContent
	SMS   *SMSContent
	Push  *PushContent
	InApp *InAppContent
}

func (c content) fields(ch herald.Channel) []field {
	return channelFields(ch, c.Email, c.SMS, c.Push, c.InApp)
}

// contentFor returns the effective content for locale, which must be one of
// t.AvailableLocales() (anything else yields the base content).
func (t Template) contentFor(locale string) content {
	c := content{Email: t.Email, SMS: t.SMS, Push: t.Push, InApp: t.InApp}
	v, ok := t.Locales[locale]
	if !ok {
		return c
	}
	if t.Email != nil && v.Email != nil {
		e := *t.Email
		e.Subject = override(e.Subject, v.Email.Subject)
		e.HTML = override(e.HTML, v.Email.HTML)
		e.Text = override(e.Text, v.Email.Text)
		c.Email = &e
	}
	if t.SMS != nil && v.SMS != nil {
		s := *t.SMS
		s.Text = override(s.Text, v.SMS.Text)
		c.SMS = &s
	}
	if t.Push != nil && v.Push != nil {
		p := *t.Push
		p.Title = override(p.Title, v.Push.Title)
		p.Body = override(p.Body, v.Push.Body)
		if len(t.Push.Data)+len(v.Push.Data) > 0 {
			p.Data = make(map[string]string, len(t.Push.Data)+len(v.Push.Data))
			for k, val := range t.Push.Data {
				p.Data[k] = val
			}
			for k, val := range v.Push.Data {
				p.Data[k] = val
			}
		}
		c.Push = &p
	}
	if t.InApp != nil && v.InApp != nil {
		a := *t.InApp
		a.Title = override(a.Title, v.InApp.Title)
		a.Body = override(a.Body, v.InApp.Body)
		a.ActionURL = override(a.ActionURL, v.InApp.ActionURL)
		c.InApp = &a
	}
	return c
}

func override(base, v string) string {
	if v != "" {
		return v
	}
	return base
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// parseLocale parses a BCP 47 tag ("de-AT", also "de_AT").
func parseLocale(s string) (language.Tag, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return language.Und, false
	}
	if len(s) > maxCachedLocale {
		return parseLocaleTag(s)
	}
	if p, ok := localeCache.Get(s); ok {
		return p.tag, p.ok
	}
	tag, ok := parseLocaleTag(s)
	localeCache.Add(s, parsedLocale{tag, ok})
	return tag, ok
}

func parseLocaleTag(s string) (language.Tag, bool) {
	tag, err := language.Parse(s)
	if err != nil {
		return language.Und, false
	}
	return tag, true
}

// Locale resolution runs on every submission and every render, and
// language.Parse is its cost: parsed locales are kept (at most 1024, each at
// most maxCachedLocale bytes; a BCP 47 tag in use is far shorter).
const maxCachedLocale = 35

type parsedLocale struct {
	tag language.Tag
	ok  bool
}

var localeCache, _ = lru.New[string, parsedLocale](1024) // only a size ≤ 0 errs
