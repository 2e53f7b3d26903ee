package fcm_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/fcm"
	"github.com/herald-notify/herald/providers/providertest"
)

// TestFromConfigWithServiceAccount drives the production credential path: a
// stored service account key, exchanged for an access token at the process's
// token endpoint (here the fake's, standing in for Google's).
func TestFromConfigWithServiceAccount(t *testing.T) {
	fake := providertest.NewFCM()
	defer fake.Close()
	fake.Token = "issued-by-fake"
	pc := providers.ProviderConfig{TenantID: "t", Channel: "push", Provider: "fcm",
		Settings: json.RawMessage(`{"project_id":"herald-test"}`), Secret: providertest.ServiceAccountJSON(t, fcm.GoogleTokenURL)}
	c, err := fcm.FromConfig(context.Background(), pc, fcm.Process{BaseURL: fake.URL, TokenURL: fake.TokenURL(),
		HTTPClient: providertest.LoopbackClient(10 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := send(t, c); err != nil {
			t.Fatal(err)
		}
	}
	if fake.Accepted() != 2 || fake.TokenRequests() != 1 {
		t.Fatalf("accepted %d, token requests %d (token must be cached)", fake.Accepted(), fake.TokenRequests())
	}
	if got := fake.AcceptedRequests()[0].Header.Get("Authorization"); got != "Bearer issued-by-fake" {
		t.Fatalf("Authorization = %q", got)
	}

	if _, err := fcm.FromConfig(context.Background(), providers.ProviderConfig{Settings: json.RawMessage(`{"project_id":"p"}`), Secret: []byte("{")}, fcm.Process{}); err == nil {
		t.Error("broken key JSON accepted")
	}
	if _, err := fcm.FromConfig(context.Background(), providers.ProviderConfig{Secret: pc.Secret}, fcm.Process{}); err == nil {
		t.Error("missing project accepted")
	}
}
