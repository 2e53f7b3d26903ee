package templates

import (
	"errors"
	"fmt"
	htmltemplate "html/template"
	"regexp"
	"strings"

	"github.com/herald-notify/herald/internal/herald"
)

// Size limits, enforced by Validate and again by Render.
const (
	// MaxFieldBytes caps the source of one field (subject, html, a push data
	// value, ...).
	MaxFieldBytes = 16 << 10
	// MaxTemplateBytes caps the sum of all field sources of a template,
	// locale variants and push data keys included.
	MaxTemplateBytes = 64 << 10
	// MaxRangeIterations caps the total {{range}} iterations of one Render
	// call (all fields together); see budget.go for the other render limits.
	MaxRangeIterations = 10_000
	// MaxRenderedFieldBytes caps the rendered output of one field.
	MaxRenderedFieldBytes = 256 << 10
	// MaxCategoryLen caps the category name.
	MaxCategoryLen = 64
)

// FieldError is one problem found by Validate. Channel and Field name the
// template field ("email"/"subject", "push"/"data.order_id"); template-level
// problems have an empty Channel and Field "category", "default_locale",
// "locales" or "template". Locale is set for problems inside a locale variant.
// Line is the 1-based line inside the field, 0 when not applicable.
type FieldError struct {
	Channel herald.Channel `json:"channel,omitempty"`
	Field   string         `json:"field"`
	Locale  string         `json:"locale,omitempty"`
	Line    int            `json:"line,omitempty"`
	Message string         `json:"message"`
}

func (e FieldError) Error() string {
	var b strings.Builder
	if e.Locale != "" {
		b.WriteString("locales." + e.Locale + ".")
	}
	if e.Channel != "" {
		b.WriteString(string(e.Channel) + ".")
	}
	b.WriteString(e.Field)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": " + e.Message)
	return b.String()
}

