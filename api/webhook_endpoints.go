package api

import (
	"errors"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/internal/egress"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/secrets"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/webhooks"
)

// Tenant status webhooks: /v1/webhook-endpoints.
//
// A tenant registers up to store.MaxWebhookEndpoints endpoints, each with a
// URL (validated, and refused when the egress policy would not let Herald
// reach it: no loopback, private or metadata address unless the operator
// allowed it in HERALD_EGRESS_ALLOW), an events filter (herald.EventTypes;
// empty: all) and a signing secret shown once, when it is created or rotated.
// After a rotation the previous secret keeps signing, beside the new one, for
// secretRotationGrace, so receivers can switch without dropping messages.

// WebhookConfig is what the webhook endpoints need.
type WebhookConfig struct {
	// Emitter wakes an endpoint's workflow after a replay (nil: replays wait
	// for the endpoint's next event).
	Emitter *webhooks.Emitter
	// Keys seal the endpoints' secrets.
	Keys *secrets.Keyring
	// Egress is the policy endpoint URLs are checked against, and the worker's
	// webhook client connects through (nil: egress.Default() on ports 80 and 443).
	Egress *egress.Policy
}

// webhookEndpointsRoom holds the tenants' status webhook endpoints.
type webhookEndpointsRoom struct {
	responder
	store *store.Store
	cfg   WebhookConfig
}

func (h *webhookEndpointsRoom) register(v1, public gin.IRouter, mw *middleware) {
	v1.POST("/webhook-endpoints", mw.audited(auditWebhookEndpointCreate, auditFields), h.createWebhookEndpoint)
	v1.GET("/webhook-endpoints", h.listWebhookEndpoints)
	v1.GET("/webhook-endpoints/:endpoint_id", h.getWebhookEndpoint)
	v1.PATCH("/webhook-endpoints/:endpoint_id", mw.audited(auditWebhookEndpointUpdate, auditFields), h.updateWebhookEndpoint)
	v1.DELETE("/webhook-endpoints/:endpoint_id", mw.audited(auditWebhookEndpointDelete, auditFields), h.deleteWebhookEndpoint)
	v1.POST("/webhook-endpoints/:endpoint_id/rotate-secret", mw.audited(auditWebhookSecretRotate, auditFields), h.rotateWebhookSecret)
	v1.GET("/webhook-endpoints/:endpoint_id/attempts", h.listWebhookAttempts)
	v1.POST("/webhook-endpoints/:endpoint_id/replay", mw.limitCost("tenant-redrive:", mw.limits.Cost.Redrive, "replays"),
		mw.audited(auditWebhookReplay, auditFields), h.replayWebhookMessages)
	v1.POST("/webhook-endpoints/:endpoint_id/messages/:message_id/replay", mw.limitCost("tenant-redrive:", mw.limits.Cost.Redrive, "replays"),
		mw.audited(auditWebhookReplay, auditFields), h.replayWebhookMessage)
}

// secretRotationGrace is how long a rotated-out secret still signs.
const secretRotationGrace = 24 * time.Hour

// maxWebhookDescriptionBytes bounds an endpoint's description.
const maxWebhookDescriptionBytes = 500

type webhookEndpointRequest struct {
	URL         *string   `json:"url"`
	Description *string   `json:"description"`
	Events      *[]string `json:"events"`
	Enabled     *bool     `json:"enabled"`
}

