package templates

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/microcosm-cc/bluemonday"
)

// Rendered is one channel's content rendered for one recipient. Exactly one of
// the channel pointers is set, matching Channel. It is plain data (JSON
// serialisable), suitable as a Temporal activity result.
type Rendered struct {
	TemplateID string         `json:"template_id"`
	Version    int            `json:"template_version"`
	Channel    herald.Channel `json:"channel"`
	// Locale is the template locale actually used (see ResolveLocale).
	Locale string `json:"locale"`

	Email *RenderedEmail `json:"email,omitempty"`
	SMS   *RenderedSMS   `json:"sms,omitempty"`
	Push  *RenderedPush  `json:"push,omitempty"`
	InApp *RenderedInApp `json:"in_app,omitempty"`
}

// RenderedEmail is a rendered email. HTML is a sanitized fragment (see
// SanitizeEmailHTML); Subject is a single line.
type RenderedEmail struct {
	Subject string `json:"subject"`
	HTML    string `json:"html,omitempty"`
	Text    string `json:"text,omitempty"`
}

// RenderedSMS is a rendered SMS with its segment count (see SMSSegments).
type RenderedSMS struct {
	Text     string `json:"text"`
	Encoding string `json:"encoding"`
	Segments int    `json:"segments"`
}

// RenderedPush is a rendered push notification. PayloadBytes is the size
// counted against FCMMaxPayloadBytes (see PushPayloadSize).
type RenderedPush struct {
	Title        string            `json:"title,omitempty"`
	Body         string            `json:"body,omitempty"`
	Data         map[string]string `json:"data,omitempty"`
	PayloadBytes int               `json:"payload_bytes"`
}

// RenderedInApp is a rendered in-app inbox entry.
type RenderedInApp struct {
	Title     string `json:"title,omitempty"`
	Body      string `json:"body"`
	ActionURL string `json:"action_url,omitempty"`
}

// Errors returned (wrapped) by Render, besides ErrRenderBudget,
// ErrBuildBudget, ErrOutputTooLarge, ErrFuncNotAllowed, ErrPrintfFormat and
// *PushPayloadTooLargeError.
var (
	ErrUnknownChannel       = errors.New("unknown channel")
	ErrChannelNotInTemplate = errors.New("template has no content for this channel")
	ErrInvalidData          = errors.New("template data is not JSON-compatible")
	ErrEmptyContent         = errors.New("rendered content is empty")
	ErrSMSTooLong           = errors.New("sms is too long")
	ErrUnsafeURL            = errors.New("action_url is not an allowed URL")
	ErrFieldTooLarge        = errors.New("template field exceeds the size limit")
)

// MaxSMSSegments caps a rendered SMS (a cost guard): Twilio refuses bodies
// over 1600 characters, about 10 concatenated GSM-7 segments; the same segment
// cap applies to UCS-2 (670 characters).
const MaxSMSSegments = 10

// RenderError is a Render failure located in a template field. Err is the
// cause (a missing variable, a budget error, a function error, ...).
type RenderError struct {
	Channel herald.Channel
	Field   string
	Locale  string
	Err     error
}

func (e *RenderError) Error() string {
	loc := ""
	if e.Locale != "" {
		loc = " (locale " + e.Locale + ")"
	}
	return fmt.Sprintf("render %s.%s%s: %v", e.Channel, e.Field, loc, e.Err)
}

func (e *RenderError) Unwrap() error { return e.Err }

