package smtp_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/providertest"
	"github.com/herald-notify/herald/providers/smtp"
	"github.com/herald-notify/herald/providers/smtp/smtptest"
)

func TestFromConfig(t *testing.T) {
	srv := startServer(t, smtptest.Options{Username: "relay-user", Password: "s3cret"})
	pc := providers.ProviderConfig{
		Settings: json.RawMessage(fmt.Sprintf(`{"host":%q,"port":%d,"tls":"none","from":"noreply@acme.example","from_name":"Acme","timeout_seconds":5,"message_id_domain":"mail.acme.example"}`, srv.Host, srv.Port)),
		Secret:   []byte(`{"username":"relay-user","password":"s3cret"}`),
	}
	c, err := smtp.FromConfig(pc, providertest.Loopback())
	if err != nil {
		t.Fatal(err)
	}
	res, err := send(t, c, message())
	if err != nil {
		t.Fatal(err)
	}
	if res.ProviderMessageID != "ntf_01J0000000000000000000000.email@mail.acme.example" {
		t.Fatalf("id %q", res.ProviderMessageID)
	}
	m := srv.Messages()[0]
	if m.Header.Get("From") != `"Acme" <noreply@acme.example>` || m.Authenticated != "relay-user" {
		t.Fatalf("from %q auth %q", m.Header.Get("From"), m.Authenticated)
	}
	if s := fmt.Sprint(smtp.Credentials{Username: "AKIA123", Password: "s3cret"}); strings.Contains(s, "s3cret") || strings.Contains(s, "AKIA123") {
		t.Fatalf("credentials print as %q", s)
	}
	// Without credentials: no AUTH (an internal relay).
	if _, err := smtp.FromConfig(providers.ProviderConfig{Settings: json.RawMessage(`{"host":"relay.internal","from":"a@b.example"}`)}, nil); err != nil {
		t.Fatalf("no secret: %v", err)
	}
	for name, bad := range map[string]providers.ProviderConfig{
		"no host":          {Settings: json.RawMessage(`{"from":"a@b.example"}`), Secret: pc.Secret},
		"bad settings":     {Settings: json.RawMessage(`{"host":1}`), Secret: pc.Secret},
		"bad secret":       {Settings: pc.Settings, Secret: []byte(`{`)},
		"bad tls":          {Settings: json.RawMessage(`{"host":"relay.example","tls":"ssl"}`)},
		"password only":    {Settings: json.RawMessage(`{"host":"relay.example"}`), Secret: []byte(`{"password":"x"}`)},
		"negative timeout": {Settings: json.RawMessage(`{"host":"relay.example","timeout_seconds":-1}`)},
		"plaintext auth":   {Settings: json.RawMessage(`{"host":"relay.example","tls":"none"}`), Secret: pc.Secret},
	} {
		if _, err := smtp.FromConfig(bad, nil); !providers.IsPermanent(err) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
