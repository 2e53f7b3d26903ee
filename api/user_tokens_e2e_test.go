package api_test

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/golang-jwt/jwt/v5"

	"github.com/herald-notify/herald/api"
	"github.com/herald-notify/herald/internal/apitest"
)

func TestUserTokenRefusals(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	tenantA, keyA, tokenAda := inboxUser(t, h, "ada")
	createUser(h, keyA, "bob")
	_, keyB := h.TenantWith("other", e2eTemplates...)
	createUser(h, keyB, "zed")
	tokenZed := h.UserToken(keyB, "zed")

	// The token opens ada's inbox.
	h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/ada/inbox", tokenAda, nil)
	h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/ada/inbox/counts", tokenAda, nil)

	// Another user's inbox of the same tenant: 404, as if bob did not exist.
	apitest.WantError(t, h.Do(http.MethodGet, "/v1/users/bob/inbox", tokenAda, nil), 404, "not_found", "")
	apitest.WantError(t, h.Do(http.MethodPost, "/v1/users/bob/inbox/read-all", tokenAda, nil), 404, "not_found", "")
	// Another tenant's user: the token names its tenant, where ada does not exist.
	apitest.WantError(t, h.Do(http.MethodGet, "/v1/users/ada/inbox", tokenZed, nil), 404, "not_found", "")

	key := h.UserTokenKey()
	sign := func(k any, claims jwt.Claims, method jwt.SigningMethod) string {
		tok, err := jwt.NewWithClaims(method, claims).SignedString(k)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	now := time.Now()
	claims := func(mod func(*api.UserClaims)) *api.UserClaims {
		c := &api.UserClaims{TenantID: tenantA, RegisteredClaims: jwt.RegisteredClaims{Issuer: "herald", Subject: "ada",
			Audience: jwt.ClaimStrings{"herald-inbox"}, IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour))}}
		mod(c)
		return c
	}
	expired, _, err := api.MintUserToken(key, tenantA, "ada", now.Add(-2*time.Hour), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(tokenAda, ".")
	for name, tok := range map[string]string{
		"expired":          expired,
		"forged signature": sign([]byte("not the key, not the key, not it"), claims(func(*api.UserClaims) {}), jwt.SigningMethodHS256),
		"tampered payload": parts[0] + "." + strings.TrimSuffix(parts[1], parts[1][len(parts[1])-2:]) + "x." + parts[2],
		"alg none":         sign(jwt.UnsafeAllowNoneSignatureType, claims(func(*api.UserClaims) {}), jwt.SigningMethodNone),
		"HS512":            sign(key, claims(func(*api.UserClaims) {}), jwt.SigningMethodHS512),
		"wrong audience":   sign(key, claims(func(c *api.UserClaims) { c.Audience = jwt.ClaimStrings{"other"} }), jwt.SigningMethodHS256),
		"no expiry":        sign(key, claims(func(c *api.UserClaims) { c.ExpiresAt = nil }), jwt.SigningMethodHS256),
		"unknown tenant":   sign(key, claims(func(c *api.UserClaims) { c.TenantID = "t_0000000000000000" }), jwt.SigningMethodHS256),
		"no tenant":        sign(key, claims(func(c *api.UserClaims) { c.TenantID = "" }), jwt.SigningMethodHS256),
		"garbage":          "a.b.c",
	} {
		r := h.Do(http.MethodGet, "/v1/users/ada/inbox", tok, nil)
		if r.Status != http.StatusUnauthorized {
			t.Errorf("%s: %d %s, want 401", name, r.Status, r.Body)
			continue
		}
		apitest.WantError(t, r, 401, "invalid_user_token", "Authorization")
		st := h.OpenStream("", "/v1/users/ada/inbox/stream?access_token="+tok, "")
		if st.Status != http.StatusUnauthorized {
			t.Errorf("%s: stream %d, want 401", name, st.Status)
		}
	}
	// A token signed with this key for a real user is accepted (the forging test
	// above is not vacuous).
	good := sign(key, claims(func(*api.UserClaims) {}), jwt.SigningMethodHS256)
	h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/ada/inbox", good, nil)

	// Minting: bounds and unknown users.
	apitest.WantError(t, h.Do(http.MethodPost, "/v1/users/ada/token", keyA, map[string]any{"ttl_seconds": 10}), 400, "invalid_field", "ttl_seconds")
	apitest.WantError(t, h.Do(http.MethodPost, "/v1/users/ada/token", keyA, map[string]any{"ttl_seconds": 86401}), 400, "invalid_field", "ttl_seconds")
	apitest.WantError(t, h.Do(http.MethodPost, "/v1/users/nobody/token", keyA, nil), 404, "not_found", "")
	r := h.MustDo(http.StatusCreated, http.MethodPost, "/v1/users/ada/token", keyA, map[string]any{"ttl_seconds": 120})
	if exp, _ := time.Parse(time.RFC3339, r.Str("expires_at")); exp.Before(now.Add(100*time.Second)) || exp.After(now.Add(130*time.Second)) {
		t.Fatalf("ttl 120 expires at %s", r.Str("expires_at"))
	}
}