// Render renders channel of template t for one recipient.
//
// locale is resolved against t.AvailableLocales() with
// ResolveLocale(locale, available, t.BaseLocale()); to honour a tenant-wide
// default locale, resolve first with ResolveLocale(userLocale,
// t.AvailableLocales(), tenantDefault) and pass the result. Rendered.Locale
// reports the locale used.
//
// data is normalised to JSON values first (objects → map[string]any, arrays
// → []any, integers → int64, integers too large for int64 → their decimal
// string, other numbers → Float, a float64 that prints in plain decimal
// notation), so templates see plain data and can call no Go methods (but
// Float's String). A variable missing from data is an error
// (missingkey=error); use MissingVariables before accepting a notification to
// report those up front, and CheckNumber to refuse numbers that would not
// render exactly.
//
// Limits: one budget for the whole call (every field): {{range}} iterations ≤
// MaxRangeIterations, steps inside loops ≤ MaxRenderSteps, bytes read by
// functions, comparisons and printed values ≤ MaxReadBytes, one string built
// by a function ≤ MaxBuiltStringBytes and all of them together ≤
// MaxBuiltBytes; each rendered field ≤ MaxRenderedFieldBytes and free of NUL
// characters and invalid UTF-8 (ErrInvalidText: a template can produce them
// with a string literal, printf "%c" or slice, and no channel can carry them), a push payload ≤
// FCMMaxPayloadBytes, an SMS ≤ MaxSMSSegments segments. Render is
// deterministic; treat its errors as permanent (non-retryable).
//
// Per channel: email subject and text use text/template, the subject has
// CR/LF folded to spaces; email html uses html/template and is then sanitized
// with SanitizeEmailHTML; sms, push and in_app use text/template (not HTML
// escaped); an in-app action_url must not use the javascript:, data:,
// vbscript:, file: or blob: schemes. Required parts rendering to nothing
// (an empty SMS, say) are ErrEmptyContent.
func Render(t Template, channel herald.Channel, locale string, data map[string]any) (Rendered, error) {
	if !herald.IsChannel(channel) {
		return Rendered{}, fmt.Errorf("%w: %q", ErrUnknownChannel, channel)
	}
	if !t.hasChannel(channel) {
		return Rendered{}, fmt.Errorf("%w: %s", ErrChannelNotInTemplate, channel)
	}
	resolved := ResolveLocale(locale, t.AvailableLocales(), t.BaseLocale())
	c := t.contentFor(resolved)
	norm, err := normalizeData(data)
	if err != nil {
		return Rendered{}, err
	}
	r := renderer{b: newBudget(), data: norm, locale: resolved}
	out := Rendered{TemplateID: t.ID, Version: t.Version, Channel: channel, Locale: resolved}
	vals := map[string]string{}
	for _, f := range c.fields(channel) {
		s, err := r.field(f)
		if err != nil {
			return Rendered{}, err
		}
		vals[f.name] = s
	}
	empty := func(field string) error {
		return &RenderError{Channel: channel, Field: field, Locale: resolved, Err: ErrEmptyContent}
	}
	switch channel {
	case herald.ChannelEmail:
		e := &RenderedEmail{
			Subject: foldLines(vals["subject"]),
			Text:    vals["text"],
		}
		if c.Email.HTML != "" {
			e.HTML = SanitizeEmailHTML(vals["html"])
		}
		if e.Subject == "" {
			return Rendered{}, empty("subject")
		}
		if strings.TrimSpace(e.HTML) == "" && strings.TrimSpace(e.Text) == "" {
			return Rendered{}, empty("html")
		}
		out.Email = e
	case herald.ChannelSMS:
		text := vals["text"]
		if strings.TrimSpace(text) == "" {
			return Rendered{}, empty("text")
		}
		enc, n := SMSSegments(text)
		if n > MaxSMSSegments {
			return Rendered{}, &RenderError{Channel: channel, Field: "text", Locale: resolved,
				Err: fmt.Errorf("%w: %d %s segments, the limit is %d", ErrSMSTooLong, n, enc, MaxSMSSegments)}
		}
		out.SMS = &RenderedSMS{Text: text, Encoding: enc, Segments: n}
	case herald.ChannelPush:
		p := &RenderedPush{Title: vals["title"], Body: vals["body"]}
		if len(c.Push.Data) > 0 {
			p.Data = make(map[string]string, len(c.Push.Data))
			for k := range c.Push.Data {
				p.Data[k] = vals["data."+k]
			}
		}
		if strings.TrimSpace(p.Title) == "" && strings.TrimSpace(p.Body) == "" {
			return Rendered{}, empty("body")
		}
		p.PayloadBytes = PushPayloadSize(p.Title, p.Body, p.Data)
		if p.PayloadBytes > FCMMaxPayloadBytes {
			return Rendered{}, &PushPayloadTooLargeError{Bytes: p.PayloadBytes, Limit: FCMMaxPayloadBytes}
		}
		out.Push = p
	case herald.ChannelInApp:
		a := &RenderedInApp{Title: vals["title"], Body: vals["body"], ActionURL: strings.TrimSpace(vals["action_url"])}
		if strings.TrimSpace(a.Body) == "" {
			return Rendered{}, empty("body")
		}
		if err := checkActionURL(a.ActionURL); err != nil {
			return Rendered{}, &RenderError{Channel: channel, Field: "action_url", Locale: resolved, Err: err}
		}
		out.InApp = a
	}
	return out, nil
}

