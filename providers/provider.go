package providers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/herald-notify/herald/internal/egress"
	"github.com/herald-notify/herald/internal/herald"
)

// Tags name the notification a provider call belongs to. Every provider carries them
// along with the message (SendGrid custom_args, the Twilio StatusCallback URL, FCM
// data) so that a delivery receipt names the notification even when Herald never
// got to record the provider's message id (a crash after the provider accepted).
type Tags struct {
	TenantID       string
	NotificationID string
	Channel        herald.Channel
}

// Validate reports a missing tag.
func (t Tags) Validate() error {
	switch {
	case t.TenantID == "":
		return errors.New("providers: tags: tenant id is empty")
	case t.NotificationID == "":
		return errors.New("providers: tags: notification id is empty")
	case t.Channel == "":
		return errors.New("providers: tags: channel is empty")
	}
	return nil
}

// IdempotencyKey is the provider-side key for one (notification, channel):
// "notification_id:channel". Pass it wherever a provider honours one.
func (t Tags) IdempotencyKey() string { return IdempotencyKey(t.NotificationID, t.Channel) }

// IdempotencyKey returns "notificationID:channel".
func IdempotencyKey(notificationID string, channel herald.Channel) string {
	return notificationID + ":" + string(channel)
}

// Result is what a provider returns when it accepted a message.
type Result struct {
	// Provider is the provider's name ("sendgrid", "twilio", "fcm", "sandbox").
	Provider string
	// ProviderMessageID is the provider's id for the message: SendGrid's X-Message-Id,
	// Twilio's MessageSid, FCM's message name, or the sandbox row id.
	ProviderMessageID string
}

// EmailMessage is one rendered email to one recipient.
type EmailMessage struct {
	To     string
	ToName string
	// From and FromName override the sender's configured default when set.
	From     string
	FromName string
	ReplyTo  string
	Subject  string
	// At least one of HTML and Text is required.
	HTML string
	Text string
	// Headers are extra MIME headers (not Message-ID: SendGrid sets its own).
	Headers map[string]string
	// Categories group messages in the provider's statistics (SendGrid: at most 10).
	Categories []string
}

// Sender is who msg is from: its own From and FromName when From is set, else the
// sender's configured defaults (from, fromName).
func (m EmailMessage) Sender(from, fromName string) (string, string) {
	if m.From != "" {
		return m.From, m.FromName
	}
	return from, fromName
}

// CheckEmail is what every email sender refuses before building msg, sent from
// from (see Sender): no recipient, no sender address, no subject, no content. All
// are permanent; provider names the sender in the error.
func CheckEmail(provider string, msg EmailMessage, from string) error {
	switch {
	case strings.TrimSpace(msg.To) == "":
		return NoEmailAddress(provider)
	case from == "":
		return Errorf(provider, "config", "no sender address configured")
	case msg.Subject == "":
		return Errorf(provider, "bad_request", "subject is empty")
	case msg.HTML == "" && msg.Text == "":
		return Errorf(provider, "bad_request", "message has neither HTML nor text content")
	}
	return nil
}

// NoEmailAddress is the permanent error for a recipient without an email address.
func NoEmailAddress(provider string) *Error {
	return Errorf(provider, "invalid_address", "recipient has no email address")
}

// SMSMessage is one rendered SMS.
type SMSMessage struct {
	// To is the recipient in E.164 form (+14155552671).
	To string
	// From is the sender number; MessagingServiceSID (MG...) is used instead when set.
	// Both empty means the sender's configured default.
	From                string
	MessagingServiceSID string
	Body                string
	// StatusCallback overrides the URL the provider posts delivery status to. Empty
	// means the sender builds one from its configured public base URL and the Tags.
	StatusCallback string
}

// PushMessage is one rendered push notification to one device token.
type PushMessage struct {
	Token string
	Title string
	Body  string
	// Data is delivered to the app as key/value strings. The sender adds
	// herald_notification_id, herald_channel and herald_tenant.
	Data map[string]string
}

// EmailSender sends email. idempotencyKey is normally tags.IdempotencyKey(); it is
// passed to the provider wherever the provider honours one.
type EmailSender interface {
	SendEmail(ctx context.Context, msg EmailMessage, idempotencyKey string, tags Tags) (Result, error)
}

// BatchRecipient is one recipient of a batch email: the address, headers of its
// own (a one-click unsubscribe link), the tags the provider echoes back in its
// receipts, and substitutions that make the shared content its own.
type BatchRecipient struct {
	To      string
	Headers map[string]string
	Tags    Tags
	// Substitutions replace, for this recipient only, every occurrence of each
	// key in the message's Subject, HTML and Text by its value (SendGrid: the
	// personalization's substitutions). Providers apply them in an order of
	// their own, so the caller makes a map whose result does not depend on it
	// (templates.EmailSkeleton's: no key occurs in another key, in a value or
	// in the content outside the places meant). Senders check the rest (see
	// CheckSubstitutions). nil: the content as it is.
	Substitutions map[string]string
}

