package api

import (
	"encoding/hex"
	"errors"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
)

const tenantKey = "herald.tenant"

const inboxStreamRoute = "/v1/users/:user_id/inbox/stream"

// userTokenRoutes are the routes a user token opens (the user's inbox).
var userTokenRoutes = map[string]bool{
	"/v1/users/:user_id/inbox":                          true,
	"/v1/users/:user_id/inbox/counts":                   true,
	inboxStreamRoute:                                    true,
	"/v1/users/:user_id/inbox/read-all":                 true,
	"/v1/users/:user_id/inbox/seen-all":                 true,
	"/v1/users/:user_id/inbox/:notification_id/:action": true,
}

// authenticate resolves "Authorization: Bearer <key>" to a tenant.
func (s *Server) authenticate(c *gin.Context) {
	h := c.GetHeader("Authorization")
	if h == "" && c.FullPath() == inboxStreamRoute {
		// EventSource cannot send headers: the stream takes the user token
		// from ?access_token= too.
		if tok := c.Query("access_token"); tok != "" {
			s.authenticateUserToken(c, tok)
			return
		}
	}
	scheme, key, ok := strings.Cut(h, " ")
	if h == "" || !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(key) == "" {
		c.Header("WWW-Authenticate", `Bearer realm="herald"`)
		s.abort(c, &Error{Status: http.StatusUnauthorized, Code: "missing_api_key",
			Message: "send your API key as 'Authorization: Bearer <key>'", Field: "Authorization"})
		return
	}
	key = strings.TrimSpace(key)
	if looksLikeJWT(key) {
		s.authenticateUserToken(c, key)
		return
	}
	cacheKey := hex.EncodeToString(store.HashAPIKey(key))
	if s.tenants != nil {
		if t, ok := s.tenants.Get(cacheKey); ok {
			c.Set(tenantKey, t)
			return
		}
	}
	t, err := s.store.TenantByAPIKey(c.Request.Context(), key)
	if errors.Is(err, herald.ErrNotFound) {
		c.Header("WWW-Authenticate", `Bearer realm="herald", error="invalid_token"`)
		s.abort(c, &Error{Status: http.StatusUnauthorized, Code: "invalid_api_key", Message: "the API key is not valid", Field: "Authorization"})
		return
	}
	if err != nil {
		s.abort(c, err)
		return
	}
	if s.tenants != nil {
		s.tenants.Add(cacheKey, t)
	}
	c.Set(tenantKey, t)
}

func tenantOf(c *gin.Context) store.Tenant {
	return c.MustGet(tenantKey).(store.Tenant)
}