type renderer struct {
	b      *budget
	data   map[string]any
	locale string
}

func (r renderer) field(f field) (string, error) {
	if f.src == "" {
		return "", nil
	}
	fail := func(err error) (string, error) {
		return "", &RenderError{Channel: f.channel, Field: f.name, Locale: r.locale, Err: err}
	}
	if len(f.src) > MaxFieldBytes {
		return fail(fmt.Errorf("%w: %d bytes, the limit is %d", ErrFieldTooLarge, len(f.src), MaxFieldBytes))
	}
	w := &limitedWriter{limit: MaxRenderedFieldBytes}
	if err := executeField(f, r.b, w, r.data); err != nil {
		var se *syntaxError
		if errors.As(err, &se) {
			return fail(err)
		}
		return fail(execError(err))
	}
	out := w.buf.String()
	if err := CheckText(out); err != nil {
		return fail(err)
	}
	return out, nil
}

// limitedWriter buffers up to limit bytes and fails past it; text/template
// stops executing at the first write error.
type limitedWriter struct {
	buf   bytes.Buffer
	limit int
}

func (w *limitedWriter) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > w.limit {
		return 0, fmt.Errorf("%w (%d bytes)", ErrOutputTooLarge, w.limit)
	}
	return w.buf.Write(p)
}

// normalizeData turns data into plain JSON values (see Render).
func normalizeData(data map[string]any) (map[string]any, error) {
	if len(data) == 0 {
		return map[string]any{}, nil
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidData, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out map[string]any
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidData, err)
	}
	return convertNumbers(out).(map[string]any), nil
}

func convertNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = convertNumbers(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = convertNumbers(e)
		}
		return x
	case json.Number:
		return numberValue(x)
	}
	return v
}

var lineBreaks = strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ")

func foldLines(s string) string { return strings.TrimSpace(lineBreaks.Replace(s)) }

func checkActionURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnsafeURL, err)
	}
	switch strings.ToLower(u.Scheme) {
	case "javascript", "data", "vbscript", "file", "blob":
		return fmt.Errorf("%w: scheme %q", ErrUnsafeURL, u.Scheme)
	}
	return nil
}

// emailPolicy is built once; bluemonday policies are safe for concurrent use
// once built.
var emailPolicy = newEmailPolicy()

// newEmailPolicy builds the policy described at SanitizeEmailHTML.
func newEmailPolicy() *bluemonday.Policy {
	p := bluemonday.UGCPolicy()
	layout := []string{"table", "thead", "tbody", "tfoot", "tr", "td", "th", "div", "p", "img", "center", "span", "h1", "h2", "h3", "h4", "h5", "h6"}
	p.AllowElements("center")
	p.AllowAttrs("align", "valign", "bgcolor", "width", "height").OnElements(layout...)
	p.AllowAttrs("cellpadding", "cellspacing", "border").OnElements("table")
	p.AllowStyles(
		"color", "background-color", "font-family", "font-size", "font-style", "font-weight",
		"line-height", "letter-spacing", "text-align", "text-decoration", "text-transform",
		"vertical-align", "width", "max-width", "min-width", "height",
		"margin", "margin-top", "margin-right", "margin-bottom", "margin-left",
		"padding", "padding-top", "padding-right", "padding-bottom", "padding-left",
		"border", "border-top", "border-right", "border-bottom", "border-left",
		"border-collapse", "border-radius", "border-color", "border-style", "border-width",
		"display",
	).Globally()
	return p
}

// SanitizeEmailHTML sanitizes rendered email HTML; Render applies it to every
// email html part. The policy is bluemonday's UGCPolicy (formatting, lists,
// links with http/https/mailto and rel="nofollow", images, tables; no
// scripts, iframes, forms or event handlers) plus what HTML email layouts
// commonly need: the legacy table attributes (align, valign, bgcolor, width,
// height, cellpadding, cellspacing, border), <center>, and inline style
// attributes limited to common typography, box and border properties whose
// values bluemonday validates. Everything else is stripped: <style> blocks
// with their content, class attributes, other CSS properties and the
// <html>/<head>/<body> wrappers — the result is a fragment with inline
// styles, which the email provider wraps in a document.
func SanitizeEmailHTML(html string) string { return emailPolicy.Sanitize(html) }
