package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// WebhookEvent is one status webhook Herald sent to a tenant's endpoint
// (POST /v1/webhook-endpoints subscribes one), after its signature was checked.
type WebhookEvent struct {
	// MessageID is the webhook-id header: the same on every retry and replay of one
	// message, so a receiver dedups on it.
	MessageID string `json:"-"`
	// Type is one of WebhookEventType's values (delivery.sent, ..., campaign.completed).
	Type      WebhookEventType `json:"type"`
	Timestamp time.Time        `json:"timestamp"`
	// Data is DeliveryEventData for delivery.* events, CampaignEventData for
	// campaign.* events (Delivery and Campaign decode it).
	Data json.RawMessage `json:"data"`
}

// DeliveryEventData is the data of a delivery.* event.
type DeliveryEventData struct {
	NotificationID string         `json:"notification_id"`
	Channel        ChannelName    `json:"channel"`
	Status         DeliveryStatus `json:"status"`
	Reason         string         `json:"reason,omitempty"`
	Provider       string         `json:"provider,omitempty"`
	Error          string         `json:"error,omitempty"`
}

// CampaignEventData is the data of a campaign.* event.
type CampaignEventData struct {
	CampaignID   string         `json:"campaign_id"`
	Status       CampaignStatus `json:"status"`
	AudienceSize int64          `json:"audience_size"`
}

// Delivery decodes a delivery.* event's data.
func (e *WebhookEvent) Delivery() (*DeliveryEventData, error) {
	if !strings.HasPrefix(string(e.Type), "delivery.") {
		return nil, fmt.Errorf("herald webhook: a %s event is not a delivery event", e.Type)
	}
	var d DeliveryEventData
	return &d, json.Unmarshal(e.Data, &d)
}

// Campaign decodes a campaign.* event's data.
func (e *WebhookEvent) Campaign() (*CampaignEventData, error) {
	if !strings.HasPrefix(string(e.Type), "campaign.") {
		return nil, fmt.Errorf("herald webhook: a %s event is not a campaign event", e.Type)
	}
	var d CampaignEventData
	return &d, json.Unmarshal(e.Data, &d)
}

// ErrWebhookSignature is a request whose Standard Webhooks signature does not
// verify: a wrong secret, a tampered body, or a timestamp more than five minutes
// away (a replay).
var ErrWebhookSignature = errors.New("herald webhook: signature does not verify")

// WebhookVerifier checks that a request comes from Herald: the Standard Webhooks
// signature (webhook-id, webhook-timestamp, webhook-signature: an HMAC-SHA256 of
// id.timestamp.body with the endpoint's whsec_ secret), checked by the Standard
// Webhooks library. While a secret is being rotated Herald signs with both the
// new and the old one, so a verifier with either accepts.
type WebhookVerifier struct{ wh *standardwebhooks.Webhook }

// NewWebhookVerifier takes the endpoint's secret ("whsec_...", as
// CreateWebhookEndpoint and RotateWebhookSecret answer it).
func NewWebhookVerifier(secret string) (*WebhookVerifier, error) {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return nil, fmt.Errorf("herald webhook: secret: %w", err)
	}
	return &WebhookVerifier{wh: wh}, nil
}

// Verify checks body against the request's headers and decodes the event; an
// unverified body is ErrWebhookSignature and is not decoded.
func (v *WebhookVerifier) Verify(body []byte, header http.Header) (*WebhookEvent, error) {
	if err := v.wh.Verify(body, header); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrWebhookSignature, err)
	}
	var ev WebhookEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, fmt.Errorf("herald webhook: body: %w", err)
	}
	ev.MessageID = header.Get(standardwebhooks.HeaderWebhookID)
	return &ev, nil
}

// maxWebhookBody bounds what Handler reads (Herald's payloads are well under 64 KiB).
const maxWebhookBody = 1 << 20

// Handler is an http.Handler for the endpoint's URL: it verifies each request
// and calls fn with the event; a request that does not verify is answered 401,
// an error from fn 500 (Herald retries it, with the same MessageID), else 204.
func (v *WebhookVerifier) Handler(fn func(*http.Request, *WebhookEvent) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxWebhookBody))
		if err != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		ev, err := v.Verify(body, r.Header)
		if err != nil {
			status := http.StatusBadRequest
			if errors.Is(err, ErrWebhookSignature) {
				status = http.StatusUnauthorized
			}
			http.Error(w, err.Error(), status)
			return
		}
		if err := fn(r, ev); err != nil {
			http.Error(w, "handler failed", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
