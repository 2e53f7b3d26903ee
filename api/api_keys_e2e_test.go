package api_test

import (
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/store"
)

// noSecrets fails if a response body carries any form of the given keys: the key,
// or its SHA-256 in hex or base64.
func noSecrets(t *testing.T, what string, body []byte, keys ...string) {
	t.Helper()
	for _, k := range keys {
		h := store.HashAPIKey(k)
		for _, form := range []string{k, k[len(store.APIKeyPrefix):], hex.EncodeToString(h), base64.StdEncoding.EncodeToString(h)} {
			if strings.Contains(string(body), form) {
				t.Fatalf("%s carries a key or its hash: %s", what, body)
			}
		}
	}
}

func keyItems(r apitest.Response) []map[string]any {
	var out []map[string]any
	for _, it := range r.JSON["items"].([]any) {
		out = append(out, it.(map[string]any))
	}
	return out
}

// TestAPIKeysListCreateRevoke: keys are listed without their secrets, a created key
// is shown once and works, a revoked key is refused at once by this API process,
// the last active key cannot be revoked, and another tenant's key is not found.
func TestAPIKeysListCreateRevoke(t *testing.T) {
	t.Parallel()
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	_, first := h.Tenant("keys")
	_, otherKey := h.Tenant("keys-other")

	list := h.MustDo(http.StatusOK, http.MethodGet, "/v1/api-keys", first, nil)
	items := keyItems(list)
	if len(items) != 1 || items[0]["prefix"] != first[:9] || items[0]["revoked_at"] != nil || items[0]["last_used_at"] == nil {
		t.Fatalf("one key, used just now: %s", list.Body)
	}
	noSecrets(t, "GET /v1/api-keys", list.Body, first)
	firstID := items[0]["id"].(string)

	created := h.MustDo(http.StatusCreated, http.MethodPost, "/v1/api-keys", first, map[string]any{"name": "  deploy bot "})
	second := created.Str("key")
	if !strings.HasPrefix(second, store.APIKeyPrefix) || created.Str("name") != "deploy bot" || created.Str("prefix") != second[:9] ||
		created.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("created: %s %v", created.Body, created.Header)
	}
	if r := h.MustDo(http.StatusCreated, http.MethodPost, "/v1/api-keys", second, nil); r.Str("name") != "" || r.Str("key") == "" {
		t.Fatalf("an unnamed key (no body): %s", r.Body)
	}
	apitest.WantError(t, h.Do(http.MethodPost, "/v1/api-keys", first, map[string]any{"name": strings.Repeat("x", 101)}), http.StatusBadRequest, "invalid_field", "name")
	apitest.WantError(t, h.Do(http.MethodPost, "/v1/api-keys", first, map[string]any{"key": "hk_mine"}), http.StatusBadRequest, "unknown_field", "key")

	list = h.MustDo(http.StatusOK, http.MethodGet, "/v1/api-keys", second, nil)
	if items = keyItems(list); len(items) != 3 || items[0]["id"] != firstID || items[1]["name"] != "deploy bot" {
		t.Fatalf("three keys, oldest first: %s", list.Body)
	}
	noSecrets(t, "GET /v1/api-keys", list.Body, first, second)
	if other := h.MustDo(http.StatusOK, http.MethodGet, "/v1/api-keys", otherKey, nil); len(keyItems(other)) != 1 {
		t.Fatalf("another tenant sees these keys: %s", other.Body)
	}

	// Another tenant cannot revoke it; an unknown id is 404.
	apitest.WantError(t, h.Do(http.MethodDelete, "/v1/api-keys/"+firstID, otherKey, nil), http.StatusNotFound, "not_found", "")
	apitest.WantError(t, h.Do(http.MethodDelete, "/v1/api-keys/key_0000000000000000", first, nil), http.StatusNotFound, "not_found", "")

	// Revoking the key making the request: answered, then refused at once (this
	// process drops it from its auth cache) although the cache TTL is 30 s.
	r := h.MustDo(http.StatusOK, http.MethodDelete, "/v1/api-keys/"+firstID, first, nil)
	if r.Str("id") != firstID || r.Str("revoked_at") == "" {
		t.Fatalf("revoked: %s", r.Body)
	}
	apitest.WantError(t, h.Do(http.MethodGet, "/v1/api-keys", first, nil), http.StatusUnauthorized, "invalid_api_key", "Authorization")
	again := h.MustDo(http.StatusOK, http.MethodDelete, "/v1/api-keys/"+firstID, second, nil)
	if again.Str("revoked_at") != r.Str("revoked_at") {
		t.Fatalf("revoking again moved revoked_at: %s then %s", r.Body, again.Body)
	}

	// The last active key stays.
	for _, it := range keyItems(h.MustDo(http.StatusOK, http.MethodGet, "/v1/api-keys", second, nil)) {
		if it["revoked_at"] == nil && it["name"] == "" {
			h.MustDo(http.StatusOK, http.MethodDelete, "/v1/api-keys/"+it["id"].(string), second, nil)
		}
	}
	items = keyItems(h.MustDo(http.StatusOK, http.MethodGet, "/v1/api-keys", second, nil))
	apitest.WantError(t, h.Do(http.MethodDelete, "/v1/api-keys/"+items[1]["id"].(string), second, nil), http.StatusConflict, "last_active_key", "")
	h.MustDo(http.StatusOK, http.MethodGet, "/v1/api-keys", second, nil)
}

// TestRevokedKeyIsRefusedWithinTheAuthCacheTTL: two API processes (replicas) with
// a 1 s auth cache. Replica A has checked the key; replica B revokes it. B refuses
// it at once, and A within its TTL, without restarting anything.
func TestRevokedKeyIsRefusedWithinTheAuthCacheTTL(t *testing.T) {
	t.Parallel()
	const ttl = time.Second
	a := apitest.Start(t, apitest.Options{NoWorker: true, AuthCacheTTL: ttl})
	b := apitest.Start(t, apitest.Options{NoWorker: true, AuthCacheTTL: ttl})
	_, key := a.Tenant("ttl")
	other := a.MustDo(http.StatusCreated, http.MethodPost, "/v1/api-keys", key, nil).Str("key")
	items := keyItems(a.MustDo(http.StatusOK, http.MethodGet, "/v1/api-keys", key, nil)) // A caches key
	b.MustDo(http.StatusOK, http.MethodGet, "/v1/api-keys", key, nil)                    // so does B

	b.MustDo(http.StatusOK, http.MethodDelete, "/v1/api-keys/"+items[0]["id"].(string), other, nil)
	revokedAt := time.Now()
	apitest.WantError(t, b.Do(http.MethodGet, "/v1/api-keys", key, nil), http.StatusUnauthorized, "invalid_api_key", "Authorization")
	for {
		r := a.Do(http.MethodGet, "/v1/api-keys", key, nil)
		if r.Status == http.StatusUnauthorized {
			break
		}
		if r.Status != http.StatusOK {
			t.Fatalf("replica A: %d %s", r.Status, r.Body)
		}
		if time.Since(revokedAt) > ttl+500*time.Millisecond {
			t.Fatalf("replica A still accepts the key %s after it was revoked (auth cache TTL %s)", time.Since(revokedAt), ttl)
		}
		time.Sleep(50 * time.Millisecond)
	}
	a.MustDo(http.StatusOK, http.MethodGet, "/v1/api-keys", other, nil)
}
