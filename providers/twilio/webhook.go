package twilio

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/twilio/twilio-go/client"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/providers"
)

// SignatureHeader carries Twilio's webhook signature.
const SignatureHeader = "X-Twilio-Signature"

// Webhook errors.
var (
	// ErrBadSignature: the X-Twilio-Signature is missing or does not match; answer 401.
	ErrBadSignature = errors.New("twilio webhook: signature does not verify")
	// ErrNotDeliveryStatus: the callback is not an outbound message status (an
	// inbound message, or a status Herald does not track); answer 200 and ignore it.
	ErrNotDeliveryStatus = errors.New("twilio webhook: not an outbound message status")
)

// WebhookValidator checks X-Twilio-Signature: HMAC-SHA1, keyed by the auth
// token, over the full public URL Twilio called followed by the POST parameters
// sorted by name, each name directly followed by its (first) value — what
// twilio-go's RequestValidator checks, computed in one pass: the
// RequestValidator builds the signed string by repeated concatenation, which
// costs time and memory quadratic in the number of parameters (a forged
// 64 KiB body of empty parameters allocated ~490 MB).
type WebhookValidator struct {
	key []byte
	rv  client.RequestValidator // for bodySHA256 (JSON) callbacks only
}

// NewWebhookValidator validates with the auth token of the account that sent the
// messages.
func NewWebhookValidator(authToken string) *WebhookValidator {
	return &WebhookValidator{key: []byte(authToken), rv: client.NewRequestValidator(authToken)}
}

// PublicURL is the URL Twilio called: publicBaseURL (scheme://host[:port] as
// Twilio sees it, configured because a proxy changes scheme and port) plus the
// request's path and raw query as received.
func PublicURL(publicBaseURL string, r *http.Request) string {
	return strings.TrimRight(publicBaseURL, "/") + r.URL.RequestURI()
}

// Validate checks a form-encoded callback. fullURL is the URL Twilio called (see
// PublicURL); body is the raw request body.
func (v *WebhookValidator) Validate(fullURL string, body []byte, signature string) error {
	_, err := v.ValidateForm(fullURL, body, signature)
	return err
}

// ValidateForm is Validate returning the callback's parameters, parsed once
// (the signature covers them).
func (v *WebhookValidator) ValidateForm(fullURL string, body []byte, signature string) (url.Values, error) {
	if signature == "" {
		return nil, ErrBadSignature
	}
	u, err := url.Parse(fullURL)
	if err != nil {
		return nil, ErrBadSignature
	}
	if u.Query().Get("bodySHA256") != "" {
		// A JSON body signed by its hash: no parameters to sort.
		if !v.rv.ValidateBody(fullURL, body, signature) {
			return nil, ErrBadSignature
		}
		return url.Values{}, nil
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, ErrBadSignature
	}
	names := make([]string, 0, len(form))
	for k := range form {
		names = append(names, k)
	}
	sort.Strings(names)
	// Twilio signs with or without the default port, depending on the
	// product; twilio-go accepts either.
	for _, candidate := range [2]string{withPort(fullURL), withoutPort(fullURL)} {
		mac := hmac.New(sha1.New, v.key)
		mac.Write([]byte(candidate)) // a hash.Hash never fails a write
		for _, k := range names {
			mac.Write([]byte(k))
			mac.Write([]byte(form[k][0]))
		}
		want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
		if subtle.ConstantTimeCompare([]byte(want), []byte(signature)) == 1 {
			return form, nil
		}
	}
	return nil, ErrBadSignature
}

// withPort and withoutPort are twilio-go's addPort and removePort: the URL
// with its scheme's default port made explicit, or with any port removed.
func withPort(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Port() != "" {
		return raw
	}
	port := "80"
	if u.Scheme == "https" {
		port = "443"
	}
	u.Host += ":" + port
	return u.String()
}

func withoutPort(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Port() == "" {
		return raw
	}
	u.Host = strings.Split(u.Host, ":")[0]
	return u.String()
}

// ParseStatusCallback turns a validated message status callback into a receipt.
// query is the callback URL's query (Herald's tags), form the POST parameters;
// receivedAt stands in for the event time, which Twilio's callback does not carry.
//
// MessageStatus maps: accepted/queued/scheduled → accepted, sending/sent → sent,
// delivered/read → delivered, failed/undelivered/canceled → failed (reason: the
// ErrorCode). Callbacks for the same message may arrive more than once and out of
// order; apply them so status only moves forward.
func ParseStatusCallback(query, form url.Values, receivedAt time.Time) (providers.Receipt, error) {
	sid := form.Get("MessageSid")
	if sid == "" {
		sid = form.Get("SmsSid")
	}
	st := form.Get("MessageStatus")
	if st == "" {
		st = form.Get("SmsStatus")
	}
	r := providers.Receipt{
		Provider:          Name,
		TenantID:          query.Get(QueryTenant),
		NotificationID:    query.Get(QueryNotificationID),
		Channel:           herald.Channel(query.Get(QueryChannel)),
		ProviderMessageID: sid,
		ProviderStatus:    st,
		OccurredAt:        receivedAt.UTC(),
	}
	switch st {
	case "accepted", "queued", "scheduled":
		r.Status = providers.ReceiptAccepted
	case "sending", "sent":
		r.Status = providers.ReceiptSent
	case "delivered", "read":
		r.Status = providers.ReceiptDelivered
	case "failed", "undelivered", "canceled":
		r.Status = providers.ReceiptFailed
		r.Reason = st
		if code := form.Get("ErrorCode"); code != "" {
			r.Reason = "error " + code
			if m := form.Get("ErrorMessage"); m != "" {
				r.Reason += ": " + m
			}
		}
	default:
		return r, ErrNotDeliveryStatus
	}
	if sid == "" {
		return r, ErrNotDeliveryStatus
	}
	return r, nil
}

// The opt-out and opt-in keywords Twilio's own Advanced Opt-Out recognises
// (and the carriers require honouring): a message that is one of them, in
// any case, with surrounding spaces and punctuation ignored.
var (
	stopKeywords  = []string{"STOP", "STOPALL", "UNSUBSCRIBE", "CANCEL", "END", "QUIT"}
	startKeywords = []string{"START", "UNSTOP", "YES"}
)

// ParseInbound reads a verified incoming message: a STOP-family keyword from
// From suppresses that number (reason stop), a START-family keyword takes it
// back off (only a stop entry: a bounce or the tenant's own entry stays); ok
// is false for any other message or one with no sender.
func ParseInbound(form url.Values) (e providers.AddressEvent, ok bool) {
	from := form.Get("From")
	word := strings.TrimFunc(form.Get("Body"), func(r rune) bool { return unicode.IsSpace(r) || unicode.IsPunct(r) })
	if from == "" || word == "" {
		return e, false
	}
	e = providers.AddressEvent{Provider: Name, Channel: herald.ChannelSMS, Address: from, Reason: herald.SuppressionStop}
	for _, k := range stopKeywords {
		if strings.EqualFold(word, k) {
			e.Suppress, e.Detail = true, "replied "+k
			return e, true
		}
	}
	for _, k := range startKeywords {
		if strings.EqualFold(word, k) {
			e.Detail = "replied " + k
			return e, true
		}
	}
	return e, false
}
