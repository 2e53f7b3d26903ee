package api

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/providers"
)

// maxPushTokenBytes bounds a device token (FCM registration tokens are ~160–200
// bytes; APNs tokens 64 hex digits; web push tokens are FCM tokens).
const maxPushTokenBytes = 4096

type putPushTokenRequest struct {
	Token    *string `json:"token"`
	Platform *string `json:"platform"`
}

// validPushToken: 1 to 4096 bytes of printable ASCII without spaces or '/', so a
// token is safe as the DELETE route's path segment.
func validPushToken(field, v string) *httpError {
	if v == "" {
		return badField(field, "missing_field", "%s is required", field)
	}
	if len(v) > maxPushTokenBytes {
		return badField(field, "invalid_field", "%s must be at most %d bytes", field, maxPushTokenBytes)
	}
	for i := 0; i < len(v); i++ {
		if b := v[i]; b <= ' ' || b >= 0x7f || b == '/' {
			return badField(field, "invalid_field", "%s must be printable ASCII without spaces or '/'", field)
		}
	}
	return nil
}

// putPushToken registers a device token for a user: 201 when the token is new for
// this user (first registration, or moved here from another user of the tenant:
// the device changed hands), 200 when it was already this user's (refreshes
// last_seen_at and the platform).
func (h *providersRoom) putPushToken(c *gin.Context) {
	if !h.haveProviders(c) {
		return
	}
	tenantID, userID, ok := h.users.knownUser(c)
	if !ok {
		return
	}
	var req putPushTokenRequest
	if err := decodeJSON(c, &req); err != nil {
		h.abort(c, err)
		return
	}
	token := ""
	if req.Token != nil {
		token = *req.Token
	}
	if err := validPushToken("token", token); err != nil {
		h.abort(c, err)
		return
	}
	if req.Platform == nil || *req.Platform == "" {
		h.abort(c, badField("platform", "missing_field", "platform is required (android, ios or web)"))
		return
	}
	switch *req.Platform {
	case providers.PlatformAndroid, providers.PlatformIOS, providers.PlatformWeb:
	default:
		h.abort(c, badField("platform", "invalid_field", "platform must be android, ios or web"))
		return
	}
	t, err := h.cfg.Store.PutPushToken(c.Request.Context(), providers.PushToken{
		TenantID: tenantID, UserID: userID, Token: token, Platform: *req.Platform,
	}, h.pushTokensPerUser)
	if err != nil {
		h.abort(c, err)
		return
	}
	// One statement sets both to now() for a new row or a moved token; a refresh
	// keeps created_at.
	status := http.StatusOK
	if t.CreatedAt.Equal(t.LastSeenAt) {
		status = http.StatusCreated
	}
	c.JSON(status, pushTokenView(t))
}

// listPushTokens pages a user's device tokens, oldest first (?limit=, ?cursor=;
// next_cursor is null on the last page). Tokens are returned in full: the caller
// holds the tenant's server-side API key (which can already send to every device)
// and needs the token to DELETE it.
func (h *providersRoom) listPushTokens(c *gin.Context) {
	if !h.haveProviders(c) {
		return
	}
	tenantID, userID, ok := h.users.knownUser(c)
	if !ok {
		return
	}
	var after *providers.PushTokenCursor
	limit, cur, paged, verr := pageRequest(c, "push-tokens")
	if verr != nil {
		h.abort(c, verr)
		return
	}
	if paged {
		after = &providers.PushTokenCursor{CreatedAt: time.UnixMicro(cur.At), Token: cur.Key}
	}
	tokens, err := h.cfg.Store.PushTokenPage(c.Request.Context(), tenantID, userID, after, limit+1)
	if err != nil {
		h.abort(c, err)
		return
	}
	tokens, next := onePage(tokens, limit, func(last providers.PushToken) pageCursor {
		return pageCursor{List: "push-tokens", At: last.CreatedAt.UnixMicro(), Key: last.Token}
	})
	items := make([]providers.PushToken, 0, len(tokens))
	for _, t := range tokens {
		items = append(items, pushTokenView(t))
	}
	c.JSON(http.StatusOK, gin.H{"items": items, "next_cursor": next})
}

// deletePushToken unregisters one of the user's tokens: 204, or 404 when the user
// does not have it.
func (h *providersRoom) deletePushToken(c *gin.Context) {
	if !h.haveProviders(c) {
		return
	}
	tenantID, userID, ok := h.users.knownUser(c)
	if !ok {
		return
	}
	token := c.Param("token")
	if err := validPushToken("token", token); err != nil {
		h.abort(c, err)
		return
	}
	deleted, err := h.cfg.Store.DeletePushToken(c.Request.Context(), tenantID, userID, token)
	if err != nil {
		h.abort(c, err)
		return
	}
	if !deleted {
		h.abort(c, notFound("push token"))
		return
	}
	c.Status(http.StatusNoContent)
}

func pushTokenView(t providers.PushToken) providers.PushToken {
	t.CreatedAt = t.CreatedAt.UTC()
	t.LastSeenAt = t.LastSeenAt.UTC()
	return t
}