type webhookEndpointView struct {
	ID          string    `json:"id"`
	URL         string    `json:"url"`
	Description string    `json:"description"`
	Events      []string  `json:"events"`
	Enabled     bool      `json:"enabled"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	// PreviousSecretValidUntil: after a rotation, until when the previous
	// secret still signs too.
	PreviousSecretValidUntil *time.Time `json:"previous_secret_valid_until,omitempty"`
}

func endpointView(e store.WebhookEndpoint) webhookEndpointView {
	v := webhookEndpointView{ID: e.ID, URL: e.URL, Description: e.Description, Events: e.Events, Enabled: e.Enabled,
		CreatedAt: e.CreatedAt.UTC(), UpdatedAt: e.UpdatedAt.UTC()}
	if v.Events == nil {
		v.Events = []string{}
	}
	if e.PreviousUntil != nil && time.Now().Before(*e.PreviousUntil) {
		t := e.PreviousUntil.UTC()
		v.PreviousSecretValidUntil = &t
	}
	return v
}

// validateEndpoint checks the fields that are set.
func (h *webhookEndpointsRoom) validateEndpoint(c *gin.Context, req webhookEndpointRequest) *httpError {
	if req.Description != nil {
		if len(*req.Description) > maxWebhookDescriptionBytes || !utf8.ValidString(*req.Description) {
			return badField("description", "invalid_field", "description must be UTF-8 of at most %d bytes", maxWebhookDescriptionBytes)
		}
	}
	if req.Events != nil {
		seen := map[string]bool{}
		for i, ev := range *req.Events {
			field := "events[" + itoa(i) + "]"
			switch {
			case !contains(herald.EventTypes, ev):
				return badField(field, "unknown_event", "unknown event type %q; event types are %v", ev, herald.EventTypes)
			case seen[ev]:
				return badField(field, "duplicate_event", "event type %q is listed twice", ev)
			}
			seen[ev] = true
		}
	}
	if req.URL != nil {
		policy := h.cfg.Egress
		if policy == nil {
			policy = egress.Default().WithPorts(80, 443)
		}
		if err := webhooks.ValidateURL(c.Request.Context(), policy, *req.URL); err != nil {
			return &httpError{Status: http.StatusUnprocessableEntity, Code: "invalid_url", Field: "url", Message: err.Error()}
		}
	}
	return nil
}

func (h *webhookEndpointsRoom) createWebhookEndpoint(c *gin.Context) {
	var req webhookEndpointRequest
	if err := decodeJSON(c, &req); err != nil {
		h.abort(c, err)
		return
	}
	if req.URL == nil {
		h.abort(c, badField("url", "missing_field", "url is required"))
		return
	}
	if err := h.validateEndpoint(c, req); err != nil {
		h.abort(c, err)
		return
	}
	if h.cfg.Keys == nil {
		h.abort(c, errors.New("webhook endpoints need the secrets keyring"))
		return
	}
	tenantID := tenantOf(c).ID
	secret, err := webhooks.NewSecret()
	if err != nil {
		h.abort(c, err)
		return
	}
	e := store.WebhookEndpoint{TenantID: tenantID, ID: webhooks.NewEndpointID(), URL: *req.URL, Events: []string{}, Enabled: true}
	if req.Description != nil {
		e.Description = *req.Description
	}
	if req.Events != nil {
		e.Events = *req.Events
	}
	if req.Enabled != nil {
		e.Enabled = *req.Enabled
	}
	if e.SecretSealed, err = webhooks.Seal(h.cfg.Keys, tenantID, e.ID, secret); err != nil {
		h.abort(c, err)
		return
	}
	created, err := h.store.CreateWebhookEndpoint(c.Request.Context(), e)
	if errors.Is(err, herald.ErrNotFound) {
		h.abort(c, &httpError{Status: http.StatusConflict, Code: "limit_reached",
			Message: "a tenant has at most " + itoa(store.MaxWebhookEndpoints) + " webhook endpoints; delete one first"})
		return
	}
	if err != nil {
		h.abort(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusCreated, gin.H{"endpoint": endpointView(created), "secret": secret})
}

func (h *webhookEndpointsRoom) listWebhookEndpoints(c *gin.Context) {
	eps, err := h.store.ListWebhookEndpoints(c.Request.Context(), tenantOf(c).ID)
	if err != nil {
		h.abort(c, err)
		return
	}
	items := make([]webhookEndpointView, 0, len(eps))
	for _, e := range eps {
		items = append(items, endpointView(e))
	}
	c.JSON(http.StatusOK, gin.H{"items": items})
}

// endpointOf reads the endpoint named in the path, answering 404 for an id the
// tenant does not have.
func (h *webhookEndpointsRoom) endpointOf(c *gin.Context) (store.WebhookEndpoint, bool) {
	id := c.Param("endpoint_id")
	if !strings.HasPrefix(id, "we_") || len(id) > 64 {
		h.abort(c, notFound("webhook endpoint"))
		return store.WebhookEndpoint{}, false
	}
	e, err := h.store.GetWebhookEndpoint(c.Request.Context(), tenantOf(c).ID, id)
	if errors.Is(err, herald.ErrNotFound) {
		h.abort(c, notFound("webhook endpoint"))
		return e, false
	}
	if err != nil {
		h.abort(c, err)
		return e, false
	}
	return e, true
}

func (h *webhookEndpointsRoom) getWebhookEndpoint(c *gin.Context) {
	if e, ok := h.endpointOf(c); ok {
		c.JSON(http.StatusOK, endpointView(e))
	}
}

func (h *webhookEndpointsRoom) updateWebhookEndpoint(c *gin.Context) {
	var req webhookEndpointRequest
	if err := decodeJSON(c, &req); err != nil {
		h.abort(c, err)
		return
	}
	if err := h.validateEndpoint(c, req); err != nil {
		h.abort(c, err)
		return
	}
	e, ok := h.endpointOf(c)
	if !ok {
		return
	}
	updated, err := h.store.UpdateWebhookEndpoint(c.Request.Context(), e.TenantID, e.ID, store.WebhookEndpointUpdate{
		URL: req.URL, Description: req.Description, Events: req.Events, Enabled: req.Enabled})
	if err != nil {
		h.abort(c, err)
		return
	}
	if req.Enabled != nil && *req.Enabled {
		h.cfg.Emitter.Wake(c.Request.Context(), e.TenantID, e.ID)
	}
	c.JSON(http.StatusOK, endpointView(updated))
}

func (h *webhookEndpointsRoom) deleteWebhookEndpoint(c *gin.Context) {
	e, ok := h.endpointOf(c)
	if !ok {
		return
	}
	if err := h.store.DeleteWebhookEndpoint(c.Request.Context(), e.TenantID, e.ID); err != nil {
		h.abort(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (h *webhookEndpointsRoom) rotateWebhookSecret(c *gin.Context) {
	e, ok := h.endpointOf(c)
	if !ok {
		return
	}
	secret, err := webhooks.NewSecret()
	if err != nil {
		h.abort(c, err)
		return
	}
	sealed, err := webhooks.Seal(h.cfg.Keys, e.TenantID, e.ID, secret)
	if err != nil {
		h.abort(c, err)
		return
	}
	updated, err := h.store.UpdateWebhookEndpoint(c.Request.Context(), e.TenantID, e.ID, store.WebhookEndpointUpdate{
		SecretSealed: sealed, PreviousUntil: time.Now().Add(secretRotationGrace)})
	if err != nil {
		h.abort(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, gin.H{"endpoint": endpointView(updated), "secret": secret})
}

// listWebhookAttempts lists every delivery attempt of the endpoint, newest
// first; ?status=dead_lettered narrows to messages whose retries ran out.
func (h *webhookEndpointsRoom) listWebhookAttempts(c *gin.Context) {
	e, ok := h.endpointOf(c)
	if !ok {
		return
	}
	limit, lerr := pageLimit(c)
	if lerr != nil {
		h.abort(c, lerr)
		return
	}
	status := c.Query("status")
	switch status {
	case "", store.WebhookPending, store.WebhookDelivered, store.WebhookDeadLettered:
	default:
		h.abort(c, badField("status", "invalid_field", "status must be pending, delivered or dead_lettered"))
		return
	}
	cur, _, cerr := readPageCursor(c, "webhook-attempts")
	if cerr != nil {
		h.abort(c, cerr)
		return
	}
	items, err := h.store.ListWebhookAttempts(c.Request.Context(), store.ListWebhookAttemptsParams{
		TenantID: e.TenantID, EndpointID: e.ID, Status: status, BeforeID: cur.ID, Limit: limit + 1,
	})
	if err != nil {
		h.abort(c, err)
		return
	}
	items, next := onePage(items, limit, func(last store.WebhookAttempt) pageCursor {
		return pageCursor{List: "webhook-attempts", ID: last.ID}
	})
	c.JSON(http.StatusOK, gin.H{"items": items, "next_cursor": next})
}

// replayWebhookMessage queues one delivered or dead-lettered message again.
func (h *webhookEndpointsRoom) replayWebhookMessage(c *gin.Context) {
	e, ok := h.endpointOf(c)
	if !ok {
		return
	}
	msgID := c.Param("message_id")
	exists, err := h.store.WebhookMessageExists(c.Request.Context(), e.TenantID, e.ID, msgID)
	if err != nil {
		h.abort(c, err)
		return
	}
	if !exists {
		h.abort(c, notFound("webhook message"))
		return
	}
	n, err := h.store.ReplayWebhookMessages(c.Request.Context(), store.ReplayWebhookMessagesParams{
		TenantID: e.TenantID, EndpointID: e.ID, MsgID: msgID,
	})
	h.replayed(c, e, n, err)
}

type replayRequest struct {
	Since *string `json:"since"`
	Until *string `json:"until"`
}

// maxReplayRange bounds a replay by time range.
const maxReplayRange = 7 * 24 * time.Hour

// replayWebhookMessages queues again every message of the endpoint created in
// [since, until) that is not pending (delivered or dead-lettered).
func (h *webhookEndpointsRoom) replayWebhookMessages(c *gin.Context) {
	var req replayRequest
	if err := decodeJSON(c, &req); err != nil {
		h.abort(c, err)
		return
	}
	parse := func(field string, v *string) (time.Time, *httpError) {
		if v == nil {
			return time.Time{}, badField(field, "missing_field", "%s is required", field)
		}
		t, err := time.Parse(time.RFC3339, *v)
		if err != nil {
			return t, badField(field, "invalid_field", "%s must be an RFC 3339 time", field)
		}
		return t, nil
	}
	since, perr := parse("since", req.Since)
	if perr != nil {
		h.abort(c, perr)
		return
	}
	until, perr := parse("until", req.Until)
	if perr != nil {
		h.abort(c, perr)
		return
	}
	if !until.After(since) || until.Sub(since) > maxReplayRange {
		h.abort(c, badField("until", "invalid_field", "until must be after since, at most 7 days later"))
		return
	}
	e, ok := h.endpointOf(c)
	if !ok {
		return
	}
	n, err := h.store.ReplayWebhookMessages(c.Request.Context(), store.ReplayWebhookMessagesParams{
		TenantID: e.TenantID, EndpointID: e.ID, Since: since, Until: until,
	})
	h.replayed(c, e, n, err)
}

func (h *webhookEndpointsRoom) replayed(c *gin.Context, e store.WebhookEndpoint, n int64, err error) {
	if err != nil {
		h.abort(c, err)
		return
	}
	if n > 0 {
		h.cfg.Emitter.Wake(c.Request.Context(), e.TenantID, e.ID)
	}
	c.JSON(http.StatusAccepted, gin.H{"replayed": n})
}
