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
	"github.com/herald-notify/herald/internal/store"
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
	DefaultUserTokenTTL = time.Hour
	MinUserTokenTTL     = time.Minute
	MaxUserTokenTTL     = 24 * time.Hour
)

const (
	userTokenIssuer   = "herald"
	userTokenAudience = "herald-inbox"
	userKey           = "herald.user_token_subject"
)

// UserClaims are a user token's claims.
type UserClaims struct {
	TenantID string `json:"tid"`
	jwt.RegisteredClaims
}

// MintUserToken signs a token for one user, valid from now for ttl.
func MintUserToken(key []byte, tenantID, userID string, now time.Time, ttl time.Duration) (string, time.Time, error) {
	exp := now.Add(ttl).Truncate(time.Second)
	claims := UserClaims{TenantID: tenantID, RegisteredClaims: jwt.RegisteredClaims{
		Issuer: userTokenIssuer, Subject: userID, Audience: jwt.ClaimStrings{userTokenAudience},
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now.Add(-time.Minute)), ExpiresAt: jwt.NewNumericDate(exp),
	}}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(key)
	return tok, exp, err
}

// parseUserToken verifies a token: signature (HS256 only), issuer, audience,
// expiry (required) and the presence of a tenant and a user.
func parseUserToken(key []byte, raw string) (*UserClaims, error) {
	var claims UserClaims
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
func (s *Server) authenticateUserToken(c *gin.Context, raw string) {
	if len(s.cfg.UserTokenKey) == 0 {
		s.abortInvalidToken(c, "user tokens are not enabled on this server")
		return
	}
	claims, err := parseUserToken(s.cfg.UserTokenKey, raw)
	if err != nil {
		msg := "the user token is not valid"
		if errors.Is(err, jwt.ErrTokenExpired) {
			msg = "the user token has expired; get a new one"
		}
		s.abortInvalidToken(c, msg)
		return
	}
	if !userTokenRoutes[c.FullPath()] {
		// 401, not 403: every endpoint already documents its 401, and the answer is
		// the same whatever the endpoint (the token is not a credential for it).
		c.Header("WWW-Authenticate", `Bearer realm="herald", error="insufficient_scope"`)
		s.abort(c, &Error{Status: http.StatusUnauthorized, Code: "user_token_not_allowed", Field: "Authorization",
			Message: "a user token opens only that user's inbox; call this endpoint with the tenant's API key"})
		return
	}
	t, err := s.tenantByID(c, claims.TenantID)
	if errors.Is(err, herald.ErrNotFound) {
		s.abortInvalidToken(c, "the user token is not valid")
		return
	}
	if err != nil {
		s.abort(c, err)
		return
	}
	c.Set(tenantKey, t)
	c.Set(userKey, claims.Subject)
	c.Set(userTokenExpiryKey, claims.ExpiresAt.Time)
}

const userTokenExpiryKey = "herald.user_token_expiry"

func (s *Server) abortInvalidToken(c *gin.Context, msg string) {
	c.Header("WWW-Authenticate", `Bearer realm="herald", error="invalid_token"`)
	s.abort(c, &Error{Status: http.StatusUnauthorized, Code: "invalid_user_token", Message: msg, Field: "Authorization"})
}

// tokenUser is the user a user token names ("" for the tenant's API key).
func tokenUser(c *gin.Context) (string, bool) {
	v, ok := c.Get(userKey)
	if !ok {
		return "", false
	}
	return v.(string), true
}

func (s *Server) tenantByID(c *gin.Context, id string) (store.Tenant, error) {
	cacheKey := "id:" + id
	if s.tenants != nil {
		if t, ok := s.tenants.Get(cacheKey); ok {
			return t, nil
		}
	}
	t, err := s.store.TenantByID(c.Request.Context(), id)
	if err == nil && s.tenants != nil {
		s.tenants.Add(cacheKey, t)
	}
	return t, err
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
func (s *Server) mintUserToken(c *gin.Context) {
	tenantID, userID, ok := s.knownUser(c)
	if !ok {
		return
	}
	ttl := DefaultUserTokenTTL
	if c.Request.ContentLength != 0 {
		var req mintTokenRequest
		if err := decodeJSON(c, &req); err != nil {
			s.abort(c, err)
			return
		}
		if req.TTLSeconds != nil {
			ttl = time.Duration(*req.TTLSeconds) * time.Second
			if *req.TTLSeconds < int64(MinUserTokenTTL/time.Second) || *req.TTLSeconds > int64(MaxUserTokenTTL/time.Second) {
				s.abort(c, badField("ttl_seconds", "invalid_field", "ttl_seconds must be from %d to %d",
					int(MinUserTokenTTL/time.Second), int(MaxUserTokenTTL/time.Second)))
				return
			}
		}
	}
	s.answerToken(c, tenantID, userID, ttl)
}

func (s *Server) answerToken(c *gin.Context, tenantID, userID string, ttl time.Duration) {
	if len(s.cfg.UserTokenKey) == 0 {
		s.abort(c, &Error{Status: http.StatusNotImplemented, Code: "user_tokens_disabled", Message: "user tokens are not enabled on this server"})
		return
	}
	tok, exp, err := MintUserToken(s.cfg.UserTokenKey, tenantID, userID, time.Now(), ttl)
	if err != nil {
		s.abort(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusCreated, userTokenResponse{Token: tok, TokenType: "Bearer", UserID: userID, ExpiresAt: exp.UTC()})
}

// UserHash is what the tenant computes for a user with its inbox secret:
// hex(HMAC-SHA256(secret, user_id)).
func UserHash(secret []byte, userID string) string {
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
// token, valid DefaultUserTokenTTL. Every refusal of the hash looks the same.
func (s *Server) inboxSession(c *gin.Context) {
	var req sessionRequest
	if err := decodeJSON(c, &req); err != nil {
		s.abort(c, err)
		return
	}
	for _, f := range []struct {
		name string
		v    *string
	}{{"tenant_id", req.TenantID}, {"user_id", req.UserID}, {"user_hash", req.UserHash}} {
		if f.v == nil {
			s.abort(c, badField(f.name, "missing_field", "%s is required", f.name))
			return
		}
		if err := validID(f.name, *f.v); err != nil {
			s.abort(c, err)
			return
		}
	}
	refuse := func() {
		s.abort(c, &Error{Status: http.StatusUnauthorized, Code: "invalid_user_hash", Field: "user_hash",
			Message: "user_hash is not hex(HMAC-SHA256(inbox secret, user_id)) for this tenant"})
	}
	t, err := s.tenantByID(c, *req.TenantID)
	if errors.Is(err, herald.ErrNotFound) {
		refuse()
		return
	}
	if err != nil {
		s.abort(c, err)
		return
	}
	st, err := s.store.GetInboxSettings(c.Request.Context(), t.ID)
	if err != nil {
		s.abort(c, err)
		return
	}
	if !s.corsAllowed(c, t.ID, st.AllowedOrigins) {
		return
	}
	if st.HMACSecret == nil || s.cfg.InboxSecrets == nil {
		refuse()
		return
	}
	secret, err := s.cfg.InboxSecrets.Open(st.HMACSecret, []byte("inbox-secret/"+t.ID))
	if err != nil {
		s.abort(c, err)
		return
	}
	want := UserHash(secret, *req.UserID)
	if !hmac.Equal([]byte(want), []byte(strings.ToLower(*req.UserHash))) {
		refuse()
		return
	}
	c.Set(tenantKey, t)
	c.Params = append(c.Params, gin.Param{Key: "user_id", Value: *req.UserID})
	tenantID, userID, ok := s.knownUser(c)
	if !ok {
		return
	}
	s.answerToken(c, tenantID, userID, DefaultUserTokenTTL)
}

// rotateInboxSecret is POST /v1/inbox/secret: a new inbox secret, shown once;
// hashes made with the old one stop working at once (tokens already minted
// from them live out their TTL).
func (s *Server) rotateInboxSecret(c *gin.Context) {
	if s.cfg.InboxSecrets == nil {
		s.abort(c, &Error{Status: http.StatusNotImplemented, Code: "user_tokens_disabled", Message: "inbox secrets are not enabled on this server"})
		return
	}
	tenantID := tenantOf(c).ID
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		s.abort(c, err)
		return
	}
	secret := base64.RawURLEncoding.EncodeToString(raw)
	sealed, err := s.cfg.InboxSecrets.Seal([]byte(secret), []byte("inbox-secret/"+tenantID))
	if err != nil {
		s.abort(c, err)
		return
	}
	if err := s.store.PutInboxHMACSecret(c.Request.Context(), tenantID, sealed); err != nil {
		s.abort(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusCreated, gin.H{"secret": secret})
}
