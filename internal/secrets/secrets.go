// Package secrets seals provider credentials for storage: AES-256-GCM with a key
// from the environment, a random 96-bit nonce per message, and the key's id in the
// sealed bytes so that keys can be rotated.
//
// Sealed format (version 1):
//
//	0x01 | key id (4 bytes: first 4 bytes of SHA-256 of the key) | nonce (12) | ciphertext+tag
//
// Additional authenticated data (AAD) binds a sealed value to where it is stored
// (for example tenant/channel/provider): moved to another row it no longer opens.
//
// Environment:
//
//	HERALD_SECRETS_KEY            base64 of 32 random bytes; seals and opens
//	HERALD_SECRETS_PREVIOUS_KEYS  optional, comma-separated base64 keys; open only (rotation)
//
// Generate a key with `openssl rand -base64 32` (or secrets.GenerateKey).
package secrets

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Environment variable names.
const (
	EnvKey          = "HERALD_SECRETS_KEY"
	EnvPreviousKeys = "HERALD_SECRETS_PREVIOUS_KEYS"
)

const (
	version   = 0x01
	keyIDLen  = 4
	nonceLen  = 12
	headerLen = 1 + keyIDLen + nonceLen
)

var (
	// ErrNoKey: HERALD_SECRETS_KEY is not set.
	ErrNoKey = errors.New("secrets: " + EnvKey + " is not set (base64 of 32 random bytes, e.g. `openssl rand -base64 32`)")
	// ErrOpen: the sealed value was tampered with, sealed under other AAD, or
	// sealed with a key this keyring does not have. Deliberately uninformative.
	ErrOpen = errors.New("secrets: cannot open sealed value")
)

type key struct {
	id   [keyIDLen]byte
	aead cipher.AEAD
}

// Keyring seals with its primary key and opens with any of its keys. It is safe
// for concurrent use.
type Keyring struct {
	primary key
	byID    map[[keyIDLen]byte]key
}

// New builds a keyring from raw 32-byte keys: the first is primary, the rest only
// open.
func New(primary []byte, previous ...[]byte) (*Keyring, error) {
	p, err := newKey(primary)
	if err != nil {
		return nil, err
	}
	k := &Keyring{primary: p, byID: map[[keyIDLen]byte]key{p.id: p}}
	for _, raw := range previous {
		pk, err := newKey(raw)
		if err != nil {
			return nil, err
		}
		if _, dup := k.byID[pk.id]; !dup {
			k.byID[pk.id] = pk
		}
	}
	return k, nil
}

// FromEnv builds the keyring from HERALD_SECRETS_KEY and HERALD_SECRETS_PREVIOUS_KEYS.
func FromEnv() (*Keyring, error) {
	v := strings.TrimSpace(os.Getenv(EnvKey))
	if v == "" {
		return nil, ErrNoKey
	}
	primary, err := decodeKey(EnvKey, v)
	if err != nil {
		return nil, err
	}
	var prev [][]byte
	for _, s := range strings.Split(os.Getenv(EnvPreviousKeys), ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		raw, err := decodeKey(EnvPreviousKeys, s)
		if err != nil {
			return nil, err
		}
		prev = append(prev, raw)
	}
	return New(primary, prev...)
}

// GenerateKey returns a new random key, base64-encoded for HERALD_SECRETS_KEY.
func GenerateKey() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

func decodeKey(name, v string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		// The value itself is never echoed: it is a secret.
		return nil, fmt.Errorf("secrets: %s is not valid base64", name)
	}
	if len(raw) != 32 {
		return nil, fmt.Errorf("secrets: %s must decode to 32 bytes, got %d", name, len(raw))
	}
	return raw, nil
}

func newKey(raw []byte) (key, error) {
	if len(raw) != 32 {
		return key{}, fmt.Errorf("secrets: key must be 32 bytes (AES-256), got %d", len(raw))
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return key{}, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return key{}, err
	}
	sum := sha256.Sum256(raw)
	var k key
	copy(k.id[:], sum[:keyIDLen])
	k.aead = aead
	return k, nil
}

// Seal encrypts plaintext with the primary key, authenticating aad too.
func (k *Keyring) Seal(plaintext, aad []byte) ([]byte, error) {
	out := make([]byte, headerLen, headerLen+len(plaintext)+k.primary.aead.Overhead())
	out[0] = version
	copy(out[1:], k.primary.id[:])
	if _, err := rand.Read(out[1+keyIDLen : headerLen]); err != nil {
		return nil, fmt.Errorf("secrets: nonce: %w", err)
	}
	// The header (version, key id) is authenticated as part of the AAD.
	return k.primary.aead.Seal(out, out[1+keyIDLen:headerLen], plaintext, k.aadFor(out[:1+keyIDLen], aad)), nil
}

// Open decrypts a value Seal produced with the same aad. Any tampering, a wrong
// aad, or an unknown key gives ErrOpen.
func (k *Keyring) Open(sealed, aad []byte) ([]byte, error) {
	if len(sealed) < headerLen || sealed[0] != version {
		return nil, ErrOpen
	}
	var id [keyIDLen]byte
	copy(id[:], sealed[1:1+keyIDLen])
	key, ok := k.byID[id]
	if !ok || len(sealed) < headerLen+key.aead.Overhead() {
		return nil, ErrOpen
	}
	pt, err := key.aead.Open(nil, sealed[1+keyIDLen:headerLen], sealed[headerLen:], k.aadFor(sealed[:1+keyIDLen], aad))
	if err != nil {
		return nil, ErrOpen
	}
	return pt, nil
}

// NeedsRotation reports whether sealed was sealed with a key other than the
// primary (re-seal it to finish a rotation).
func (k *Keyring) NeedsRotation(sealed []byte) bool {
	return len(sealed) < headerLen || !bytes.Equal(sealed[1:1+keyIDLen], k.primary.id[:])
}

// KeyID returns the primary key's id in hex, for logs (it reveals nothing about
// the key).
func (k *Keyring) KeyID() string { return fmt.Sprintf("%x", k.primary.id) }

func (k *Keyring) aadFor(header, aad []byte) []byte {
	out := make([]byte, 0, len(header)+len(aad))
	return append(append(out, header...), aad...)
}
