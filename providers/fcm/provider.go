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
		Name: Name, Channels: []herald.Channel{herald.ChannelPush}, NeedsCredentials: true,
		Validate: validate,
		Build: func(ctx context.Context, pc providers.ProviderConfig, env providers.Env) (providers.Sender, error) {
			c, err := FromConfig(ctx, pc, Process{BaseURL: env.BaseURL, TokenURL: env.TokenURL, HTTPClient: env.HTTPClient})
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

// ValidTokenURI reports whether a service account key's token_uri may be
// stored: Google's token endpoint, GoogleTokenURL, or one of the two older
// Google endpoints that keys created before 2019 name
// (https://accounts.google.com/o/oauth2/token,
// https://www.googleapis.com/oauth2/v4/token). It is only checked: whatever
// the key says, tokens are fetched from GoogleTokenURL.
func ValidTokenURI(uri string) bool {
	switch uri {
	case GoogleTokenURL, "https://accounts.google.com/o/oauth2/token", "https://www.googleapis.com/oauth2/v4/token":
		return true
	}
	return false
}

// validServiceAccount checks that creds is a Google service account key and that
// the FCM client accepts it (without calling FCM).
func validServiceAccount(ctx context.Context, st Settings, creds []byte) error {
	var sa struct {
		Type           string  `json:"type"`
		ClientEmail    string  `json:"client_email"`
		PrivateKey     string  `json:"private_key"`
		TokenURI       *string `json:"token_uri"`
		UniverseDomain *string `json:"universe_domain"`
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
	case sa.TokenURI != nil && !ValidTokenURI(*sa.TokenURI):
		// Not quoted back: it is the tenant's own input, but an error is no
		// place to echo a URL.
		return providers.BadField("credentials.token_uri", "invalid_field",
			"credentials.token_uri must be Google's token endpoint %s (Herald exchanges service account keys nowhere else)", GoogleTokenURL)
	case sa.UniverseDomain != nil && *sa.UniverseDomain != "googleapis.com":
		return providers.BadField("credentials.universe_domain", "invalid_field",
			"credentials.universe_domain must be googleapis.com (FCM is only sent through Google's public endpoints)")
	}
	if _, err := FromConfig(ctx, providers.ProviderConfig{Channel: herald.ChannelPush, Provider: Name,
		Settings: providers.MarshalSettings(st), Secret: creds}, Process{}); err != nil {
		// The error may quote the key file; say only that it was refused.
		return providers.BadField("credentials", "invalid_field", "credentials are not a usable service account key")
	}
	return nil
}
