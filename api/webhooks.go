package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"

	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/webhooks"
	"github.com/herald-notify/herald/providers"
)

// Delivery receipts: POST /v1/webhooks/sendgrid and POST /v1/webhooks/twilio,
// each served by the Webhook of the registry's provider of that name. Neither
// takes an API key: each is authenticated by the provider's signature, checked
// with the key of the tenant the request names. A request that does not verify
// answers 401 and changes nothing. A verified receipt for a message Herald does
// not know answers 200 and is ignored, so the provider does not retry it.

// webhookProviders are the providers whose webhooks the API serves, as
// api/openapi.yaml documents them.
var webhookProviders = []string{"sendgrid", "twilio"}

// inboundWebhookProviders are the providers whose inbound webhooks
// (providers.Definition.Inbound) the API serves.
var inboundWebhookProviders = []string{"twilio"}

// webhookMaxBody is the body cap of a provider's webhook (what a request is
// charged by in the public rate limit); maxBodyBytes without a registry.
func (h *providersRoom) webhookMaxBody(provider string) int64 {
	if h.cfg.Registry != nil {
		if def, ok := h.cfg.Registry.Get(provider); ok && def.Webhook != nil {
			return def.Webhook.MaxBodyBytes
		}
	}
	return maxBodyBytes
}

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
	// Suppressed counts addresses the request put on the tenant's suppression
	// list (a hard bounce, a drop, a spam report, an unsubscribe, an SMS STOP);
	// Unsuppressed those it took off (an SMS START). An address already
	// listed (or not listed) counts in neither.
	Suppressed   int `json:"suppressed"`
	Unsuppressed int `json:"unsuppressed"`
}

// bodyPool holds webhook body buffers: a forged 2 MiB body is read into a
// reused buffer rather than a fresh one that io.ReadAll grows several times.
var bodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBody: a buffer that grew well past the largest webhook body is
// dropped (a buffer sized for one rounds up to its allocation size class).
const maxPooledBody = 4 << 20

// readRawBody reads the whole body, at most limit bytes, exactly as received (the
// signatures are over these bytes), into a pooled buffer: the bytes are valid
// until release is called. A Content-Length over limit is refused unread.
func readRawBody(c *gin.Context, limit int64) (raw []byte, release func(), err error) {
	tooBig := &httpError{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large",
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
		return nil, nil, &httpError{Status: http.StatusBadRequest, Code: "unreadable_body", Message: "could not read request body"}
	}
	return buf.Bytes(), release, nil
}

// webhook receives one provider's webhook: the provider's Receive verifies the
// request with the config of the tenant it names and returns the receipts,
// which are applied here.
func (h *providersRoom) webhook(provider string) gin.HandlerFunc {
	return h.receiveWebhook(provider, func(d providers.Definition) *providers.Webhook { return d.Webhook }, writeWebhookResult)
}

// inboundWebhook receives the messages a provider's recipients send back
// (providers.Definition.Inbound: Twilio's incoming SMS): their opt-outs and
// opt-ins change the suppression list. Twilio reads the answer as TwiML: an
// empty <Response/> sends no reply (Twilio's own opt-out handling answers a
// STOP).
func (h *providersRoom) inboundWebhook(provider string) gin.HandlerFunc {
	return h.receiveWebhook(provider, func(d providers.Definition) *providers.Webhook { return d.Inbound },
		func(c *gin.Context, _ webhookResult) {
			c.Data(http.StatusOK, "text/xml; charset=utf-8", []byte(emptyTwiML))
		})
}

// emptyTwiML is a TwiML answer that does nothing.
const emptyTwiML = `<?xml version="1.0" encoding="UTF-8"?><Response></Response>`

func writeWebhookResult(c *gin.Context, res webhookResult) { c.JSON(http.StatusOK, res) }

// receiveWebhook is a provider webhook's handler: which selects the webhook of
// the provider's definition, answer writes the 200.
func (h *providersRoom) receiveWebhook(provider string, which func(providers.Definition) *providers.Webhook,
	answer func(*gin.Context, webhookResult)) gin.HandlerFunc {
	return func(c *gin.Context) {
		if !h.haveProviders(c) {
			return
		}
		def, ok := h.cfg.Registry.Get(provider)
		if !ok || which(def) == nil {
			h.abort(c, notFound("route"))
			return
		}
		wh := which(def)
		if wh.Precheck != nil {
			if err := wh.Precheck(c.Request, h.cfg.WebhookTolerance); err != nil {
				h.abort(c, webhookError(err))
				return
			}
		}
		raw, release, err := readRawBody(c, wh.MaxBodyBytes)
		if err != nil {
			h.abort(c, err)
			return
		}
		defer release()
		config := func(ctx context.Context, tenantID string) (providers.ProviderConfig, error) {
			pc, err := h.cfg.Store.GetProviderConfig(ctx, tenantID, wh.Channel, provider)
			if errors.Is(err, herald.ErrNotFound) {
				return providers.ProviderConfig{}, nil
			}
			return pc, err
		}
		ctx := c.Request.Context()
		batch, err := wh.Receive(ctx, providers.WebhookRequest{HTTP: c.Request, Body: raw,
			PublicBaseURL: h.publicBaseURL(c), Tolerance: h.cfg.WebhookTolerance}, config)
		if err != nil {
			h.abort(c, webhookError(err))
			return
		}
		if batch.TenantID == "" { // names nothing Herald sent
			n := len(batch.Receipts) + batch.Untracked
			answer(c, webhookResult{Received: n, Ignored: n})
			return
		}
		res, err := h.applyReceipts(ctx, batch.TenantID, wh.Channel, batch.Receipts)
		if err != nil {
			h.abort(c, err)
			return
		}
		if res.Suppressed, res.Unsuppressed, err = h.applyAddressEvents(ctx, batch.TenantID, batch.Addresses); err != nil {
			h.abort(c, err)
			return
		}
		res.Received += batch.Untracked
		res.Ignored += batch.Untracked
		answer(c, res)
	}
}

