package fcm

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/herald-notify/herald/providers"
)

// Settings are the non-secret per-tenant settings (provider_configs.config).
type Settings struct {
	ProjectID string `json:"project_id"`
}

// Process holds the process-wide settings FromConfig needs.
type Process struct {
	// BaseURL replaces https://fcm.googleapis.com/ ("" for the default).
	BaseURL string
	// TokenURL replaces GoogleTokenURL ("" for the default).
	TokenURL string
	// HTTPClient carries the token exchange and the FCM calls (see
	// Config.HTTPClient).
	HTTPClient *http.Client
}

// FromConfig builds a Client from a stored provider config, whose secret is the
// service account key JSON. The key's token_uri is ignored: tokens come from
// p.TokenURL or Google's endpoint.
func FromConfig(ctx context.Context, pc providers.ProviderConfig, p Process) (*Client, error) {
	var s Settings
	if len(pc.Settings) > 0 {
		if err := json.Unmarshal(pc.Settings, &s); err != nil {
			return nil, providers.Errorf(Name, "config", "settings: %v", err)
		}
	}
	if len(pc.Secret) > 0 && !json.Valid(pc.Secret) {
		return nil, providers.Errorf(Name, "config", "service account key is not valid JSON")
	}
	return New(ctx, Config{ProjectID: s.ProjectID, CredentialsJSON: pc.Secret, BaseURL: p.BaseURL, TokenURL: p.TokenURL, HTTPClient: p.HTTPClient})
}
