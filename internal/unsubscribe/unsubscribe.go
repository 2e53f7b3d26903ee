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
	"time"
)

// Path is where the one-click endpoint is served.
const Path = "/v1/unsubscribe"

// Claims are what a link unsubscribes.
type Claims struct {
	TenantID string `json:"t"`
	UserID   string `json:"u"`
	Category string `json:"c"`
	// IssuedAt (Unix milliseconds) is set on preference-centre links only, which
	// expire (PageLinkTTL) and die with the user's token revocation; one-click
	// unsubscribe links must keep working for as long as the message is kept.
	IssuedAt int64 `json:"iat,omitempty"`
}

// ErrInvalid: the token is malformed, tampered with or signed with another key.
var ErrInvalid = errors.New("unsubscribe: invalid token")

// ErrExpired: a preference-centre token older than PageLinkTTL.
var ErrExpired = errors.New("unsubscribe: expired preference-centre link")

// Signer makes tokens with its primary key and accepts tokens of any of its keys.
// It signs two kinds, each with a key of its own (derived from the same master
// secret under another label), so neither can stand for the other: one-click
// unsubscribe links (Token, Verify) and preference-centre links (PageToken,
// VerifyPage).
type Signer struct {
	key  []byte
	keys [][]byte
	page *Signer
}

// NewSigner derives the link-signing key from a master secret (the secrets key), so
// the same secret never serves two purposes directly. Links signed under previous
// master secrets keep working after a rotation: unsubscribe links live in inboxes
// for years.
func NewSigner(master []byte, previous ...[]byte) *Signer {
	s := newSigner(unsubscribeLabel, master, previous)
	s.page = newSigner(pageLabel, master, previous)
	return s
}

// The key derivation labels.
const (
	unsubscribeLabel = "herald/unsubscribe/v1"
	pageLabel        = "herald/preference-centre/v1"
)

func newSigner(label string, master []byte, previous [][]byte) *Signer {
	s := &Signer{key: derive(label, master)}
	s.keys = append(s.keys, s.key)
	for _, p := range previous {
		s.keys = append(s.keys, derive(label, p))
	}
	return s
}

// PagePath is where the preference centre is served.
const PagePath = "/preferences"

// pageCategory marks page claims (a link to every category of the user).
const pageCategory = "*"

// PageLinkTTL is how long a preference-centre link opens the page: the link
// changes preferences without any other credential, so unlike a one-click
// unsubscribe link it does not live forever in old messages.
const PageLinkTTL = 30 * 24 * time.Hour

// PageToken signs a link to a user's preference centre, issued at issued.
func (s *Signer) PageToken(tenantID, userID string, issued time.Time) string {
	return s.page.Token(Claims{TenantID: tenantID, UserID: userID, Category: pageCategory, IssuedAt: issued.UnixMilli()})
}

// PageURL is the preference-centre link of a user under publicBaseURL.
func (s *Signer) PageURL(publicBaseURL, tenantID, userID string, issued time.Time) string {
	return strings.TrimRight(publicBaseURL, "/") + PagePath + "?token=" + url.QueryEscape(s.PageToken(tenantID, userID, issued))
}

// VerifyPage returns the tenant and user of a preference-centre token and when
// it was issued; a token older than PageLinkTTL at now is ErrExpired. Whether
// the user's tokens were revoked since is the caller's to check.
func (s *Signer) VerifyPage(token string, now time.Time) (tenantID, userID string, issued time.Time, err error) {
	c, err := s.page.Verify(token)
	if err != nil || c.Category != pageCategory || c.IssuedAt <= 0 {
		return "", "", time.Time{}, ErrInvalid
	}
	issued = time.UnixMilli(c.IssuedAt)
	if now.Sub(issued) > PageLinkTTL {
		return "", "", time.Time{}, ErrExpired
	}
	return c.TenantID, c.UserID, issued, nil
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

func derive(label string, master []byte) []byte {
	m := hmac.New(sha256.New, master)
	m.Write([]byte(label))
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