var pathParam = regexp.MustCompile(`\{[a-z_]+\}`)

// TestUserTokenOpensNoOtherEndpoint calls every endpoint of the OpenAPI document
// that does not list the userToken scheme with a valid user token: each answers
// 401 user_token_not_allowed (so an endpoint added later is covered too).
func TestUserTokenOpensNoOtherEndpoint(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	_, _, token := inboxUser(t, h, "ada")
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPIDocument)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			sec := doc.Security
			if op.Security != nil {
				sec = *op.Security
			}
			if len(sec) == 0 || slices.ContainsFunc(sec, func(r openapi3.SecurityRequirement) bool {
				_, ok := r["userToken"]
				return ok
			}) {
				continue // public, or an inbox endpoint
			}
			// Path parameters: known ones get a valid value, any other (an endpoint
			// added later) a plain identifier.
			concrete := pathParam.ReplaceAllStringFunc(path, func(p string) string {
				if v, ok := map[string]string{"{user_id}": "ada", "{notification_id}": "n_" + strings.Repeat("0", 64),
					"{channel}": "email", "{provider}": "sendgrid", "{tenant_id}": "t_0000000000000000"}[p]; ok {
					return v
				}
				return "x1"
			})
			var body any
			if method == http.MethodPost || method == http.MethodPut {
				body = map[string]any{}
			}
			r := h.Do(method, concrete, token, body)
			if strings.HasPrefix(path, "/v1/operator/") {
				if r.Status != http.StatusUnauthorized && r.Status != http.StatusNotFound {
					t.Errorf("%s %s with a user token: %d %s", method, concrete, r.Status, r.Body)
				}
				continue
			}
			if _, code := r.ErrorField(); r.Status != http.StatusUnauthorized || code != "user_token_not_allowed" {
				t.Errorf("%s %s with a user token: %d %s, want 401 user_token_not_allowed", method, concrete, r.Status, r.Body)
			}
			checked++
		}
	}
	t.Logf("%d endpoints refused the user token", checked)
	if checked < 30 {
		t.Fatalf("only %d endpoints checked", checked)
	}
}

