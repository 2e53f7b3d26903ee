package smtp

import (
	"context"
	"encoding/json"
	"net/mail"
	"strings"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/providers"
)

// Definition is an SMTP relay for the provider registry: email, no webhook
// (SMTP has no delivery receipts).
func Definition() providers.Definition {
	return providers.Definition{
		Name: Name, Channels: []herald.Channel{herald.ChannelEmail}, NeedsCredentials: true,
		Validate: validate,
		Build: func(_ context.Context, pc providers.ProviderConfig, env providers.Env) (providers.Sender, error) {
			c, err := FromConfig(pc, env.Egress)
			if err != nil {
				return providers.Sender{}, err
			}
			return providers.Sender{Email: c}, nil
		},
	}
}

func validate(_ context.Context, settings, credentials json.RawMessage) (json.RawMessage, error) {
	var st Settings
	if settings == nil {
		return nil, providers.BadField("settings.host", "missing_field", "settings.host is required")
	}
	if err := providers.DecodeObject(settings, "settings", &st); err != nil {
		return nil, err
	}
	switch {
	case st.Host == "" || len(st.Host) > 253 || strings.ContainsAny(st.Host, " /\r\n"):
		return nil, providers.BadField("settings.host", "invalid_field", "settings.host must be the relay's host name")
	case st.Port < 0 || st.Port > 65535:
		return nil, providers.BadField("settings.port", "invalid_field", "settings.port must be from 1 to 65535 (0: the TLS mode's default)")
	case st.From == "":
		return nil, providers.BadField("settings.from", "missing_field", "settings.from is required")
	}
	if a, err := mail.ParseAddress(st.From); err != nil || a.Address != st.From {
		return nil, providers.BadField("settings.from", "invalid_field", "settings.from must be a plain address such as noreply@example.com")
	}
	if credentials != nil {
		var cr Credentials
		if err := providers.DecodeObject(credentials, "credentials", &cr); err != nil {
			return nil, err
		}
	}
	if _, err := FromConfig(providers.ProviderConfig{Provider: Name, Settings: settings, Secret: credentials}, nil); err != nil {
		return nil, providers.BadField("settings", "invalid_field", "smtp settings: %v", err)
	}
	return providers.MarshalSettings(st), nil
}
