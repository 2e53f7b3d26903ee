package sendgrid

import (
	"encoding/json"
	"net/http"

	"github.com/herald-notify/herald/providers"
)

// Settings are the non-secret per-tenant settings (provider_configs.config).
type Settings struct {
	From     string `json:"from"`
	FromName string `json:"from_name,omitempty"`
	// WebhookPublicKey is the signed Event Webhook's verification key (base64 DER),
	// public by nature.
	WebhookPublicKey string `json:"webhook_public_key,omitempty"`
}

// Credentials are the secret part (provider_configs.secret_ciphertext, sealed).
type Credentials struct {
	APIKey string `json:"api_key"`
}

// String redacts the key so credentials can never be logged by accident.
func (Credentials) String() string { return "sendgrid.Credentials{[redacted]}" }

// FromConfig builds a Client from a stored provider config. baseURL and hc are
// process settings (empty/nil for the defaults).
func FromConfig(pc providers.ProviderConfig, baseURL string, hc *http.Client) (*Client, Settings, error) {
	var s Settings
	var c Credentials
	if err := json.Unmarshal(orEmpty(pc.Settings), &s); err != nil {
		return nil, s, providers.Errorf(Name, "config", "settings: %v", err)
	}
	if err := json.Unmarshal(orEmpty(pc.Secret), &c); err != nil {
		return nil, s, providers.Errorf(Name, "config", "credentials are not valid JSON")
	}
	if s.WebhookPublicKey != "" {
		if _, err := NewWebhookVerifier(s.WebhookPublicKey, 0); err != nil {
			return nil, s, providers.Errorf(Name, "config", "%v", err)
		}
	}
	cl, err := New(Config{APIKey: c.APIKey, BaseURL: baseURL, From: s.From, FromName: s.FromName, HTTPClient: hc})
	return cl, s, err
}

func orEmpty(b []byte) []byte {
	if len(b) == 0 {
		return []byte("{}")
	}
	return b
}
