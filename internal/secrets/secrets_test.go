package secrets_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/herald-notify/herald/internal/secrets"
)

func rawKey(t *testing.T) []byte {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSealOpenRoundTrip(t *testing.T) {
	k, err := secrets.New(rawKey(t))
	if err != nil {
		t.Fatal(err)
	}
	pt := []byte(`{"api_key":"SG.secret"}`)
	aad := []byte("t_acme/email/sendgrid")
	s1, err := k.Seal(pt, aad)
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := k.Seal(pt, aad)
	if bytes.Equal(s1, s2) {
		t.Fatal("two seals of the same plaintext are equal: nonce not random")
	}
	if bytes.Contains(s1, []byte("SG.secret")) {
		t.Fatal("plaintext visible in sealed bytes")
	}
	got, err := k.Open(s1, aad)
	if err != nil || !bytes.Equal(got, pt) {
		t.Fatalf("Open = %q, %v", got, err)
	}
	empty, err := k.Seal(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := k.Open(empty, nil); err != nil || len(got) != 0 {
		t.Fatalf("empty round trip: %q %v", got, err)
	}
}

func TestTamperingIsDetected(t *testing.T) {
	k, _ := secrets.New(rawKey(t))
	aad := []byte("t_acme/sms/twilio")
	sealed, _ := k.Seal([]byte("auth-token"), aad)
	for i := range sealed {
		bad := append([]byte(nil), sealed...)
		bad[i] ^= 0x01
		if _, err := k.Open(bad, aad); !errors.Is(err, secrets.ErrOpen) {
			t.Fatalf("flipping byte %d was not detected: %v", i, err)
		}
	}
	if _, err := k.Open(sealed, []byte("t_evil/sms/twilio")); !errors.Is(err, secrets.ErrOpen) {
		t.Fatal("value opened under another row's AAD")
	}
	if _, err := k.Open(sealed[:len(sealed)-1], aad); !errors.Is(err, secrets.ErrOpen) {
		t.Fatal("truncated value opened")
	}
	if _, err := k.Open(append(sealed, 0), aad); !errors.Is(err, secrets.ErrOpen) {
		t.Fatal("extended value opened")
	}
	if _, err := k.Open(nil, aad); !errors.Is(err, secrets.ErrOpen) {
		t.Fatal("nil opened")
	}
	other, _ := secrets.New(rawKey(t))
	if _, err := other.Open(sealed, aad); !errors.Is(err, secrets.ErrOpen) {
		t.Fatal("another key opened the value")
	}
}

func TestRotation(t *testing.T) {
	oldRaw, newRaw := rawKey(t), rawKey(t)
	old, _ := secrets.New(oldRaw)
	sealedOld, _ := old.Seal([]byte("v"), nil)

	rotated, err := secrets.New(newRaw, oldRaw)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := rotated.Open(sealedOld, nil); err != nil || string(got) != "v" {
		t.Fatalf("old value after rotation: %q %v", got, err)
	}
	if !rotated.NeedsRotation(sealedOld) {
		t.Fatal("old value does not report needing rotation")
	}
	sealedNew, _ := rotated.Seal([]byte("v"), nil)
	if rotated.NeedsRotation(sealedNew) {
		t.Fatal("new value reports needing rotation")
	}
	if _, err := old.Open(sealedNew, nil); !errors.Is(err, secrets.ErrOpen) {
		t.Fatal("old keyring opened a value sealed with the new key")
	}
	if rotated.KeyID() == old.KeyID() || len(rotated.KeyID()) != 8 {
		t.Fatalf("key ids %q %q", rotated.KeyID(), old.KeyID())
	}
}

func TestFromEnv(t *testing.T) {
	t.Setenv(secrets.EnvKey, "")
	if _, err := secrets.FromEnv(); !errors.Is(err, secrets.ErrNoKey) {
		t.Fatalf("unset: %v", err)
	}
	t.Setenv(secrets.EnvKey, "not base64 !!")
	if _, err := secrets.FromEnv(); err == nil || strings.Contains(err.Error(), "not base64 !!") {
		t.Fatalf("bad base64: %v (must not echo the value)", err)
	}
	t.Setenv(secrets.EnvKey, base64.StdEncoding.EncodeToString(make([]byte, 16)))
	if _, err := secrets.FromEnv(); err == nil {
		t.Fatal("16-byte key accepted")
	}
	oldB64, _ := secrets.GenerateKey()
	newB64, _ := secrets.GenerateKey()
	oldRaw, _ := base64.StdEncoding.DecodeString(oldB64)
	old, _ := secrets.New(oldRaw)
	sealed, _ := old.Seal([]byte("x"), []byte("a"))

	t.Setenv(secrets.EnvKey, newB64)
	t.Setenv(secrets.EnvPreviousKeys, " "+oldB64+" ,")
	k, err := secrets.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := k.Open(sealed, []byte("a")); err != nil || string(got) != "x" {
		t.Fatalf("previous key from env: %q %v", got, err)
	}
}

func TestNewRejectsShortKeys(t *testing.T) {
	if _, err := secrets.New(make([]byte, 16)); err == nil {
		t.Fatal("AES-128 key accepted")
	}
	if _, err := secrets.New(rawKey(t), make([]byte, 5)); err == nil {
		t.Fatal("short previous key accepted")
	}
}