func TestInboxSessionFromUserHash(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	tenantID, key, _ := inboxUser(t, h, "ada")
	session := func(tenant, user, hash string) apitest.Response {
		return h.Do(http.MethodPost, "/v1/inbox/session", "", map[string]any{"tenant_id": tenant, "user_id": user, "user_hash": hash})
	}
	// No secret yet: every hash is refused.
	apitest.WantError(t, session(tenantID, "ada", strings.Repeat("0", 64)), 401, "invalid_user_hash", "user_hash")
	if r := h.MustDo(http.StatusOK, http.MethodGet, "/v1/inbox/settings", key, nil); r.JSON["hmac_secret_set"] != false {
		t.Fatalf("settings before: %s", r.Body)
	}
	secret := h.MustDo(http.StatusCreated, http.MethodPost, "/v1/inbox/secret", key, nil).Str("secret")
	if r := h.MustDo(http.StatusOK, http.MethodGet, "/v1/inbox/settings", key, nil); r.JSON["hmac_secret_set"] != true || strings.Contains(string(r.Body), secret) {
		t.Fatalf("settings after: %s", r.Body)
	}
	hash := api.UserHash([]byte(secret), "ada")
	r := h.MustDo(http.StatusCreated, http.MethodPost, "/v1/inbox/session", "", map[string]any{"tenant_id": tenantID, "user_id": "ada", "user_hash": hash})
	h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/ada/inbox", r.Str("token"), nil)

	apitest.WantError(t, session(tenantID, "bob", hash), 401, "invalid_user_hash", "user_hash")                     // ada's hash for bob
	apitest.WantError(t, session("t_0000000000000000", "ada", hash), 401, "invalid_user_hash", "user_hash")         // another tenant
	apitest.WantError(t, session(tenantID, "nobody", api.UserHash([]byte(secret), "nobody")), 404, "not_found", "") // right hash, no such user
	apitest.WantError(t, h.Do(http.MethodPost, "/v1/inbox/session", "", map[string]any{"tenant_id": tenantID}), 400, "missing_field", "user_id")
	// Rotating the secret retires the old hashes at once.
	h.MustDo(http.StatusCreated, http.MethodPost, "/v1/inbox/secret", key, nil)
	apitest.WantError(t, session(tenantID, "ada", hash), 401, "invalid_user_hash", "user_hash")
}

func TestInboxCORSPerTenant(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	_, key, token := inboxUser(t, h, "ada")
	for _, bad := range []string{"*", "https://*.example.com", "https://example.com/path", "ftp://example.com", "example.com",
		"https://user@example.com", "https://example.com?x=1", "null", ""} {
		apitest.WantError(t, h.Do(http.MethodPut, "/v1/inbox/settings", key, map[string]any{"allowed_origins": []string{bad}}),
			400, "invalid_field", "allowed_origins")
	}
	r := h.MustDo(http.StatusOK, http.MethodPut, "/v1/inbox/settings", key,
		map[string]any{"allowed_origins": []string{"https://App.Example.com:443", "http://localhost:3000", "https://app.example.com"}})
	if got := r.JSON["allowed_origins"].([]any); len(got) != 2 || got[0] != "https://app.example.com" || got[1] != "http://localhost:3000" {
		t.Fatalf("stored origins: %s", r.Body)
	}
	// Allowed: the origin is echoed, never "*", and no credentials.
	r = h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/ada/inbox", token, nil, "Origin", "https://app.example.com")
	if r.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" || r.Header.Get("Access-Control-Allow-Credentials") != "" ||
		!strings.Contains(r.Header.Get("Vary"), "Origin") {
		t.Fatalf("allowed origin headers: %v", r.Header)
	}
	// Not allowed: 403 and no CORS header, for the list, the stream and a mark.
	r = h.Do(http.MethodGet, "/v1/users/ada/inbox", token, nil, "Origin", "https://evil.example.net")
	apitest.WantError(t, r, 403, "origin_not_allowed", "Origin")
	if r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("refused origin got ACAO %q", r.Header.Get("Access-Control-Allow-Origin"))
	}
	if st := h.OpenStream("", "/v1/users/ada/inbox/stream", token, "Origin", "https://evil.example.net"); st.Status != http.StatusForbidden {
		t.Fatalf("stream from a refused origin: %d", st.Status)
	}
	apitest.WantError(t, h.Do(http.MethodPost, "/v1/users/ada/inbox/read-all", token, nil, "Origin", "https://evil.example.net"), 403, "origin_not_allowed", "Origin")
	// Herald's own origin (the demo page) is always allowed.
	h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/ada/inbox", token, nil, "Origin", h.URL)

	// A preflight of an inbox path is answered for any origin (it grants nothing by itself).
	req, _ := http.NewRequest(http.MethodOptions, h.URL+"/v1/users/ada/inbox/stream", nil)
	req.Header.Set("Origin", "https://app.example.com")
	req.Header.Set("Access-Control-Request-Method", "GET")
	req.Header.Set("Access-Control-Request-Headers", "authorization, last-event-id")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Fatalf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
	// The tenant key's answers never carry CORS headers (the key must not be in a browser).
	r = h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/ada/inbox", key, nil, "Origin", "https://app.example.com")
	if r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("tenant key answer has ACAO")
	}
}
