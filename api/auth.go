package api

import (
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/golang-jwt/jwt/v5"
	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
)

// authenticator resolves a request's credential to its tenant (and, for a user
// token, its user), with short-lived caches of what it looked up.
type authenticator struct {
	responder
	store *store.Store
	// tenants maps an API key hash (and "id:" + a tenant id) to the tenant;
	// nil when Config.AuthCacheTTL is 0.
	tenants *expirable.LRU[string, store.Tenant]
	// tokenKey signs and verifies user tokens (empty: user tokens off).
	tokenKey []byte
	// revocations caches the users' token revocation instants
	// (revocationCacheTTL).
	revocations *expirable.LRU[string, time.Time]
}

func newAuthenticator(r responder, st *store.Store, cacheTTL time.Duration, tokenKey []byte) *authenticator {
	a := &authenticator{responder: r, store: st, tokenKey: tokenKey,
		revocations: expirable.NewLRU[string, time.Time](100_000, nil, revocationCacheTTL)}
	if cacheTTL > 0 {
		a.tenants = expirable.NewLRU[string, store.Tenant](10_000, nil, cacheTTL)
	}
	return a
}

// forgetKey makes this process refuse a revoked API key (by its hash) at once.
func (a *authenticator) forgetKey(hash []byte) {
	if a.tenants != nil {
		a.tenants.Remove(hex.EncodeToString(hash))
	}
}

// forgetRevocations makes this process see a user's new token revocation at once.
func (a *authenticator) forgetRevocations(tenantID, userID string) {
	a.revocations.Remove(tenantID + "/" + userID)
}

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
func (a *authenticator) authenticate(c *gin.Context) {
	h := c.GetHeader("Authorization")
	if h == "" && c.FullPath() == inboxStreamRoute {
		// EventSource cannot send headers: the stream takes the user token
		// from ?access_token= too.
		if tok := c.Query("access_token"); tok != "" {
			a.authenticateUserToken(c, tok)
			return
		}
	}
	scheme, key, ok := strings.Cut(h, " ")
	if h == "" || !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(key) == "" {
		c.Header("WWW-Authenticate", `Bearer realm="herald"`)
		a.abort(c, &httpError{Status: http.StatusUnauthorized, Code: "missing_api_key",
			Message: "send your API key as 'Authorization: Bearer <key>'", Field: "Authorization"})
		return
	}
	key = strings.TrimSpace(key)
	if looksLikeJWT(key) {
		a.authenticateUserToken(c, key)
		return
	}
	cacheKey := hex.EncodeToString(store.HashAPIKey(key))
	if a.tenants != nil {
		if t, ok := a.tenants.Get(cacheKey); ok {
			c.Set(tenantKey, t)
			return
		}
	}
	t, err := a.store.TenantByAPIKey(c.Request.Context(), key)
	if errors.Is(err, herald.ErrNotFound) {
		c.Header("WWW-Authenticate", `Bearer realm="herald", error="invalid_token"`)
		a.abort(c, &httpError{Status: http.StatusUnauthorized, Code: "invalid_api_key", Message: "the API key is not valid", Field: "Authorization"})
		return
	}
	if err != nil {
		a.abort(c, err)
		return
	}
	if a.tenants != nil {
		a.tenants.Add(cacheKey, t)
	}
	c.Set(tenantKey, t)
}

func tenantOf(c *gin.Context) store.Tenant {
	return c.MustGet(tenantKey).(store.Tenant)
}

// parseUserToken verifies a token: signature (HS256 only), issuer, audience,
// expiry (required) and the presence of a tenant and a user.
func parseUserToken(key []byte, raw string) (*userClaims, error) {
	var claims userClaims
	_, err := jwt.ParseWithClaims(raw, &claims, func(*jwt.Token) (any, error) { return key, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}), jwt.WithIssuer(userTokenIssuer),
		jwt.WithAudience(userTokenAudience), jwt.WithExpirationRequired(), jwt.WithIssuedAt())
	if err != nil {
		return nil, err
	}
	if claims.TenantID == "" || claims.Subject == "" {
		return nil, errors.New("token names no tenant or user")
	}
	return &claims, nil
}

// looksLikeJWT tells a user token from an API key (keys start with hk_).
func looksLikeJWT(s string) bool {
	return !strings.HasPrefix(s, store.APIKeyPrefix) && strings.Count(s, ".") == 2
}

