package sandbox

import (
	"context"
	"encoding/json"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/providers"
)

// Definition is the sandbox for the provider registry: every provider channel,
// no settings, no credentials. It records into Env.Sandbox.
func Definition() providers.Definition {
	return providers.Definition{
		Name: Name, Channels: []herald.Channel{herald.ChannelEmail, herald.ChannelSMS, herald.ChannelPush},
		Validate: validate,
		Build: func(_ context.Context, _ providers.ProviderConfig, env providers.Env) (providers.Sender, error) {
			return Sender(New(env.Sandbox)), nil
		},
	}
}

// Sender is p for every channel.
func Sender(p *Provider) providers.Sender {
	return providers.Sender{Provider: Name, Email: p, SMS: p, Push: p}
}

func validate(_ context.Context, settings, credentials json.RawMessage) (json.RawMessage, error) {
	if settings != nil {
		var none struct{}
		if err := providers.DecodeObject(settings, "settings", &none); err != nil {
			return nil, err
		}
	}
	if credentials != nil {
		return nil, providers.BadField("credentials", "invalid_field", "the sandbox provider takes no credentials")
	}
	return json.RawMessage(`{}`), nil
}
