// Package webhooks sends tenants their status webhooks: every delivery state
// change (herald.EventTypes) is queued in PostgreSQL per subscribed endpoint
// (Emitter), a per-endpoint Temporal workflow (workflows.WebhookEndpointWorkflow)
// sends the queue in order per notification with exponential backoff, and
// Sender signs each request the Standard Webhooks way
// (https://www.standardwebhooks.com): headers webhook-id, webhook-timestamp
// and webhook-signature "v1,<base64 HMAC-SHA256 of id.timestamp.body>", with
// the endpoint's "whsec_<base64>" secret.
//
// Signing is a dozen lines of crypto/hmac; the Standard Webhooks Go library
// (github.com/standard-webhooks/standard-webhooks/libraries) is a verifier
// first, and the tests use it as the independent receiver, so Herald's side is
// written here from the spec and checked against that library.
package webhooks

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// SecretPrefix starts every endpoint secret.
const SecretPrefix = "whsec_"

// secretBytes is the length of a generated secret (the spec allows 24 to 64).
const secretBytes = 32

// NewSecret returns a fresh endpoint secret, whsec_ + base64 of 32 random bytes.
func NewSecret() (string, error) {
	b := make([]byte, secretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b), nil
}

// DecodeSecret returns the key bytes of a whsec_ secret.
func DecodeSecret(secret string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil || len(raw) == 0 {
		return nil, errors.New("webhooks: malformed secret")
	}
	return raw, nil
}

// Headers of a signed webhook request.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// Sign is one signature, "v1,<base64 HMAC-SHA256(key, msgID.timestamp.body)>".
func Sign(key []byte, msgID string, ts time.Time, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(msgID + "." + strconv.FormatInt(ts.Unix(), 10) + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// SignatureHeader signs with every key (the current secret first, then a
// rotated-out one still honoured), space separated as the spec allows.
func SignatureHeader(keys [][]byte, msgID string, ts time.Time, body []byte) string {
	sigs := make([]string, 0, len(keys))
	for _, k := range keys {
		sigs = append(sigs, Sign(k, msgID, ts, body))
	}
	return strings.Join(sigs, " ")
}