var (
	categoryRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	idRE       = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$`)
)

// IDRule says what ValidID accepts, for error messages.
const IDRule = "1 to 128 characters of letters, digits, '_', '.' or '-'"

// ValidID reports whether id is a well-formed template id (IDRule): safe as a
// URL path segment. Flows name their send steps' templates, and themselves, by
// the same rule.
func ValidID(id string) bool { return idRE.MatchString(id) }

// CategoryProblem says what is wrong with a category ("" when nothing is): a
// template's, and a flow's, which is checked by the same rule.
func CategoryProblem(category string) string {
	switch {
	case strings.TrimSpace(category) == "":
		return "category is required"
	case len(category) > MaxCategoryLen:
		return fmt.Sprintf("category is longer than %d characters", MaxCategoryLen)
	case !categoryRE.MatchString(category):
		return "category may only contain letters, digits, '_', '-' and '.'"
	}
	return ""
}

// Validate checks a template before it is saved and returns every problem
// found, in a deterministic order (nil when the template is valid):
//
//   - a category (letters, digits, "_", "-", "." — at most MaxCategoryLen);
//   - at least one channel, each with its required parts (email: subject
//     and html or text; sms: text; push: title or body; in_app: body);
//   - every field parses (text/template, or html/template for email html,
//     including html/template's context checks such as an action inside an
//     unquoted attribute), uses only the allow-listed functions and no
//     {{define}}/{{block}}/{{template}}, and printf formats written as
//     constants are allowed ones; a syntax error names channel, field and
//     line;
//   - every field is run against no data (a dry run: it stops at the first
//     variable), all fields sharing one render budget, and a field that
//     exceeds a render limit before needing data — the budgets
//     (ErrRenderBudget, ErrBuildBudget), the output cap, a disabled function
//     — is reported with its line; once one field has spent the shared
//     budget, later fields' budget errors are not reported;
//   - field sources ≤ MaxFieldBytes, all sources together ≤ MaxTemplateBytes;
//   - push data keys are not FCM-reserved ("from", "notification",
//     "message_type", "google…", "gcm…");
//   - default_locale and variant keys are BCP 47 tags, variants are distinct
//     from each other and from the base locale, and only carry channels the
//     base has.
func Validate(t Template) []FieldError {
	var errs []FieldError
	add := func(e FieldError) { errs = append(errs, e) }

	if problem := CategoryProblem(t.Category); problem != "" {
		add(FieldError{Field: "category", Message: problem})
	}
	if t.DefaultLocale != "" {
		if _, ok := parseLocale(t.DefaultLocale); !ok {
			add(FieldError{Field: "default_locale", Message: fmt.Sprintf("%q is not a BCP 47 language tag", t.DefaultLocale)})
		}
	}
	if len(t.Channels()) == 0 {
		add(FieldError{Field: "template", Message: "a template needs content for at least one channel (email, sms, push, in_app)"})
	}

	total := 0
	dry := &dryRun{b: newBudget()}
	base := content{Email: t.Email, SMS: t.SMS, Push: t.Push, InApp: t.InApp}
	for _, ch := range herald.Channels {
		for _, e := range requiredParts(ch, base) {
			add(e)
		}
		for _, f := range base.fields(ch) {
			total += len(f.src)
			if e, ok := validateField(f, "", dry); !ok {
				add(e)
			}
		}
		if ch == herald.ChannelPush && t.Push != nil {
			for _, e := range checkPushKeys(t.Push.Data, "") {
				add(e)
			}
			for k := range t.Push.Data {
				total += len(k)
			}
		}
	}

	baseTag, baseOK := parseLocale(t.BaseLocale())
	seen := map[string]string{} // canonical tag -> key
	for _, loc := range sortedKeys(t.Locales) {
		v := t.Locales[loc]
		tag, ok := parseLocale(loc)
		switch {
		case !ok:
			add(FieldError{Field: "locales", Locale: loc, Message: fmt.Sprintf("%q is not a BCP 47 language tag", loc)})
		case baseOK && tag.String() == baseTag.String():
			add(FieldError{Field: "locales", Locale: loc, Message: fmt.Sprintf("variant %q duplicates the base locale %q", loc, t.BaseLocale())})
		case seen[tag.String()] != "":
			add(FieldError{Field: "locales", Locale: loc, Message: fmt.Sprintf("variant %q duplicates variant %q", loc, seen[tag.String()])})
		default:
			seen[tag.String()] = loc
		}
		vc := content(v)
		for _, ch := range herald.Channels {
			fs := vc.fields(ch)
			if len(fs) > 0 && !t.hasChannel(ch) {
				add(FieldError{Channel: ch, Field: "template", Locale: loc, Message: "variant has content for a channel the base template lacks"})
				continue
			}
			for _, f := range fs {
				if f.src == "" {
					continue // inherits the base field
				}
				total += len(f.src)
				if e, ok := validateField(f, loc, dry); !ok {
					add(e)
				}
			}
			if ch == herald.ChannelPush && v.Push != nil {
				for _, e := range checkPushKeys(v.Push.Data, loc) {
					add(e)
				}
				for k := range v.Push.Data {
					total += len(k)
				}
			}
		}
	}
	if total > MaxTemplateBytes {
		add(FieldError{Field: "template", Message: fmt.Sprintf("template is %d bytes; the limit is %d bytes (%d KiB) for all fields together", total, MaxTemplateBytes, MaxTemplateBytes>>10)})
	}
	return errs
}

func requiredParts(ch herald.Channel, c content) []FieldError {
	var errs []FieldError
	req := func(field, msg string) { errs = append(errs, FieldError{Channel: ch, Field: field, Message: msg}) }
	switch ch {
	case herald.ChannelEmail:
		if c.Email != nil {
			if strings.TrimSpace(c.Email.Subject) == "" {
				req("subject", "email subject is required")
			}
			if strings.TrimSpace(c.Email.HTML) == "" && strings.TrimSpace(c.Email.Text) == "" {
				req("html", "email needs an html or a text body")
			}
		}
	case herald.ChannelSMS:
		if c.SMS != nil && strings.TrimSpace(c.SMS.Text) == "" {
			req("text", "sms text is required")
		}
	case herald.ChannelPush:
		if c.Push != nil && strings.TrimSpace(c.Push.Title) == "" && strings.TrimSpace(c.Push.Body) == "" {
			req("body", "push needs a title or a body")
		}
	case herald.ChannelInApp:
		if c.InApp != nil && strings.TrimSpace(c.InApp.Body) == "" {
			req("body", "in_app body is required")
		}
	}
	return errs
}

// dryRun is Validate's execution of every field against no data, sharing
// one render budget: a template that exceeds a limit whatever its data (it
// needs none to do so) is refused when it is saved instead of failing every
// delivery. Most fields stop at their first variable, which no data has.
type dryRun struct {
	b *budget
	// spent: a field exhausted the shared budget; later fields' budget
	// errors are its doing and are not reported.
	spent bool
}

// validateField checks one field's size and syntax and dry-runs it.
func validateField(f field, locale string, d *dryRun) (FieldError, bool) {
	fe := FieldError{Channel: f.channel, Field: f.name, Locale: locale}
	if len(f.src) > MaxFieldBytes {
		fe.Message = fmt.Sprintf("field is %d bytes; the limit is %d bytes (%d KiB)", len(f.src), MaxFieldBytes, MaxFieldBytes>>10)
		return fe, false
	}
	p, err := parseField(f, d.b)
	if err != nil {
		var se *syntaxError
		if errors.As(err, &se) {
			fe.Line, fe.Message = se.line, se.msg
		} else {
			fe.Message = err.Error()
		}
		return fe, false
	}
	// html/template checks contexts (e.g. an action in an unquoted attribute
	// value) only when it escapes, which happens on the first Execute and
	// before any output; the dry run gets those errors too.
	err = p.execute(&limitedWriter{limit: MaxRenderedFieldBytes}, nil)
	var he *htmltemplate.Error
	if errors.As(err, &he) {
		se := htmlSyntaxError(he, f.src)
		fe.Line, fe.Message = se.line, se.msg
		return fe, false
	}
	shared := errors.Is(err, ErrRenderBudget) || errors.Is(err, ErrBuildBudget)
	if !isBudgetError(err) || (shared && d.spent) {
		return fe, true // nil, or an error of the missing data
	}
	d.spent = d.spent || shared
	var se *syntaxError
	if !errors.As(execError(err), &se) {
		return fe, false
	}
	fe.Line, fe.Message = se.line, se.msg
	return fe, false
}

func checkPushKeys(data map[string]string, locale string) []FieldError {
	var errs []FieldError
	for _, k := range sortedKeys(data) {
		lk := strings.ToLower(k)
		var msg string
		switch {
		case strings.TrimSpace(k) == "":
			msg = "push data keys must not be empty"
		case lk == "from" || lk == "notification" || lk == "message_type" ||
			strings.HasPrefix(lk, "google") || strings.HasPrefix(lk, "gcm"):
			msg = fmt.Sprintf("push data key %q is reserved by FCM", k)
		}
		if msg != "" {
			errs = append(errs, FieldError{Channel: herald.ChannelPush, Field: "data." + k, Locale: locale, Message: msg})
		}
	}
	return errs
}
