package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/sendgrid"
	"github.com/herald-notify/herald/providers/twilio"
)

// Delivery receipts: POST /v1/webhooks/sendgrid and POST /v1/webhooks/twilio.
// Neither takes an API key: each is authenticated by the provider's signature,
// checked with the key of the tenant the request names. A request that does not
// verify answers 401 and changes nothing. A verified receipt for a message Herald
// does not know answers 200 and is ignored, so the provider does not retry it.

// MaxWebhookBodyBytes caps a SendGrid Event Webhook batch (SendGrid posts batches
// of at most 768 KB). Twilio callbacks are small and use MaxBodyBytes.
const MaxWebhookBodyBytes = 2 << 20

// webhookResult is the body of a 200 from a webhook.
type webhookResult struct {
	// Received counts the delivery events in the request (SendGrid events Herald
	// does not track, such as open tracking's spamreport, are not counted).
	Received int `json:"received"`
	// Recorded counts receipts stored for the first time (not duplicates).
	Recorded int `json:"recorded"`
	// Applied counts receipts that moved (or confirmed) a delivery's status.
	Applied int `json:"applied"`
	// Ignored counts receipts that name no notification of the tenant on the
	// provider's channel, or another tenant.
	Ignored int `json:"ignored"`
}

func webhookUnauthorized(format string, args ...any) *Error {
	return &Error{Status: http.StatusUnauthorized, Code: "invalid_signature", Message: fmt.Sprintf(format, args...)}
}

// readRawBody reads the whole body, at most limit bytes, exactly as received: the
// signatures are over these bytes.
func readRawBody(c *gin.Context, limit int64) ([]byte, error) {
	raw, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &Error{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large",
				Message: fmt.Sprintf("request body exceeds %d bytes", limit)}
		}
		return nil, &Error{Status: http.StatusBadRequest, Code: "unreadable_body", Message: "could not read request body"}
	}
	return raw, nil
}

// sendgridWebhook receives SendGrid's signed Event Webhook.
//
// The tenant is the `tenant` query parameter when present (configure the webhook
// URL as .../v1/webhooks/sendgrid?tenant=<tenant id>); events naming another
// tenant are then ignored. Without it, the tenant is the `tenant` custom arg
// Herald put on every message: all events of the batch that carry one must agree
// (400 otherwise), and a batch in which no event carries one names nothing Herald
// sent — it is answered 200 and ignored without being verified, since there is no
// key to verify it with and nothing to change.
func (s *Server) sendgridWebhook(c *gin.Context) {
	if !s.haveProviders(c) {
		return
	}
	raw, err := readRawBody(c, MaxWebhookBodyBytes)
	if err != nil {
		s.abort(c, err)
		return
	}
	tenantID := c.Query("tenant")
	var receipts []providers.Receipt
	parsed := false
	if tenantID == "" {
		receipts, err = sendgrid.ParseEvents(raw)
		if err != nil {
			s.abort(c, &Error{Status: http.StatusBadRequest, Code: "malformed_json", Message: "the body must be a JSON array of SendGrid events"})
			return
		}
		parsed = true
		tenants := map[string]struct{}{}
		for _, r := range receipts {
			if r.TenantID != "" {
				tenants[r.TenantID] = struct{}{}
			}
		}
		switch len(tenants) {
		case 0:
			c.JSON(http.StatusOK, webhookResult{Received: len(receipts), Ignored: len(receipts)})
			return
		case 1:
			for t := range tenants {
				tenantID = t
			}
		default:
			s.abort(c, badField("tenant", "ambiguous_tenant",
				"the events name %d different tenants; give the webhook URL a ?tenant=<tenant id> parameter", len(tenants)))
			return
		}
	}

	ctx := c.Request.Context()
	pc, err := s.cfg.Providers.GetProviderConfig(ctx, tenantID, herald.ChannelEmail, sendgrid.Name)
	if errors.Is(err, herald.ErrNotFound) {
		s.abort(c, webhookUnauthorized("no SendGrid webhook key is configured for the tenant"))
		return
	}
	if err != nil {
		s.abort(c, err)
		return
	}
	var st sendgrid.Settings
	if err := json.Unmarshal(pc.Settings, &st); err != nil || st.WebhookPublicKey == "" {
		s.abort(c, webhookUnauthorized("no SendGrid webhook key is configured for the tenant"))
		return
	}
	v, err := sendgrid.NewWebhookVerifier(st.WebhookPublicKey, s.cfg.WebhookTolerance)
	if err != nil {
		s.abort(c, webhookUnauthorized("the tenant's SendGrid webhook key is not usable"))
		return
	}
	if err := v.Verify(c.Request.Header, raw); err != nil {
		switch {
		case errors.Is(err, sendgrid.ErrMissingSignature):
			s.abort(c, webhookUnauthorized("the %s and %s headers are required", sendgrid.SignatureHeader, sendgrid.TimestampHeader))
		case errors.Is(err, sendgrid.ErrStaleTimestamp):
			s.abort(c, webhookUnauthorized("the %s is missing, malformed or outside the accepted window", sendgrid.TimestampHeader))
		default:
			s.abort(c, webhookUnauthorized("the signature does not verify"))
		}
		return
	}
	if !parsed {
		if receipts, err = sendgrid.ParseEvents(raw); err != nil {
			s.abort(c, &Error{Status: http.StatusBadRequest, Code: "malformed_json", Message: "the body must be a JSON array of SendGrid events"})
			return
		}
	}
	res, err := s.applyReceipts(ctx, tenantID, herald.ChannelEmail, receipts)
	if err != nil {
		s.abort(c, err)
		return
	}
	c.JSON(http.StatusOK, res)
}

