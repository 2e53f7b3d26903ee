package sendgrid

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sendgrid/sendgrid-go/helpers/eventwebhook"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/providers"
)

// Signed Event Webhook headers.
const (
	SignatureHeader = eventwebhook.VerificationHTTPHeader // X-Twilio-Email-Event-Webhook-Signature
	TimestampHeader = eventwebhook.TimestampHTTPHeader    // X-Twilio-Email-Event-Webhook-Timestamp
)

// DefaultTolerance is how far a webhook timestamp may be from now.
const DefaultTolerance = 10 * time.Minute

// Webhook verification errors; a handler answers 401 for any of them.
var (
	ErrMissingSignature = errors.New("sendgrid webhook: signature or timestamp header missing")
	ErrBadSignature     = errors.New("sendgrid webhook: signature does not verify")
	ErrStaleTimestamp   = errors.New("sendgrid webhook: timestamp outside tolerance")
)

// WebhookVerifier checks SendGrid's signed Event Webhook: an ECDSA P-256 signature
// (ASN.1 DER, base64) over the timestamp header followed by the raw body, with the
// public key SendGrid shows for the account's webhook.
type WebhookVerifier struct {
	key *ecdsa.PublicKey
	// Tolerance bounds |now - timestamp|; 0 means DefaultTolerance.
	Tolerance time.Duration
	// Now defaults to time.Now.
	Now func() time.Time
}

// NewWebhookVerifier parses the base64 DER (PKIX) public key SendGrid gives for the
// signed webhook. It must be an ECDSA P-256 key.
func NewWebhookVerifier(publicKeyBase64 string, tolerance time.Duration) (*WebhookVerifier, error) {
	der, err := base64.StdEncoding.DecodeString(strings.TrimSpace(publicKeyBase64))
	if err != nil {
		return nil, fmt.Errorf("sendgrid webhook public key: %w", err)
	}
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("sendgrid webhook public key: %w", err)
	}
	k, ok := pub.(*ecdsa.PublicKey)
	if !ok || k.Curve != elliptic.P256() {
		return nil, errors.New("sendgrid webhook public key: not an ECDSA P-256 key")
	}
	return &WebhookVerifier{key: k, Tolerance: tolerance}, nil
}

