package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/providers"
)

// sandboxMessageView is one message the sandbox provider recorded instead of
// sending it.
type sandboxMessageView struct {
	ID             int64           `json:"id"`
	NotificationID string          `json:"notification_id"`
	Channel        herald.Channel  `json:"channel"`
	IdempotencyKey string          `json:"idempotency_key"`
	Recipient      string          `json:"recipient"`
	Subject        string          `json:"subject"`
	Body           string          `json:"body"`
	Payload        json.RawMessage `json:"payload"`
	CreatedAt      time.Time       `json:"created_at"`
}

// sandboxOn answers 404, as for an unknown route and before authentication, when
// the server runs without the sandbox API (production).
func (h *providersRoom) sandboxOn(c *gin.Context) {
	if h.cfg.Sandbox == nil {
		h.abort(c, notFound("route"))
	}
}

// listSandboxMessages shows what the sandbox provider would have sent for the
// tenant, newest first (dev only: the route answers only when Config.Providers.Sandbox is
// set). limit is 1..500 (default 50). With notification_id, only that
// notification's messages among the tenant's newest 500 are listed.
func (h *providersRoom) listSandboxMessages(c *gin.Context) {
	if h.cfg.Sandbox == nil {
		h.abort(c, notFound("route"))
		return
	}
	limit := providers.SandboxDefaultLimit
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > providers.SandboxMaxLimit {
			h.abort(c, badField("limit", "invalid_field", "limit must be an integer from 1 to %d", providers.SandboxMaxLimit))
			return
		}
		limit = n
	}
	notificationID := c.Query("notification_id")
	fetch := limit
	if notificationID != "" {
		if _, _, err := ids.ParseNotificationID(notificationID); err != nil {
			h.abort(c, badField("notification_id", "invalid_field", "notification_id is not a Herald notification id"))
			return
		}
		fetch = providers.SandboxMaxLimit
	}
	msgs, err := h.cfg.Sandbox.List(c.Request.Context(), tenantOf(c).ID, fetch)
	if err != nil {
		h.abort(c, err)
		return
	}
	items := []sandboxMessageView{}
	for _, m := range msgs {
		if len(items) == limit {
			break
		}
		if notificationID != "" && m.NotificationID != notificationID {
			continue
		}
		payload := m.Payload
		if len(payload) == 0 || !json.Valid(payload) {
			payload = json.RawMessage(`{}`)
		}
		items = append(items, sandboxMessageView{ID: m.ID, NotificationID: m.NotificationID, Channel: m.Channel,
			IdempotencyKey: m.IdempotencyKey, Recipient: m.Recipient, Subject: m.Subject, Body: m.Body,
			Payload: payload, CreatedAt: m.CreatedAt.UTC()})
	}
	c.JSON(http.StatusOK, gin.H{"items": items})
}
