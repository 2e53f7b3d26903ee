package registry_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/registry"
)

func TestChannelsAndWebhooks(t *testing.T) {
	reg := registry.New()
	for ch, want := range map[herald.Channel][]string{
		herald.ChannelEmail: {"sendgrid", "smtp", "sandbox"},
		herald.ChannelSMS:   {"twilio", "sandbox"},
		herald.ChannelPush:  {"fcm", "sandbox"},
		herald.ChannelInApp: nil,
	} {
		if got := reg.ForChannel(ch); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", ch, got, want)
		}
	}
	var hooks []string
	for _, d := range reg.All() {
		if d.Webhook != nil {
			hooks = append(hooks, d.Name+"/"+string(d.Webhook.Channel))
		}
		if d.NeedsCredentials == (d.Name == "sandbox") {
			t.Errorf("%s: NeedsCredentials = %t", d.Name, d.NeedsCredentials)
		}
	}
	if !slices.Equal(hooks, []string{"sendgrid/email", "twilio/sms"}) {
		t.Errorf("webhooks: %v", hooks)
	}
}

// A refusal is a FieldError naming the field, the settings to store are
// normalized (compact, unknown keys refused).
func TestValidateNamesTheField(t *testing.T) {
	reg := registry.New()
	sg, _ := reg.Get("sendgrid")
	settings, err := sg.Validate(context.Background(), json.RawMessage(`{ "from": "a@example.com" }`), json.RawMessage(`{"api_key":"SG.x"}`))
	if err != nil || string(settings) != `{"from":"a@example.com"}` {
		t.Fatalf("valid config: %s %v", settings, err)
	}
	_, err = sg.Validate(context.Background(), json.RawMessage(`{"from":"a@example.com"}`), json.RawMessage(`{"api_key":"SG x"}`))
	var fe *providers.FieldError
	if !errors.As(err, &fe) || fe.Field != "credentials.api_key" || fe.Code != "invalid_field" {
		t.Fatalf("bad key: %v", err)
	}
	sb, _ := reg.Get("sandbox")
	if _, err := sb.Validate(context.Background(), nil, json.RawMessage(`{}`)); !errors.As(err, &fe) || fe.Field != "credentials" {
		t.Fatalf("sandbox with credentials: %v", err)
	}
}