// MaxSubstitutionBytes caps one batch recipient's substitutions, keys and
// values together: SendGrid's limit per personalization ("may not exceed
// 10,000 bytes per personalization object", sendgrid_mail_v3.json), which
// every BatchEmailSender holds to.
const MaxSubstitutionBytes = 10_000

// CheckSubstitutions is what every BatchEmailSender refuses in a recipient's
// substitutions before sending (permanent, bad_request): an empty key, keys and
// values over MaxSubstitutionBytes, a key that occurs in the message's ReplyTo
// (SendGrid substitutes there too). It costs the size of the map.
func CheckSubstitutions(provider string, msg EmailMessage, subs map[string]string) error {
	size := 0
	for k, v := range subs {
		if k == "" {
			return Errorf(provider, "bad_request", "a substitution key is empty")
		}
		size += len(k) + len(v)
		if msg.ReplyTo != "" && strings.Contains(msg.ReplyTo, k) {
			return Errorf(provider, "bad_request", "substitution key %q occurs in the reply-to address", k)
		}
	}
	if size > MaxSubstitutionBytes {
		return Errorf(provider, "bad_request", "substitutions take %d bytes, the limit is %d", size, MaxSubstitutionBytes)
	}
	return nil
}

// Personalize returns msg with subs applied to its Subject, HTML and Text, as
// a batch recipient with those substitutions receives it (see
// BatchRecipient.Substitutions): every key replaced at once, a longer key
// before a shorter one at the same position.
func (m EmailMessage) Personalize(subs map[string]string) EmailMessage {
	if len(subs) == 0 {
		return m
	}
	keys := make([]string, 0, len(subs))
	for k := range subs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if len(keys[i]) != len(keys[j]) {
			return len(keys[i]) > len(keys[j])
		}
		return keys[i] < keys[j]
	})
	pairs := make([]string, 0, 2*len(keys))
	for _, k := range keys {
		pairs = append(pairs, k, subs[k])
	}
	r := strings.NewReplacer(pairs...)
	m.Subject, m.HTML, m.Text = r.Replace(m.Subject), r.Replace(m.HTML), r.Replace(m.Text)
	return m
}

// BatchEmailSender sends one content to many recipients in one provider call
// (SendGrid: up to 1,000 personalizations per mail send). MaxEmailBatch is the
// most recipients one call takes; 0 means the sender cannot batch (a wrapper
// around a sender that cannot). msg.To and msg.ToName are ignored; msg.Headers
// apply to every recipient. A 2xx accepts every recipient; the result's message
// id is the request's.
type BatchEmailSender interface {
	EmailSender
	MaxEmailBatch() int
	SendEmailBatch(ctx context.Context, msg EmailMessage, to []BatchRecipient) (Result, error)
}

// SMSSender sends SMS; see EmailSender for idempotencyKey.
type SMSSender interface {
	SendSMS(ctx context.Context, msg SMSMessage, idempotencyKey string, tags Tags) (Result, error)
}

// PushSender sends push notifications; see EmailSender for idempotencyKey.
type PushSender interface {
	SendPush(ctx context.Context, msg PushMessage, idempotencyKey string, tags Tags) (Result, error)
}

// Error is the one error type every provider returns for a failed send. Anything a
// sender returns that is not an *Error (wrapped or not) is a programming or
// configuration error; treat it as retryable.
type Error struct {
	// Provider is the provider's name.
	Provider string
	// Code is the provider's error code when it gave one ("21211", "UNREGISTERED",
	// "http_500"), or "timeout", "connection", "canceled".
	Code string
	// Reason is a human-readable explanation, safe to store and show (no secrets).
	// It may quote the provider's error body; Error() shows at most
	// MaxReasonBytes of it, as printable UTF-8.
	Reason string
	// StatusCode is the HTTP status, 0 when there was no response.
	StatusCode int
	// Permanent means retrying the same message cannot succeed: invalid address or
	// number, unsubscribed recipient, dead push token, rejected credentials.
	Permanent bool
	// RetryAfter is how long the provider asked us to wait (429/503 Retry-After), 0
	// when it did not say.
	RetryAfter time.Duration
	// DeadToken means the push token will never work again: remove it from the user.
	DeadToken bool
	// Err is the underlying error, if any.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Provider)
	if e.Permanent {
		b.WriteString(": permanent")
	} else {
		b.WriteString(": retryable")
	}
	if e.Code != "" {
		b.WriteString(" [" + e.Code + "]")
	}
	if e.Reason != "" {
		b.WriteString(": " + SafeText(e.Reason, MaxReasonBytes))
	}
	if e.RetryAfter > 0 {
		b.WriteString(" (retry after " + e.RetryAfter.String() + ")")
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// AsError finds the *Error in err's chain.
func AsError(err error) (*Error, bool) {
	var pe *Error
	ok := errors.As(err, &pe)
	return pe, ok
}

// IsPermanent reports whether err is a provider error that retrying cannot fix.
func IsPermanent(err error) bool {
	pe, ok := AsError(err)
	return ok && pe.Permanent
}

// IsDeadToken reports whether err says the push token is dead.
func IsDeadToken(err error) bool {
	pe, ok := AsError(err)
	return ok && pe.DeadToken
}

// RetryAfter returns the delay the provider asked for, or 0.
func RetryAfter(err error) time.Duration {
	if pe, ok := AsError(err); ok {
		return pe.RetryAfter
	}
	return 0
}

// ParseRetryAfter reads a Retry-After header value: delay-seconds or an HTTP-date
// (RFC 9110 §10.2.3). A date in the past gives 0 and true.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		return time.Duration(secs) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d, true
		}
		return 0, true
	}
	return 0, false
}