// applyAddressEvents applies a verified request's address events to the
// tenant's suppression list, in order; events naming another tenant are
// ignored. A removal (an SMS START) takes off only an entry of the same reason
// (a STOP): a bounce, a complaint or the tenant's own entry stays. Each step
// is idempotent, so the provider's retry of the request changes nothing more.
func (h *providersRoom) applyAddressEvents(ctx context.Context, tenantID string, events []providers.AddressEvent) (added, removed int, err error) {
	for _, e := range providers.FilterAddressTenant(events, tenantID) {
		if e.Suppress {
			_, isNew, err := h.store.AddSuppression(ctx, tenantID, store.Suppression{Address: e.Address, Reason: e.Reason,
				Source: herald.SuppressionSource(e.Provider), Detail: e.Detail})
			if err != nil {
				return added, removed, err
			}
			if isNew {
				added++
			}
			continue
		}
		gone, err := h.store.RemoveSuppressionOf(ctx, tenantID, e.Address, e.Reason)
		if err != nil {
			return added, removed, err
		}
		if gone {
			removed++
		}
	}
	return added, removed, nil
}

// webhookError maps a provider's refusal to its answer: 401 for a signature,
// 400 for a field; anything else is Herald's own error (500).
func webhookError(err error) error {
	var se *providers.SignatureError
	var fe *providers.FieldError
	switch {
	case errors.As(err, &se):
		return &httpError{Status: http.StatusUnauthorized, Code: "invalid_signature", Message: se.Message}
	case errors.As(err, &fe):
		return fieldError(fe)
	}
	return err
}

// publicBaseURL is how providers reach this API. Without a configured one it is
// the request's own scheme and host (correct only without a proxy in between).
func (h *providersRoom) publicBaseURL(c *gin.Context) string {
	if h.baseURL != "" {
		return h.baseURL
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
func (h *providersRoom) applyReceipts(ctx context.Context, tenantID string, channel herald.Channel, receipts []providers.Receipt) (webhookResult, error) {
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
				_, _, err := h.store.NotificationStatus(ctx, tenantID, r.NotificationID)
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
		recorded, err := h.cfg.Store.RecordReceipt(ctx, r)
		if err != nil {
			return res, err
		}
		if recorded {
			res.Recorded++
		}
		u := receiptUpdate(r)
		applied, err := h.store.UpdateDelivery(ctx, tenantID, r.NotificationID, r.Channel, u)
		if err != nil {
			return res, err
		}
		if applied {
			res.Applied++
			h.emitReceipt(ctx, tenantID, r, u)
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
		if _, err := h.store.RecomputeNotificationStatus(ctx, tenantID, id); err != nil && !errors.Is(err, herald.ErrNotFound) {
			return res, err
		}
	}
	return res, nil
}

// receiptUpdate is the delivery update a receipt makes: its status, provider
// and message id, and for a failure the provider's reason (else its status).
func receiptUpdate(r providers.Receipt) store.DeliveryUpdate {
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
		// The provider's words: its reason, else its status name.
		reason := herald.Reason(r.Reason)
		if reason == "" {
			reason = herald.Reason(r.ProviderStatus)
		}
		u.Reason = &reason
	}
	return u
}

// emitReceipt tells the tenant's status webhooks of a delivery a receipt moved
// (queued; best effort here: the provider's retry of this request would queue
// it again).
func (h *providersRoom) emitReceipt(ctx context.Context, tenantID string, r providers.Receipt, u store.DeliveryUpdate) {
	var reason herald.Reason
	if u.Reason != nil {
		reason = *u.Reason
	}
	if err := h.emitter.Emit(ctx, webhooks.Event{TenantID: tenantID, NotificationID: r.NotificationID,
		Channel: r.Channel, Status: u.Status, Provider: r.Provider, Reason: reason}); err != nil {
		h.log.Warn("queueing the webhook event of a receipt failed", "error", err)
	}
}