// CheckHeaders checks what can be checked without the key and the body: both
// signature headers are present (ErrMissingSignature) and the timestamp is
// within tolerance of now (ErrStaleTimestamp; tolerance 0 means
// DefaultTolerance). Verify does it too; a handler calls it first to refuse
// an unsigned or replayed request before reading its body.
func CheckHeaders(h http.Header, tolerance time.Duration, now time.Time) error {
	sig, ts := h.Get(SignatureHeader), h.Get(TimestampHeader)
	if sig == "" || ts == "" {
		return ErrMissingSignature
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return ErrStaleTimestamp
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	if d := now.Sub(time.Unix(secs, 0)); d > tolerance || d < -tolerance {
		return ErrStaleTimestamp
	}
	return nil
}

// Verify checks the signature headers against the raw body (exactly the bytes
// received; do not re-encode).
func (v *WebhookVerifier) Verify(h http.Header, body []byte) error {
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	if err := CheckHeaders(h, v.Tolerance, now()); err != nil {
		return err
	}
	sig, ts := h.Get(SignatureHeader), h.Get(TimestampHeader)
	ok, err := eventwebhook.VerifySignature(v.key, body, sig, ts)
	if err != nil || !ok {
		return ErrBadSignature
	}
	return nil
}

// event is one Event Webhook event; custom args arrive as top-level fields.
type event struct {
	Email          string          `json:"email"`
	Timestamp      int64           `json:"timestamp"`
	Event          string          `json:"event"`
	SGEventID      string          `json:"sg_event_id"`
	SGMessageID    string          `json:"sg_message_id"`
	Reason         string          `json:"reason"`
	Response       string          `json:"response"`
	Type           string          `json:"type"`
	Status         string          `json:"status"`
	NotificationID json.RawMessage `json:"notification_id"`
	Channel        json.RawMessage `json:"channel"`
	Tenant         json.RawMessage `json:"tenant"`
}

// ParseEvents turns a verified Event Webhook batch (a JSON array) into receipts, in
// batch order (ParseBatch's receipts).
func ParseEvents(body []byte) ([]providers.Receipt, error) {
	b, err := ParseBatch(body)
	return b.Receipts, err
}

// Parsed is what a verified Event Webhook batch holds for Herald.
type Parsed struct {
	// Receipts are the delivery events, in batch order: processed → accepted,
	// deferred → deferred, delivered/open/click → delivered, bounce/dropped →
	// failed. Other events (spamreport, unsubscribe, group_*) are not receipts.
	Receipts []providers.Receipt
	// Addresses are the events that put the recipient's address on the
	// tenant's suppression list, in batch order: a hard bounce (event bounce
	// whose type is not "blocked", SendGrid's soft bounce), dropped, spamreport
	// and unsubscribe (SendGrid's global unsubscribe; a group_unsubscribe
	// leaves one group, which Herald's categories do not map to).
	Addresses []providers.AddressEvent
}

// ParseBatch decodes a verified Event Webhook batch. The batch may hold
// duplicates and events out of order; callers must apply receipts so status
// only moves forward (listing an address twice keeps the first entry).
//
// The tags in each receipt come from the body: when the webhook's public key is per
// tenant, keep only receipts for that tenant (providers.FilterTenant), or one
// tenant could forge receipts for another's notifications.
func ParseBatch(body []byte) (Parsed, error) {
	var events []event
	if err := json.Unmarshal(body, &events); err != nil {
		return Parsed{}, fmt.Errorf("sendgrid webhook: body is not an event array: %w", err)
	}
	out := Parsed{Receipts: make([]providers.Receipt, 0, len(events))}
	for _, e := range events {
		if reason, ok := suppressionOf(e); ok && e.Email != "" {
			out.Addresses = append(out.Addresses, providers.AddressEvent{
				Provider: Name, TenantID: str(e.Tenant), Channel: herald.ChannelEmail, Address: e.Email,
				Suppress: true, Reason: reason, Detail: firstNonEmpty(e.Reason, e.Response, e.Status),
			})
		}
		var status providers.ReceiptStatus
		reason := ""
		switch e.Event {
		case "processed":
			status = providers.ReceiptAccepted
		case "deferred":
			status, reason = providers.ReceiptDeferred, firstNonEmpty(e.Response, e.Reason)
		case "delivered", "open", "click":
			status = providers.ReceiptDelivered
		case "bounce", "dropped":
			status = providers.ReceiptFailed
			reason = firstNonEmpty(e.Reason, e.Response, e.Type, e.Event)
			if e.Status != "" {
				reason += " (" + e.Status + ")"
			}
		default:
			continue
		}
		out.Receipts = append(out.Receipts, providers.Receipt{
			Provider:          Name,
			TenantID:          str(e.Tenant),
			NotificationID:    str(e.NotificationID),
			Channel:           herald.Channel(str(e.Channel)),
			ProviderMessageID: MessageIDFromEvent(e.SGMessageID),
			Status:            status,
			ProviderStatus:    e.Event,
			Reason:            reason,
			EventID:           e.SGEventID,
			OccurredAt:        time.Unix(e.Timestamp, 0).UTC(),
		})
	}
	return out, nil
}

// suppressionOf says whether an event lists its address, and why.
func suppressionOf(e event) (herald.SuppressionReason, bool) {
	switch e.Event {
	case "bounce":
		// type "blocked" is a soft bounce (the receiving server refused for now).
		return herald.SuppressionBounce, e.Type != "blocked"
	case "dropped":
		return herald.SuppressionDropped, true
	case "spamreport":
		return herald.SuppressionSpamReport, true
	case "unsubscribe":
		return herald.SuppressionUnsubscribe, true
	}
	return "", false
}

// MessageIDFromEvent turns an event's sg_message_id ("<X-Message-Id>.filterdrecv-...")
// into the X-Message-Id the send returned.
func MessageIDFromEvent(sgMessageID string) string {
	id, _, _ := strings.Cut(sgMessageID, ".")
	return id
}

// str reads a custom arg that should be a JSON string; anything else is "".
func str(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
