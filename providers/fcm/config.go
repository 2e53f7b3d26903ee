package fcm

import (
	"context"
	"encoding/json"

	"github.com/herald-notify/herald/providers"
)

// Settings are the non-secret per-tenant settings (provider_configs.config).
type Settings struct {
	ProjectID string `json:"project_id"`
}

// FromConfig builds a Client from a stored provider config, whose secret is the
// service account key JSON. baseURL is a process setting ("" for the default).
func FromConfig(ctx context.Context, pc providers.ProviderConfig, baseURL string) (*Client, error) {
	var s Settings
	if len(pc.Settings) > 0 {
		if err := json.Unmarshal(pc.Settings, &s); err != nil {
			return nil, providers.Errorf(Name, "config", "settings: %v", err)
		}
	}
	if len(pc.Secret) > 0 && !json.Valid(pc.Secret) {
		return nil, providers.Errorf(Name, "config", "service account key is not valid JSON")
	}
	return New(ctx, Config{ProjectID: s.ProjectID, CredentialsJSON: pc.Secret, BaseURL: baseURL})
}