// authenticateUserToken resolves a user token to its tenant and user, or
// answers 401 (a bad token, or a route a user token may not call).
func (a *authenticator) authenticateUserToken(c *gin.Context, raw string) {
	if len(a.tokenKey) == 0 {
		a.abortInvalidToken(c, "user tokens are not enabled on this server")
		return
	}
	claims, err := parseUserToken(a.tokenKey, raw)
	if err != nil {
		msg := "the user token is not valid"
		if errors.Is(err, jwt.ErrTokenExpired) {
			msg = "the user token has expired; get a new one"
		}
		a.abortInvalidToken(c, msg)
		return
	}
	if !userTokenRoutes[c.FullPath()] {
		// 401, not 403: every endpoint already documents its 401, and the answer is
		// the same whatever the endpoint (the token is not a credential for it).
		c.Header("WWW-Authenticate", `Bearer realm="herald", error="insufficient_scope"`)
		a.abort(c, &httpError{Status: http.StatusUnauthorized, Code: "user_token_not_allowed", Field: "Authorization",
			Message: "a user token opens only that user's inbox; call this endpoint with the tenant's API key"})
		return
	}
	t, err := a.tenantByID(c, claims.TenantID)
	if errors.Is(err, herald.ErrNotFound) {
		a.abortInvalidToken(c, "the user token is not valid")
		return
	}
	if err != nil {
		a.abort(c, err)
		return
	}
	notBefore, err := a.userTokensNotBefore(c, t.ID, claims.Subject)
	if err != nil {
		a.abort(c, err)
		return
	}
	if !notBefore.IsZero() && claims.IssuedAtMs <= notBefore.UnixMilli() {
		a.abortInvalidToken(c, "the user token was revoked; get a new one")
		return
	}
	c.Set(tenantKey, t)
	c.Set(userKey, claims.Subject)
	c.Set(userTokenExpiryKey, claims.ExpiresAt.Time)
	c.Set(userTokenIssuedKey, claims.IssuedAtMs)
}

const userTokenIssuedKey = "herald.user_token_issued_ms"

// tokenRevoked reports whether the request's user token has been revoked since
// it was checked (the stream asks at every heartbeat).
func (a *authenticator) tokenRevoked(c *gin.Context, tenantID, userID string) bool {
	issued, ok := c.Get(userTokenIssuedKey)
	if !ok {
		return false
	}
	nb, err := a.userTokensNotBefore(c, tenantID, userID)
	return err == nil && !nb.IsZero() && issued.(int64) <= nb.UnixMilli()
}

// userTokensNotBefore is the user's token revocation instant, cached a few
// seconds (the process that revokes evicts at once; others within
// revocationCacheTTL).
func (a *authenticator) userTokensNotBefore(c *gin.Context, tenantID, userID string) (time.Time, error) {
	key := tenantID + "/" + userID
	if at, ok := a.revocations.Get(key); ok {
		return at, nil
	}
	at, err := a.store.UserTokensNotBefore(c.Request.Context(), tenantID, userID)
	if err == nil {
		a.revocations.Add(key, at)
	}
	return at, err
}

// revocationCacheTTL bounds how long another API process may still accept a
// user token revoked through this one.
const revocationCacheTTL = 5 * time.Second

const userTokenExpiryKey = "herald.user_token_expiry"

func (a *authenticator) abortInvalidToken(c *gin.Context, msg string) {
	c.Header("WWW-Authenticate", `Bearer realm="herald", error="invalid_token"`)
	a.abort(c, &httpError{Status: http.StatusUnauthorized, Code: "invalid_user_token", Message: msg, Field: "Authorization"})
}

// tokenUser is the user a user token names ("" for the tenant's API key).
func tokenUser(c *gin.Context) (string, bool) {
	v, ok := c.Get(userKey)
	if !ok {
		return "", false
	}
	return v.(string), true
}

func (a *authenticator) tenantByID(c *gin.Context, id string) (store.Tenant, error) {
	cacheKey := "id:" + id
	if a.tenants != nil {
		if t, ok := a.tenants.Get(cacheKey); ok {
			return t, nil
		}
	}
	t, err := a.store.TenantByID(c.Request.Context(), id)
	if err == nil && a.tenants != nil {
		a.tenants.Add(cacheKey, t)
	}
	return t, err
}
