package sendgrid_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/providertest"
	"github.com/herald-notify/herald/providers/sendgrid"
)

func TestFromConfig(t *testing.T) {
	fake := providertest.NewSendGrid()
	defer fake.Close()
	fake.APIKey = "SG.stored"
	s := newSigner(t)
	pc := providers.ProviderConfig{Settings: json.RawMessage(`{"from":"noreply@acme.example","from_name":"Acme","webhook_public_key":"` + s.PublicKey + `"}`),
		Secret: []byte(`{"api_key":"SG.stored"}`)}
	c, settings, err := sendgrid.FromConfig(pc, fake.URL, providertest.LoopbackClient(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if settings.WebhookPublicKey != s.PublicKey {
		t.Fatalf("settings %+v", settings)
	}
	if _, err := send(t, c); err != nil {
		t.Fatal(err)
	}
	m, _ := providertest.DecodeMail(fake.AcceptedRequests()[0])
	if m.From.Email != "noreply@acme.example" || m.From.Name != "Acme" {
		t.Fatalf("from %+v", m.From)
	}
	if strings.Contains(fmt.Sprint(sendgrid.Credentials{APIKey: "SG.stored"}), "SG.stored") {
		t.Fatal("credentials print their key")
	}
	for name, bad := range map[string]providers.ProviderConfig{
		"no key":      {Settings: pc.Settings, Secret: []byte(`{}`)},
		"bad webhook": {Settings: json.RawMessage(`{"from":"a@b.example","webhook_public_key":"bm9wZQ=="}`), Secret: pc.Secret},
		"bad secret":  {Settings: pc.Settings, Secret: []byte(`{`)},
	} {
		if _, _, err := sendgrid.FromConfig(bad, fake.URL, nil); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}
