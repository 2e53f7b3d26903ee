package api

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/golang-jwt/jwt/v5"

	"github.com/herald-notify/herald/internal/herald"
)

// User tokens let a browser read one user's inbox without the tenant's API key.
//
// Two ways to get one, both ending in the same short-lived token:
//   - the tenant's backend calls POST /v1/users/{user_id}/token with its API key;
//   - the tenant's backend computes user_hash = hex(HMAC-SHA256(secret, user_id))
//     with its inbox secret (POST /v1/inbox/secret) and hands it to the browser,
//     which exchanges it at POST /v1/inbox/session (like Novu's subscriber hash:
//     no call to Herald from the tenant's backend per session).
//
// A token is a JWT (RFC 7519, github.com/golang-jwt/jwt/v5) signed HS256 with a
// key derived from HERALD_SECRETS_KEY, so every API replica verifies what any
// other minted. It names the tenant (tid), the user (sub), the audience
// herald-inbox and an expiry; it opens that user's inbox endpoints and nothing
// else (every other endpoint answers 401 user_token_not_allowed).

// User token lifetimes.
const (
	defaultUserTokenTTL = time.Hour
	minUserTokenTTL     = time.Minute
	MaxUserTokenTTL     = 24 * time.Hour
)

const (
	userTokenIssuer   = "herald"
	userTokenAudience = "herald-inbox"
	userKey           = "herald.user_token_subject"
)

// userClaims are a user token's claims.
type userClaims struct {
	TenantID string `json:"tid"`
	// IssuedAtMs is iat in milliseconds: a revocation (DELETE
	// /v1/users/{user_id}/tokens) refuses what was issued before it, and a
	// token minted just after it must not share its second.
	IssuedAtMs int64 `json:"iat_ms"`
	jwt.RegisteredClaims
}

// MintUserToken signs a token for one user, valid from now for ttl.
func MintUserToken(key []byte, tenantID, userID string, now time.Time, ttl time.Duration) (string, time.Time, error) {
	exp := now.Add(ttl).Truncate(time.Second)
	claims := userClaims{TenantID: tenantID, IssuedAtMs: now.UnixMilli(), RegisteredClaims: jwt.RegisteredClaims{
		Issuer: userTokenIssuer, Subject: userID, Audience: jwt.ClaimStrings{userTokenAudience},
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now.Add(-time.Minute)), ExpiresAt: jwt.NewNumericDate(exp),
	}}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(key)
	return tok, exp, err
}

// revokeUserTokens is DELETE /v1/users/{user_id}/tokens (tenant key): every
// user token of the user issued so far is refused, and the streams opened with
// one end at their next heartbeat.
func (h *inboxRoom) revokeUserTokens(c *gin.Context) {
	tenantID, userID, ok := h.users.knownUser(c)
	if !ok {
		return
	}
	if _, err := h.store.RevokeUserTokens(c.Request.Context(), tenantID, userID); err != nil {
		h.abort(c, err)
		return
	}
	h.auth.forgetRevocations(tenantID, userID)
	c.Status(http.StatusNoContent)
}

type mintTokenRequest struct {
	TTLSeconds *int64 `json:"ttl_seconds"`
}

type userTokenResponse struct {
	Token     string    `json:"token"`
	TokenType string    `json:"token_type"`
	UserID    string    `json:"user_id"`
	ExpiresAt time.Time `json:"expires_at"`
}

// mintUserToken is POST /v1/users/{user_id}/token (tenant key).
func (h *inboxRoom) mintUserToken(c *gin.Context) {
	tenantID, userID, ok := h.users.knownUser(c)
	if !ok {
		return
	}
	ttl := defaultUserTokenTTL
	if c.Request.ContentLength != 0 {
		var req mintTokenRequest
		if err := decodeJSON(c, &req); err != nil {
			h.abort(c, err)
			return
		}
		if req.TTLSeconds != nil {
			ttl = time.Duration(*req.TTLSeconds) * time.Second
			if *req.TTLSeconds < int64(minUserTokenTTL/time.Second) || *req.TTLSeconds > int64(MaxUserTokenTTL/time.Second) {
				h.abort(c, badField("ttl_seconds", "invalid_field", "ttl_seconds must be from %d to %d",
					int(minUserTokenTTL/time.Second), int(MaxUserTokenTTL/time.Second)))
				return
			}
		}
	}
	h.answerToken(c, tenantID, userID, ttl)
}

func (h *inboxRoom) answerToken(c *gin.Context, tenantID, userID string, ttl time.Duration) {
	if len(h.cfg.UserTokenKey) == 0 {
		h.abort(c, &httpError{Status: http.StatusNotImplemented, Code: "user_tokens_disabled", Message: "user tokens are not enabled on this server"})
		return
	}
	tok, exp, err := MintUserToken(h.cfg.UserTokenKey, tenantID, userID, time.Now(), ttl)
	if err != nil {
		h.abort(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusCreated, userTokenResponse{Token: tok, TokenType: "Bearer", UserID: userID, ExpiresAt: exp.UTC()})
}

// userHash is what the tenant computes for a user with its inbox secret:
// hex(HMAC-SHA256(secret, user_id)).
func userHash(secret []byte, userID string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(userID))
	return hex.EncodeToString(m.Sum(nil))
}

