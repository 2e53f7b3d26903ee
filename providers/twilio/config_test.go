package twilio_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/providertest"
	"github.com/herald-notify/herald/providers/twilio"
)

func TestFromConfig(t *testing.T) {
	fake := newFake()
	defer fake.Close()
	pc := providers.ProviderConfig{Settings: json.RawMessage(`{"account_sid":"` + accountSID + `","from":"+15005550006"}`),
		Secret: []byte(`{"auth_token":"` + authToken + `"}`)}
	c, creds, err := twilio.FromConfig(pc, twilio.Process{BaseURL: fake.URL, StatusCallbackURL: "https://h.example/v1/webhooks/twilio",
		HTTPClient: providertest.LoopbackClient(10 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if creds.AuthToken != authToken || strings.Contains(fmt.Sprint(creds), authToken) {
		t.Fatal("credentials not returned, or printed")
	}
	if _, err := send(t, c); err != nil {
		t.Fatal(err)
	}
	if cb := fake.AcceptedRequests()[0].Form.Get("StatusCallback"); !strings.HasPrefix(cb, "https://h.example/v1/webhooks/twilio?") {
		t.Fatalf("StatusCallback = %q", cb)
	}
	for name, bad := range map[string]providers.ProviderConfig{
		"no sender": {Settings: json.RawMessage(`{"account_sid":"` + accountSID + `"}`), Secret: pc.Secret},
		"no token":  {Settings: pc.Settings, Secret: []byte(`{}`)},
		"bad sid":   {Settings: json.RawMessage(`{"account_sid":"XX","from":"+1"}`), Secret: pc.Secret},
	} {
		if _, _, err := twilio.FromConfig(bad, twilio.Process{}); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}
