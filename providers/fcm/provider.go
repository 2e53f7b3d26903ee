package fcm

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/providers"
)

// A Google Cloud project id: 6 to 30 lowercase letters, digits and hyphens,
// starting with a letter and not ending with a hyphen.
var gcpProjectID = regexp.MustCompile(`^[a-z][a-z0-9-]{4,28}[a-z0-9]$`)

// Definition is FCM for the provider registry: push, no webhook (FCM sends no
// delivery receipts).
func Definition() providers.Definition {
	return providers.Definition{
		Name: Name, Channels: []string{herald.ChannelPush}, NeedsCredentials: true,
		Validate: validate,
		Build: func(ctx context.Context, pc providers.ProviderConfig, env providers.Env) (providers.Sender, error) {
			c, err := FromConfig(ctx, pc, env.BaseURL)
			if err != nil {
				return providers.Sender{}, err
			}
			return providers.Sender{Push: c}, nil
		},
	}
}

func validate(ctx context.Context, settings, credentials json.RawMessage) (json.RawMessage, error) {
	var st Settings
	if settings == nil {
		return nil, providers.BadField("settings.project_id", "missing_field", "settings.project_id is required")
	}
	if err := providers.DecodeObject(settings, "settings", &st); err != nil {
		return nil, err
	}
	if st.ProjectID == "" {
		return nil, providers.BadField("settings.project_id", "missing_field", "settings.project_id is required")
	}
	if !gcpProjectID.MatchString(st.ProjectID) {
		return nil, providers.BadField("settings.project_id", "invalid_field", "settings.project_id must be a Firebase project id (6 to 30 lowercase letters, digits and hyphens)")
	}
	if credentials != nil {
		if err := validServiceAccount(ctx, st, credentials); err != nil {
			return nil, err
		}
	}
	return providers.MarshalSettings(st), nil
}

// validServiceAccount checks that creds is a Google service account key and that
// the FCM client accepts it (without calling FCM).
func validServiceAccount(ctx context.Context, st Settings, creds []byte) error {
	var sa struct {
		Type        string `json:"type"`
		ClientEmail string `json:"client_email"`
		PrivateKey  string `json:"private_key"`
	}
	if err := json.Unmarshal(creds, &sa); err != nil {
		return providers.BadField("credentials", "invalid_field", "credentials must be a Google service account key (the JSON file's object)")
	}
	switch {
	case sa.Type != "service_account":
		return providers.BadField("credentials.type", "invalid_field", "credentials.type must be service_account")
	case sa.ClientEmail == "":
		return providers.BadField("credentials.client_email", "missing_field", "credentials.client_email is required")
	case sa.PrivateKey == "":
		return providers.BadField("credentials.private_key", "missing_field", "credentials.private_key is required")
	case !strings.Contains(sa.PrivateKey, "PRIVATE KEY"):
		return providers.BadField("credentials.private_key", "invalid_field", "credentials.private_key must be a PEM private key")
	}
	if _, err := FromConfig(ctx, providers.ProviderConfig{Channel: herald.ChannelPush, Provider: Name,
		Settings: providers.MarshalSettings(st), Secret: creds}, ""); err != nil {
		// The error may quote the key file; say only that it was refused.
		return providers.BadField("credentials", "invalid_field", "credentials are not a usable service account key")
	}
	return nil
}
