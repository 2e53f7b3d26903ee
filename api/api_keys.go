package api

import (
	"errors"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
)

// API keys: GET /v1/api-keys, POST /v1/api-keys, DELETE /v1/api-keys/{api_key_id}.
//
// A key is shown once, in the answer to the POST that creates it; only its
// SHA-256 is stored, and no answer ever carries a key or its hash again. A
// revoked key is refused at once by the API process that revoked it and by
// every other one within the auth cache TTL (Config.AuthCacheTTL).
//
// Revocation never locks a tenant out: the tenant's last active key cannot be
// revoked through the API (409 last_active_key; create another key first). Any
// other key can, the one making the request included: rotating a leaked key is
// "create, switch, revoke", and revoking the key in hand is a valid last step.

// maxAPIKeyNameBytes bounds an API key's name.
const maxAPIKeyNameBytes = 100

type createAPIKeyRequest struct {
	Name *string `json:"name"`
}

// createdAPIKey is the one answer that carries the key.
type createdAPIKey struct {
	store.APIKey
	Key string `json:"key"`
}

func (h *accountRoom) listAPIKeys(c *gin.Context) {
	keys, err := h.store.ListAPIKeys(c.Request.Context(), tenantOf(c).ID)
	if err != nil {
		h.abort(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"items": keys})
}

func (h *accountRoom) createAPIKey(c *gin.Context) {
	var req createAPIKeyRequest
	if c.Request.ContentLength != 0 { // no body at all is an unnamed key
		if err := decodeJSON(c, &req); err != nil {
			h.abort(c, err)
			return
		}
	}
	name := ""
	if req.Name != nil {
		name = strings.TrimSpace(*req.Name)
		if err := validKeyName(name); err != nil {
			h.abort(c, err)
			return
		}
	}
	k, key, err := h.store.CreateNamedAPIKey(c.Request.Context(), tenantOf(c).ID, name)
	if err != nil {
		h.abort(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusCreated, createdAPIKey{APIKey: k, Key: key})
}

func validKeyName(name string) *httpError {
	if len(name) > maxAPIKeyNameBytes || !utf8.ValidString(name) {
		return badField("name", "invalid_field", "name must be at most %d bytes of UTF-8", maxAPIKeyNameBytes)
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return badField("name", "invalid_field", "name must not contain control characters")
		}
	}
	return nil
}

func (h *accountRoom) revokeAPIKey(c *gin.Context) {
	k, hash, err := h.store.RevokeAPIKey(c.Request.Context(), tenantOf(c).ID, c.Param("api_key_id"), false)
	switch {
	case errors.Is(err, herald.ErrNotFound):
		h.abort(c, notFound("API key"))
		return
	case errors.Is(err, store.ErrLastActiveKey):
		h.abort(c, &httpError{Status: http.StatusConflict, Code: "last_active_key",
			Message: "this is the tenant's last active API key; create another one before revoking it"})
		return
	case err != nil:
		h.abort(c, err)
		return
	}
	// This process refuses the key from now on; the others within AuthCacheTTL.
	h.auth.forgetKey(hash)
	c.JSON(http.StatusOK, k)
}
