package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
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
// of at most 768 KB).
const MaxWebhookBodyBytes = 2 << 20

// MaxTwilioBodyBytes caps a Twilio status callback (a score of short
// parameters, about 1 KB). The signature covers the sorted parameters, so the
// body is parsed before it can be verified: the cap bounds that work.
const MaxTwilioBodyBytes = 16 << 10

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

// bodyPool holds webhook body buffers: a forged 2 MiB body is read into a
// reused buffer rather than a fresh one that io.ReadAll grows several times.
var bodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBody: a buffer that grew well past the largest webhook body is
// dropped (a buffer sized for one rounds up to its allocation size class).
const maxPooledBody = 2 * MaxWebhookBodyBytes

// readRawBody reads the whole body, at most limit bytes, exactly as received (the
// signatures are over these bytes), into a pooled buffer: the bytes are valid
// until release is called. A Content-Length over limit is refused unread.
func readRawBody(c *gin.Context, limit int64) (raw []byte, release func(), err error) {
	tooBig := &Error{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large",
		Message: fmt.Sprintf("request body exceeds %d bytes", limit)}
	if c.Request.ContentLength > limit {
		return nil, nil, tooBig
	}
	buf := bodyPool.Get().(*bytes.Buffer)
	buf.Reset()
	release = func() {
		if buf.Cap() <= maxPooledBody {
			bodyPool.Put(buf)
		}
	}
	if n := c.Request.ContentLength; n > 0 {
		buf.Grow(int(n) + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(http.MaxBytesReader(c.Writer, c.Request.Body, limit)); err != nil {
		release()
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, nil, tooBig
		}
		return nil, nil, &Error{Status: http.StatusBadRequest, Code: "unreadable_body", Message: "could not read request body"}
	}
	return buf.Bytes(), release, nil
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
//
// Nothing is decoded before the signature verifies: with ?tenant= an unsigned or
// stale request is refused before its body is read; without it the body is only
// scanned (sendgrid.ScanBatch: one pass, no allocation) for its tenant.
func (s *Server) sendgridWebhook(c *gin.Context) {
	if !s.haveProviders(c) {
		return
	}
	tenantID := c.Query("tenant")
	fromBody := tenantID == ""
	if !fromBody {
		if err := sendgrid.CheckHeaders(c.Request.Header, s.cfg.WebhookTolerance, time.Now()); err != nil {
			s.abort(c, sendgridUnauthorized(err))
			return
		}
	}
	raw, release, err := readRawBody(c, MaxWebhookBodyBytes)
	if err != nil {
		s.abort(c, err)
		return
	}
	defer release()
	malformed := &Error{Status: http.StatusBadRequest, Code: "malformed_json", Message: "the body must be a JSON array of SendGrid events"}
	ambiguous := badField("tenant", "ambiguous_tenant",
		"the events name more than one tenant; give the webhook URL a ?tenant=<tenant id> parameter")
	if fromBody {
		batch, err := sendgrid.ScanBatch(raw)
		if err != nil {
			s.abort(c, malformed)
			return
		}
		switch len(batch.Tenants) {
		case 0:
			c.JSON(http.StatusOK, webhookResult{Received: batch.Events, Ignored: batch.Events})
			return
		case 1:
			tenantID = batch.Tenants[0]
		default:
			s.abort(c, ambiguous)
			return
		}
		if err := sendgrid.CheckHeaders(c.Request.Header, s.cfg.WebhookTolerance, time.Now()); err != nil {
			s.abort(c, sendgridUnauthorized(err))
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
		s.abort(c, sendgridUnauthorized(err))
		return
	}
	receipts, err := sendgrid.ParseEvents(raw)
	if err != nil {
		s.abort(c, malformed)
		return
	}
	if fromBody {
		// The scan does not decode escapes: the decoded events must agree.
		for _, r := range receipts {
			if r.TenantID != "" && r.TenantID != tenantID {
				s.abort(c, ambiguous)
				return
			}
		}
	}
	res, err := s.applyReceipts(ctx, tenantID, herald.ChannelEmail, receipts)
	if err != nil {
		s.abort(c, err)
		return
	}
	c.JSON(http.StatusOK, res)
}

// sendgridUnauthorized is the 401 for a SendGrid verification error.
func sendgridUnauthorized(err error) *Error {
	switch {
	case errors.Is(err, sendgrid.ErrMissingSignature):
		return webhookUnauthorized("the %s and %s headers are required", sendgrid.SignatureHeader, sendgrid.TimestampHeader)
	case errors.Is(err, sendgrid.ErrStaleTimestamp):
		return webhookUnauthorized("the %s is missing, malformed or outside the accepted window", sendgrid.TimestampHeader)
	default:
		return webhookUnauthorized("the signature does not verify")
	}
}

// twilioWebhook receives Twilio's message status callbacks at the StatusCallback
// URL Herald set on each message (…/v1/webhooks/twilio?tenant=…&notification_id=…
// &channel=sms). X-Twilio-Signature is checked with the tenant's auth token over
// the public URL Twilio called: Config.PublicBaseURL (a proxy in front of Herald
// changes scheme and port) plus the path and raw query as received. A request
// naming no tenant or carrying no signature is refused before its body is read;
// the body is parsed once, by the check (the signature covers the sorted
// parameters), in time linear in its size.
func (s *Server) twilioWebhook(c *gin.Context) {
	if !s.haveProviders(c) {
		return
	}
	query := c.Request.URL.Query()
	tenantID := query.Get(twilio.QueryTenant)
	if tenantID == "" {
		s.abort(c, webhookUnauthorized("the callback URL names no tenant, so its signature cannot be checked"))
		return
	}
	signature := c.GetHeader(twilio.SignatureHeader)
	if signature == "" {
		s.abort(c, webhookUnauthorized("the %s header is required", twilio.SignatureHeader))
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
	raw, release, err := readRawBody(c, MaxTwilioBodyBytes)
	if err != nil {
		s.abort(c, err)
		return
	}
	defer release()
	fullURL := twilio.PublicURL(s.publicBaseURL(c), c.Request)
	form, err := twilio.NewWebhookValidator(cr.webhookToken()).ValidateForm(fullURL, raw, signature)
	if err != nil {
		s.abort(c, webhookUnauthorized("%s does not verify for %s", twilio.SignatureHeader, fullURL))
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
