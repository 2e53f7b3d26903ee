package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/mail"
	"slices"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/templates"
	"golang.org/x/text/language"
)

// isE164 reports whether v is an E.164 number: '+', a digit 1-9, then 6 to 14
// digits (^\+[1-9][0-9]{6,14}$, without a regexp: a bulk import checks
// millions).
func isE164(v string) bool {
	if len(v) < 8 || len(v) > 16 || v[0] != '+' || v[1] < '1' || v[1] > '9' {
		return false
	}
	for i := 2; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return false
		}
	}
	return true
}

// isDotAtomAddress reports whether v is local@domain with both parts ASCII
// dot-atoms (RFC 5322: atoms of letters, digits and !#$%&'*+-/=?^_`{|}~ joined
// by single dots): the common address, which net/mail.ParseAddress accepts as
// it is. Anything else (quoted local parts, domain literals, non-ASCII, a
// display name) is left to net/mail, whose parse was a bulk import's largest
// check.
func isDotAtomAddress(v string) bool {
	at := -1
	atom := 0 // length of the atom being read
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '@':
			if at >= 0 || atom == 0 {
				return false
			}
			at, atom = i, 0
		case c == '.':
			if atom == 0 {
				return false
			}
			atom = 0
		case isAtext(c):
			atom++
		default:
			return false
		}
	}
	return at > 0 && atom > 0
}

// isAtext: an ASCII atext character of RFC 5322.
func isAtext(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '/', '=', '?', '^', '_', '`', '{', '|', '}', '~':
		return true
	}
	return false
}

// validID checks a tenant-chosen identifier (user_id, idempotency key): 1–255
// printable characters with no slash, so it is safe in a URL path segment.
func validID(field, v string) *httpError {
	if v == "" {
		return badField(field, "missing_field", "%s is required", field)
	}
	if len(v) > 255 || !utf8.ValidString(v) {
		return badField(field, "invalid_field", "%s must be 1 to 255 bytes of UTF-8", field)
	}
	for _, r := range v {
		if unicode.IsControl(r) || r == '/' || unicode.IsSpace(r) {
			return badField(field, "invalid_field", "%s must not contain whitespace, control characters or '/'", field)
		}
	}
	return nil
}

func validTemplateID(v string) *httpError {
	if v == "" {
		return badField("template_id", "missing_field", "template_id is required")
	}
	if !templates.ValidID(v) {
		return badField("template_id", "invalid_field", "template_id must be %s", templates.IDRule)
	}
	return nil
}

func validEmail(v string) *httpError {
	if len(v) <= 254 && isDotAtomAddress(v) {
		return nil
	}
	addr, err := mail.ParseAddress(v)
	if err != nil || addr.Address != v || len(v) > 254 {
		return badField("email", "invalid_field", "email must be a plain address such as ada@example.com")
	}
	return nil
}

func validPhone(v string) *httpError {
	if !isE164(v) {
		return badField("phone", "invalid_field", "phone must be in E.164 form, such as +14155550100")
	}
	return nil
}

func validLocale(v string) *httpError {
	if _, err := language.Parse(v); err != nil || len(v) > 35 {
		return badField("locale", "invalid_field", "locale must be a BCP 47 language tag such as en-US")
	}
	return nil
}

func validTimezone(v string) *httpError {
	if v == "" || v == "Local" {
		return badField("timezone", "invalid_field", "timezone must be an IANA time zone such as Europe/Berlin")
	}
	if _, err := time.LoadLocation(v); err != nil {
		return badField("timezone", "invalid_field", "timezone must be an IANA time zone such as Europe/Berlin")
	}
	return nil
}

// The rules every accept path shares (POST /v1/notifications and POST
// /v1/campaigns): the same fields are checked alike and refused with the same
// codes and messages.

// maxScheduleAhead bounds send_at.
const maxScheduleAhead = 366 * 24 * time.Hour

// requireTemplateID checks a request's template_id, which is required.
func requireTemplateID(v *string) (string, *httpError) {
	if v == nil {
		return "", badField("template_id", "missing_field", "template_id is required")
	}
	if err := validTemplateID(*v); err != nil {
		return "", err
	}
	return *v, nil
}

// validChannels checks a request's channels: absent (nil) means the template's;
// given, at least one, each known (herald.Channels; anything else is rejected,
// never dropped) and listed once. It returns them as channels in a canonical
// order, so a resubmission in another order is equal.
func validChannels(names []string) ([]herald.Channel, *httpError) {
	if names != nil && len(names) == 0 {
		return nil, badField("channels", "invalid_field", "channels must list at least one of %v, or be left out for the template's channels", herald.Channels)
	}
	var channels []herald.Channel
	for i, name := range names {
		ch, field := herald.Channel(name), "channels["+itoa(i)+"]"
		switch {
		case !herald.IsChannel(ch):
			return nil, badField(field, "unknown_channel", "unknown channel %q; channels are %v", ch, herald.Channels)
		case slices.Contains(channels, ch):
			return nil, badField(field, "duplicate_channel", "channel %q is listed twice", ch)
		}
		channels = append(channels, ch)
	}
	slices.Sort(channels)
	return channels, nil
}

