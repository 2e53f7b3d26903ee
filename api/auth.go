package api

import (
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/golang-jwt/jwt/v5"
	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/metrics"
	"github.com/herald-notify/herald/internal/ratelimit"
	"github.com/herald-notify/herald/internal/store"
)

// authenticator resolves a request's credential to its tenant (and, for a user
// token, its user), with short-lived caches of what it looked up.
type authenticator struct {
	responder
	store   *store.Store
	metrics *metrics.Metrics
	// erasureKey keys store.ErasedUserID (an erased user's revocation).
	erasureKey []byte
	// tenants maps an API key hash (and "id:" + a tenant id) to the tenant;
	// nil when Config.AuthCacheTTL is 0.
	tenants *expirable.LRU[string, store.Tenant]
	// badKeys remembers API key hashes PostgreSQL did not know (a key is 256
	// random bits: one refused never becomes valid), so repeating a bad key
	// costs no round trip.
	badKeys *expirable.LRU[string, struct{}]
	// failures limits, per source address, the lookups of keys that turn out
	// bad (LimitConfig.AuthFailures): a source inventing keys costs at most its
	// bucket's round trips, then 429 with none.
	failures *publicLimiter
	// tokenKey signs and verifies user tokens (empty: user tokens off).
	tokenKey []byte
	// revocations caches the users' token revocation instants
	// (revocationCacheTTL).
	revocations *expirable.LRU[string, time.Time]
}

// badKeyTTL is how long a refused API key is remembered (any length is safe;
// this bounds the memory an old entry holds).
const badKeyTTL = 10 * time.Minute

// DefaultAuthFailures is LimitConfig.AuthFailures when zero: well above a
// misconfigured client retrying, far below a key scan.
var DefaultAuthFailures = Rate{PerSecond: 10, Burst: 50}

func newAuthenticator(r responder, st *store.Store, m *metrics.Metrics, cacheTTL time.Duration, tokenKey []byte, failures Rate) *authenticator {
	if failures.PerSecond == 0 {
		failures = DefaultAuthFailures
	}
	a := &authenticator{responder: r, store: st, metrics: m, tokenKey: tokenKey, erasureKey: store.ErasureKeyFrom(tokenKey),
		badKeys:     expirable.NewLRU[string, struct{}](100_000, nil, badKeyTTL),
		failures:    newPublicLimiter(PublicLimits{PerIP: failures}),
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
	preferencesLinkRoute:                                true,
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
	t, ok := a.tenantByAPIKey(c, key)
	if !ok {
		return
	}
	c.Set(tenantKey, t)
	c.Set(apiKeyKey, key)
}

// apiKeyKey holds the request's API key (a stream re-checks it at every heartbeat).
const apiKeyKey = "herald.api_key"

// tenantByAPIKey resolves an API key: from the cache, or from PostgreSQL unless
// the key was refused before or its source is over its bad-key budget. It
// answers the refusal itself (401, 429) and reports false.
func (a *authenticator) tenantByAPIKey(c *gin.Context, key string) (store.Tenant, bool) {
	cacheKey := hex.EncodeToString(store.HashAPIKey(key))
	if a.tenants != nil {
		if t, ok := a.tenants.Get(cacheKey); ok {
			return t, true
		}
	}
	invalid := func() {
		c.Header("WWW-Authenticate", `Bearer realm="herald", error="invalid_token"`)
		a.abort(c, &httpError{Status: http.StatusUnauthorized, Code: "invalid_api_key", Message: "the API key is not valid", Field: "Authorization"})
	}
	if _, bad := a.badKeys.Get(cacheKey); bad {
		invalid()
		return store.Tenant{}, false
	}
	source := "ip " + c.RemoteIP()
	if over, retry := a.failures.empty(source, a.failures.limits.PerIP, time.Now()); over {
		c.Header("Retry-After", strconv.Itoa(ratelimit.RetryAfterSeconds(retry)))
		a.abort(c, &httpError{Status: http.StatusTooManyRequests, Code: "rate_limited",
			Message: "too many invalid API keys from this address; retry after the Retry-After seconds"})
		return store.Tenant{}, false
	}
	t, err := a.store.TenantByAPIKey(c.Request.Context(), key)
	if errors.Is(err, herald.ErrNotFound) {
		a.metrics.AuthLookup(metrics.AuthLookupNotFound)
		a.badKeys.Add(cacheKey, struct{}{})
		a.failures.take(source, 1, a.failures.limits.PerIP, time.Now())
		invalid()
		return store.Tenant{}, false
	}
	if err != nil {
		a.abort(c, err)
		return store.Tenant{}, false
	}
	a.metrics.AuthLookup(metrics.AuthLookupFound)
	if a.tenants != nil {
		a.tenants.Add(cacheKey, t)
	}
	return t, true
}

// apiKeyRevoked reports whether the request's API key has been revoked since it
// was checked (a stream opened with it asks at every heartbeat): at once on the
// process that revoked it, within the auth cache's TTL on the others.
func (a *authenticator) apiKeyRevoked(c *gin.Context) bool {
	key, ok := c.Get(apiKeyKey)
	if !ok {
		return false
	}
	cacheKey := hex.EncodeToString(store.HashAPIKey(key.(string)))
	if a.tenants != nil {
		if _, ok := a.tenants.Get(cacheKey); ok {
			return false
		}
	}
	t, err := a.store.TenantByAPIKey(c.Request.Context(), key.(string))
	if errors.Is(err, herald.ErrNotFound) {
		return true
	}
	if err == nil && a.tenants != nil {
		a.tenants.Add(cacheKey, t)
	}
	return false
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

// revoked reports whether the request's credential, a user token or an API
// key, has been revoked since it was checked (a stream asks at every heartbeat).
func (a *authenticator) revoked(c *gin.Context, tenantID, userID string) bool {
	return a.apiKeyRevoked(c) || a.tokenRevoked(c, tenantID, userID)
}

// tokenRevoked reports whether the request's user token has been revoked since
// it was checked.
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
	// A token minted before the user's erasure stays refused: the erasure
	// records its revocation under the anonymous id.
	at, err := a.store.UserTokensNotBefore(c.Request.Context(), tenantID, userID, store.ErasedUserID(a.erasureKey, tenantID, userID))
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
