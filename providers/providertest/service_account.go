package providertest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"testing"
)

// ServiceAccount returns a Google service account key of the project with a
// freshly generated RSA key (never used against Google), whose tokens come from
// tokenURI, and that private key as PEM. Each call is a new key, so storing it
// is a new provider config version.
func ServiceAccount(t testing.TB, projectID, tokenURI string) (key map[string]any, pemKey string) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	pemKey = string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	return map[string]any{
		"type": "service_account", "project_id": projectID, "private_key_id": "0123456789abcdef",
		"private_key": pemKey, "client_email": "herald@" + projectID + ".iam.gserviceaccount.com",
		"client_id": "1234567890", "token_uri": tokenURI,
	}, pemKey
}

// ServiceAccountJSON is ServiceAccount for project herald-test as stored
// credentials (the JSON file Google hands out).
func ServiceAccountJSON(t testing.TB, tokenURI string) []byte {
	t.Helper()
	key, _ := ServiceAccount(t, "herald-test", tokenURI)
	b, err := json.Marshal(key)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