// twilioWebhook receives Twilio's message status callbacks at the StatusCallback
// URL Herald set on each message (…/v1/webhooks/twilio?tenant=…&notification_id=…
// &channel=sms). X-Twilio-Signature is checked with the tenant's auth token over
// the public URL Twilio called: Config.PublicBaseURL (a proxy in front of Herald
// changes scheme and port) plus the path and raw query as received.
func (s *Server) twilioWebhook(c *gin.Context) {
	if !s.haveProviders(c) {
		return
	}
	raw, err := readRawBody(c, MaxBodyBytes)
	if err != nil {
		s.abort(c, err)
		return
	}
	query := c.Request.URL.Query()
	tenantID := query.Get(twilio.QueryTenant)
	if tenantID == "" {
		s.abort(c, webhookUnauthorized("the callback URL names no tenant, so its signature cannot be checked"))
		return
	}
	ctx := c.Request.Context()
	pc, err := s.cfg.Providers.GetProviderConfig(ctx, tenantID, herald.ChannelSMS, twilio.Name)
	if errors.Is(err, herald.ErrNotFound) {
		s.abort(c, webhookUnauthorized("no Twilio credentials are configured for the tenant"))
		return
	}
	if err != nil {
		s.abort(c, err)
		return
	}
	var cr twilioCredentials
	if len(pc.Secret) == 0 || json.Unmarshal(pc.Secret, &cr) != nil || cr.webhookToken() == "" {
		s.abort(c, webhookUnauthorized("no Twilio credentials are configured for the tenant"))
		return
	}
	fullURL := twilio.PublicURL(s.publicBaseURL(c), c.Request)
	if err := twilio.NewWebhookValidator(cr.webhookToken()).Validate(fullURL, raw, c.GetHeader(twilio.SignatureHeader)); err != nil {
		s.abort(c, webhookUnauthorized("%s does not verify for %s", twilio.SignatureHeader, fullURL))
		return
	}
	form, err := url.ParseQuery(string(raw))
	if err != nil {
		s.abort(c, &Error{Status: http.StatusBadRequest, Code: "unreadable_body", Message: "the body must be form-encoded"})
		return
	}
	r, err := twilio.ParseStatusCallback(query, form, time.Now())
	if errors.Is(err, twilio.ErrNotDeliveryStatus) {
		c.JSON(http.StatusOK, webhookResult{Received: 1, Ignored: 1})
		return
	}
	if err != nil {
		s.abort(c, err)
		return
	}
	res, err := s.applyReceipts(ctx, tenantID, herald.ChannelSMS, []providers.Receipt{r})
	if err != nil {
		s.abort(c, err)
		return
	}
	c.JSON(http.StatusOK, res)
}

