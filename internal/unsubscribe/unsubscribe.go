// Package unsubscribe signs and verifies one-click unsubscribe links (RFC 8058):
// the link names a tenant, a user and a category, and an HMAC-SHA256 over them
// proves Herald made it, so the endpoint behind it needs no API key.
package unsubscribe

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"strings"
)

// Path is where the one-click endpoint is served.
const Path = "/v1/unsubscribe"

// Claims are what a link unsubscribes.
type Claims struct {
	TenantID string `json:"t"`
	UserID   string `json:"u"`
	Category string `json:"c"`
}

// ErrInvalid: the token is malformed, tampered with or signed with another key.
var ErrInvalid = errors.New("unsubscribe: invalid token")

// Signer makes tokens with its primary key and accepts tokens of any of its keys.
type Signer struct {
	key  []byte
	keys [][]byte
}

// NewSigner derives the link-signing key from a master secret (the secrets key), so
// the same secret never serves two purposes directly. Links signed under previous
// master secrets keep working after a rotation: unsubscribe links live in inboxes
// for years.
func NewSigner(master []byte, previous ...[]byte) *Signer {
	s := &Signer{key: derive(master)}
	s.keys = append(s.keys, s.key)
	for _, p := range previous {
		s.keys = append(s.keys, derive(p))
	}
	return s
}

// FromEnv builds the signer from HERALD_SECRETS_KEY and HERALD_SECRETS_PREVIOUS_KEYS
// (comma-separated), trimmed as internal/secrets reads them.
func FromEnv() *Signer {
	var prev [][]byte
	for _, p := range strings.Split(os.Getenv("HERALD_SECRETS_PREVIOUS_KEYS"), ",") {
		if p = strings.TrimSpace(p); p != "" {
			prev = append(prev, []byte(p))
		}
	}
	return NewSigner([]byte(strings.TrimSpace(os.Getenv("HERALD_SECRETS_KEY"))), prev...)
}

func derive(master []byte) []byte {
	m := hmac.New(sha256.New, master)
	m.Write([]byte("herald/unsubscribe/v1"))
	return m.Sum(nil)
}

// Token returns payload.signature, both base64url.
func (s *Signer) Token(c Claims) string {
	payload, _ := json.Marshal(c)
	p := base64.RawURLEncoding.EncodeToString(payload)
	return p + "." + base64.RawURLEncoding.EncodeToString(s.mac(p))
}

// URL is the one-click link for c under publicBaseURL.
func (s *Signer) URL(publicBaseURL string, c Claims) string {
	return strings.TrimRight(publicBaseURL, "/") + Path + "?token=" + url.QueryEscape(s.Token(c))
}

// Verify returns the claims of a token this signer made.
func (s *Signer) Verify(token string) (Claims, error) {
	p, sig, ok := strings.Cut(token, ".")
	if !ok {
		return Claims{}, ErrInvalid
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !s.valid(p, got) {
		return Claims{}, ErrInvalid
	}
	raw, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		return Claims{}, ErrInvalid
	}
	var c Claims
	if err := json.Unmarshal(raw, &c); err != nil || c.TenantID == "" || c.UserID == "" || c.Category == "" {
		return Claims{}, ErrInvalid
	}
	return c, nil
}

func (s *Signer) valid(payload string, sig []byte) bool {
	for _, k := range s.keys {
		if hmac.Equal(sig, mac(k, payload)) {
			return true
		}
	}
	return false
}

func (s *Signer) mac(payload string) []byte { return mac(s.key, payload) }

func mac(key []byte, payload string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(payload))
	return m.Sum(nil)
}
