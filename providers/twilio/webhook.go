package twilio

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/twilio/twilio-go/client"

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

// WebhookValidator checks X-Twilio-Signature with twilio-go's RequestValidator:
// HMAC-SHA1, keyed by the auth token, over the full public URL Twilio called
// followed by the POST parameters sorted by name, each name directly followed by
// its value.
type WebhookValidator struct {
	rv client.RequestValidator
}

// NewWebhookValidator validates with the auth token of the account that sent the
// messages.
func NewWebhookValidator(authToken string) *WebhookValidator {
	return &WebhookValidator{rv: client.NewRequestValidator(authToken)}
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
	if signature == "" || !v.rv.ValidateBody(fullURL, body, signature) {
		return ErrBadSignature
	}
	return nil
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
		Channel:           query.Get(QueryChannel),
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