// publicBaseURL is how providers reach this API. Without a configured one it is
// the request's own scheme and host (correct only without a proxy in between).
func (s *Server) publicBaseURL(c *gin.Context) string {
	if s.cfg.PublicBaseURL != "" {
		return s.cfg.PublicBaseURL
	}
	scheme := "http"
	if c.Request.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + c.Request.Host
}

// applyReceipts applies verified receipts for tenantID from a provider that serves
// channel. Receipts naming another tenant or channel, or a notification the tenant
// does not have, are ignored. For each other receipt, in order:
//  1. it is recorded (provider_receipts; a repeat collapses on the unique index), so
//     a delivery retry finds proof that the provider accepted and does not resend;
//  2. the delivery moves to the receipt's status (sent / delivered / failed with the
//     provider's reason) — store.UpdateDelivery never moves a status backwards, so
//     duplicates and out-of-order events (processed after delivered) change nothing;
//  3. once per notification touched, the overall status is recomputed.
//
// Every step is idempotent: after an error the provider's retry of the whole
// request converges to the same state.
func (s *Server) applyReceipts(ctx context.Context, tenantID, channel string, receipts []providers.Receipt) (webhookResult, error) {
	mine := providers.FilterTenant(receipts, tenantID)
	res := webhookResult{Received: len(receipts), Ignored: len(receipts) - len(mine)}
	known := map[string]bool{} // notification id → the tenant has it
	touched := map[string]bool{}
	for _, r := range mine {
		if !r.Named() || r.Channel != channel {
			res.Ignored++
			continue
		}
		isKnown, seen := known[r.NotificationID]
		if !seen {
			if _, _, err := ids.ParseNotificationID(r.NotificationID); err == nil {
				_, _, err := s.store.NotificationStatus(ctx, tenantID, r.NotificationID)
				switch {
				case err == nil:
					isKnown = true
				case !errors.Is(err, herald.ErrNotFound):
					return res, err
				}
			}
			known[r.NotificationID] = isKnown
		}
		if !isKnown {
			res.Ignored++
			continue
		}
		recorded, err := s.cfg.Providers.RecordReceipt(ctx, r)
		if err != nil {
			return res, err
		}
		if recorded {
			res.Recorded++
		}
		u := store.DeliveryUpdate{Status: r.DeliveryStatus()}
		if r.Provider != "" {
			p := r.Provider
			u.Provider = &p
		}
		if r.ProviderMessageID != "" {
			id := r.ProviderMessageID
			u.ProviderMessageID = &id
		}
		if u.Status == herald.DeliveryFailed {
			reason := r.Reason
			if reason == "" {
				reason = r.ProviderStatus
			}
			u.Reason = &reason
		}
		applied, err := s.store.UpdateDelivery(ctx, tenantID, r.NotificationID, r.Channel, u)
		if err != nil {
			return res, err
		}
		if applied {
			res.Applied++
		}
		if applied || recorded {
			touched[r.NotificationID] = true
		}
	}
	order := make([]string, 0, len(touched))
	for id := range touched {
		order = append(order, id)
	}
	sort.Strings(order)
	for _, id := range order {
		if _, err := s.store.RecomputeNotificationStatus(ctx, tenantID, id); err != nil && !errors.Is(err, herald.ErrNotFound) {
			return res, err
		}
	}
	return res, nil
}