type sessionRequest struct {
	TenantID *string `json:"tenant_id"`
	UserID   *string `json:"user_id"`
	UserHash *string `json:"user_hash"`
}

// inboxSession is POST /v1/inbox/session (no API key): a user hash for a user
// token, valid defaultUserTokenTTL. Every refusal of the hash looks the same.
func (h *inboxRoom) inboxSession(c *gin.Context) {
	var req sessionRequest
	if err := decodeJSON(c, &req); err != nil {
		h.abort(c, err)
		return
	}
	for _, f := range []struct {
		name string
		v    *string
	}{{"tenant_id", req.TenantID}, {"user_id", req.UserID}, {"user_hash", req.UserHash}} {
		if f.v == nil {
			h.abort(c, badField(f.name, "missing_field", "%s is required", f.name))
			return
		}
		if err := validID(f.name, *f.v); err != nil {
			h.abort(c, err)
			return
		}
	}
	refuse := func() {
		h.abort(c, &httpError{Status: http.StatusUnauthorized, Code: "invalid_user_hash", Field: "user_hash",
			Message: "user_hash is not hex(HMAC-SHA256(inbox secret, user_id)) for this tenant"})
	}
	// Every refusal before the hash is proven is the same 401, whatever the
	// reason (no such tenant, no secret, a wrong hash); the tenant's CORS
	// check (403 origin_not_allowed) comes after, so it cannot tell a stranger
	// which tenants exist.
	t, err := h.auth.tenantByID(c, *req.TenantID)
	if errors.Is(err, herald.ErrNotFound) {
		refuse()
		return
	}
	if err != nil {
		h.abort(c, err)
		return
	}
	st, err := h.store.GetInboxSettings(c.Request.Context(), t.ID)
	if err != nil {
		h.abort(c, err)
		return
	}
	if st.HMACSecret == nil || h.cfg.Secrets == nil {
		refuse()
		return
	}
	secret, err := h.cfg.Secrets.Open(st.HMACSecret, []byte("inbox-secret/"+t.ID))
	if err != nil {
		h.abort(c, err)
		return
	}
	want := userHash(secret, *req.UserID)
	if !hmac.Equal([]byte(want), []byte(strings.ToLower(*req.UserHash))) {
		refuse()
		return
	}
	if !h.corsAllowed(c, t.ID, st.AllowedOrigins) {
		return
	}
	c.Set(tenantKey, t)
	c.Params = append(c.Params, gin.Param{Key: "user_id", Value: *req.UserID})
	tenantID, userID, ok := h.users.knownUser(c)
	if !ok {
		return
	}
	// A user hash never changes until the secret does: after DELETE
	// /v1/users/{user_id}/tokens it mints nothing until the secret is rotated
	// (the tenant's backend can still mint with its API key).
	notBefore, err := h.auth.userTokensNotBefore(c, tenantID, userID)
	if err != nil {
		h.abort(c, err)
		return
	}
	if !notBefore.IsZero() && (st.HMACRotatedAt == nil || !notBefore.Before(*st.HMACRotatedAt)) {
		h.abort(c, &httpError{Status: http.StatusUnauthorized, Code: "user_tokens_revoked", Field: "user_hash",
			Message: "this user's tokens were revoked after the inbox secret was made: a user_hash mints no session until the secret is rotated (POST /v1/inbox/secret); the backend can mint one with the API key (POST /v1/users/{user_id}/token)"})
		return
	}
	h.answerToken(c, tenantID, userID, defaultUserTokenTTL)
}

// rotateInboxSecret is POST /v1/inbox/secret: a new inbox secret, shown once;
// hashes made with the old one stop working at once (tokens already minted
// from them live out their TTL).
func (h *inboxRoom) rotateInboxSecret(c *gin.Context) {
	if h.cfg.Secrets == nil {
		h.abort(c, &httpError{Status: http.StatusNotImplemented, Code: "user_tokens_disabled", Message: "inbox secrets are not enabled on this server"})
		return
	}
	tenantID := tenantOf(c).ID
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		h.abort(c, err)
		return
	}
	secret := base64.RawURLEncoding.EncodeToString(raw)
	sealed, err := h.cfg.Secrets.Seal([]byte(secret), []byte("inbox-secret/"+tenantID))
	if err != nil {
		h.abort(c, err)
		return
	}
	if err := h.store.PutInboxHMACSecret(c.Request.Context(), tenantID, sealed); err != nil {
		h.abort(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusCreated, gin.H{"secret": secret})
}