// MaxReasonBytes bounds the part of a provider's answer (its error message or
// body, an SMTP reply) that an Error shows: what is stored in the attempt
// history and last_error and shown to the tenant.
const MaxReasonBytes = 512

// MaxErrorTextBytes bounds any error text stored for a tenant to see (the
// attempt history, last_error, a dead letter), provider error or not.
const MaxErrorTextBytes = 1024

// SafeText makes text from outside (a provider's error body) fit to store and
// show: invalid UTF-8 becomes U+FFFD, line breaks and tabs become spaces, other
// control and format characters are dropped, and the result is cut at a rune
// boundary to at most max bytes, "…" marking a cut.
func SafeText(s string, max int) string {
	const ellipsis = "…"
	var b strings.Builder
	b.Grow(min(len(s), max))
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			r = ' '
		case !unicode.IsPrint(r) && r != ' ' && r != utf8.RuneError:
			continue
		}
		if b.Len()+utf8.RuneLen(r) > max {
			out := b.String()
			for len(out)+len(ellipsis) > max && len(out) > 0 {
				_, size := utf8.DecodeLastRuneInString(out)
				out = out[:len(out)-size]
			}
			return out + ellipsis
		}
		b.WriteRune(r)
	}
	return b.String()
}

// TransportError classifies an error that happened before any HTTP response:
// timeouts, refused or reset connections and cancellations are all retryable.
// The request may or may not have reached the provider. A connection the egress
// policy refused is permanent (Code "egress_refused": only the operator's
// allowlist or the config can change it), and a redirect the provider answered
// with is retryable (Code "redirect"); neither quotes anything the other side
// sent.
func TransportError(provider string, err error) *Error {
	if re, ok := egress.AsRefused(err); ok {
		return &Error{Provider: provider, Code: "egress_refused", Permanent: true, Err: err,
			Reason: fmt.Sprintf("Herald does not connect to %s: it is (or resolves to) a loopback, private, link-local or otherwise internal address; "+
				"an operator can allow it with HERALD_EGRESS_ALLOW", re.Host)}
	}
	if egress.IsRedirect(err) {
		var rd *egress.RedirectError
		errors.As(err, &rd)
		return &Error{Provider: provider, Code: "redirect", Err: err,
			Reason: fmt.Sprintf("the provider answered with a redirect (HTTP %d); Herald does not follow redirects", rd.Status)}
	}
	pe := &Error{Provider: provider, Code: "connection", Reason: err.Error(), Err: err}
	var ne net.Error
	var ue *url.Error
	switch {
	case errors.Is(err, context.Canceled):
		pe.Code = "canceled"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		pe.Code = "timeout"
	case errors.As(err, &ue) && ue.Timeout():
		pe.Code = "timeout"
	}
	return pe
}

// HTTPError classifies an HTTP error response by status alone: 408, 409, 425, 429
// and 5xx are retryable (honouring Retry-After), other 4xx permanent. Providers
// refine the result with their own error codes.
func HTTPError(provider string, status int, header http.Header, code, reason string) *Error {
	if code == "" {
		code = "http_" + strconv.Itoa(status)
	}
	if reason == "" {
		reason = http.StatusText(status)
	}
	pe := &Error{Provider: provider, Code: code, Reason: reason, StatusCode: status}
	switch {
	case status == http.StatusRequestTimeout, status == http.StatusConflict,
		status == http.StatusTooEarly, status == http.StatusTooManyRequests, status >= 500:
		pe.Permanent = false
	case status >= 400:
		pe.Permanent = true
	default:
		// A non-2xx, non-4xx, non-5xx answer (a redirect): not something a retry
		// of the same request will change, but not the recipient's fault either.
		pe.Permanent = false
	}
	if header != nil {
		if d, ok := ParseRetryAfter(header.Get("Retry-After"), time.Now()); ok {
			pe.RetryAfter = d
		}
	}
	return pe
}

// Errorf builds a permanent error for a message the sender refuses before calling
// the provider (a missing recipient, an invalid configuration).
func Errorf(provider, code, format string, args ...any) *Error {
	return &Error{Provider: provider, Code: code, Reason: fmt.Sprintf(format, args...), Permanent: true}
}