// filterChannel is the channel a filter names ("" : any), which must be one
// Herald delivers.
func filterChannel(name string) (herald.Channel, *httpError) {
	ch := herald.Channel(name)
	if ch != "" && !herald.IsChannel(ch) {
		return "", badField("channel", "invalid_field", "channel must be one of %v", herald.Channels)
	}
	return ch, nil
}

// sendTime is a request's send_at.
type sendTime struct {
	// given is the time as sent (zero when absent).
	given time.Time
	// ahead is the instant to wait for, in UTC; zero to send now (a time in the
	// past means now).
	ahead time.Time
}

// parseSendAt checks a request's send_at: an RFC 3339 time at most
// maxScheduleAhead after now.
func parseSendAt(v *string, now time.Time) (sendTime, *httpError) {
	var st sendTime
	if v == nil {
		return st, nil
	}
	t, err := time.Parse(time.RFC3339, *v)
	if err != nil {
		return st, badField("send_at", "invalid_field", "send_at must be an RFC 3339 time such as 2026-12-24T18:00:00Z")
	}
	st.given = t
	if t.After(now.Add(maxScheduleAhead)) {
		return st, badField("send_at", "invalid_field", "send_at must be at most a year ahead")
	}
	if t.After(now) {
		st.ahead = t.UTC()
	}
	return st, nil
}

// forSend is the latest version of the template a request sends with: 422
// unknown_template when the tenant has none.
func (tc *templateCache) forSend(ctx context.Context, tenantID, templateID string) (templates.Template, error) {
	rec, err := tc.latest(ctx, tenantID, templateID)
	if errors.Is(err, herald.ErrNotFound) {
		return templates.Template{}, &httpError{Status: http.StatusUnprocessableEntity, Code: "unknown_template", Field: "template_id",
			Message: "template " + templateID + " does not exist; create it with PUT /v1/templates/{template_id}"}
	}
	return rec.Template, err
}

// templateChannels are the channels to send on: the template's when the request
// named none; otherwise the request's, each of which the template must have
// content for (422 channel_not_in_template).
func templateChannels(t templates.Template, channels []herald.Channel) ([]herald.Channel, error) {
	if len(channels) == 0 {
		return t.Channels(), nil
	}
	for i, ch := range channels {
		if !t.HasChannel(ch) {
			return nil, &httpError{Status: http.StatusUnprocessableEntity, Code: "channel_not_in_template", Field: "channels[" + itoa(i) + "]",
				Message: fmt.Sprintf("template %s has no %s content; it has %v", t.ID, ch, t.Channels())}
		}
	}
	return channels, nil
}

// checkContent refuses, at submit time rather than at delivery, data that
// lacks a variable the template needs and every channel that cannot render the
// data or renders too large to carry. It renders exactly as the worker will:
// the same template version, the same data (json.Number and all) and the same
// locale resolution (userLocale, else the tenant's default). A deterministic
// failure is known here, so it is a 422 naming the channel instead of an
// accepted notification that fails later; content over
// contract.MaxRenderedBytes would otherwise make Temporal terminate the run (no
// status, no dead letter, dedup key released).
func checkContent(ctx context.Context, settings *settingsCache, tenantID string, t templates.Template, channels []herald.Channel, userLocale string, data templates.Data) error {
	if missing := templates.MissingVariables(t, "", data, channels...); len(missing) > 0 {
		return missingVariablesError(missing)
	}
	ts, err := settings.get(ctx, tenantID)
	if err != nil {
		return err
	}
	locale := templates.ResolveLocale(userLocale, t.AvailableLocales(), ts.DefaultLocale)
	for _, ch := range channels {
		if _, err := checkRender(t, ch, locale, data); err != nil {
			return err
		}
	}
	return nil
}

// checkRender renders one channel and answers what a delivery would meet: 422
// render_failed, or 422 content_too_large over contract.MaxRenderedBytes, both
// naming the channel.
func checkRender(t templates.Template, ch herald.Channel, locale string, data templates.Data) (templates.Rendered, *httpError) {
	r, err := templates.Render(t, ch, locale, data)
	if err != nil {
		return r, &httpError{Status: http.StatusUnprocessableEntity, Code: "render_failed", Field: "data", Channel: ch,
			Message: string(ch) + ": " + err.Error()}
	}
	var big *contract.ContentTooLargeError
	if err := contract.CheckRendered(r); errors.As(err, &big) {
		return r, &httpError{Status: http.StatusUnprocessableEntity, Code: "content_too_large", Field: "data", Channel: ch,
			Message: big.Error()}
	}
	return r, nil
}
