package twilio

import (
	"encoding/json"
	"net/http"

	"github.com/herald-notify/herald/providers"
)

// Settings are the non-secret per-tenant settings (provider_configs.config).
type Settings struct {
	AccountSID          string `json:"account_sid"`
	From                string `json:"from,omitempty"`
	MessagingServiceSID string `json:"messaging_service_sid,omitempty"`
	APIKeySID           string `json:"api_key_sid,omitempty"`
}

// Credentials are the secret part (provider_configs.secret_ciphertext, sealed). The
// auth token also validates the account's status callbacks, unless it is an API
// key's secret (settings.api_key_sid set): then WebhookAuthToken is the account's
// auth token, which Twilio signs status callbacks with (FromConfig ignores it).
type Credentials struct {
	AuthToken        string `json:"auth_token"`
	WebhookAuthToken string `json:"webhook_auth_token,omitempty"`
}

// WebhookToken is the token Twilio signs status callbacks with.
func (c Credentials) WebhookToken() string {
	if c.WebhookAuthToken != "" {
		return c.WebhookAuthToken
	}
	return c.AuthToken
}

// String redacts the token so credentials can never be logged by accident.
func (Credentials) String() string { return "twilio.Credentials{[redacted]}" }

// Process holds the process-wide settings FromConfig needs.
type Process struct {
	// BaseURL replaces https://api.twilio.com ("" for the default).
	BaseURL string
	// StatusCallbackURL is the public URL of Herald's Twilio webhook.
	StatusCallbackURL string
	HTTPClient        *http.Client
	IdempotencyHeader bool
}

// FromConfig builds a Client from a stored provider config; it also returns the
// credentials, whose auth token validates status callbacks.
func FromConfig(pc providers.ProviderConfig, p Process) (*Client, Credentials, error) {
	var s Settings
	var c Credentials
	if err := json.Unmarshal(orEmpty(pc.Settings), &s); err != nil {
		return nil, c, providers.Errorf(Name, "config", "settings: %v", err)
	}
	if err := json.Unmarshal(orEmpty(pc.Secret), &c); err != nil {
		return nil, Credentials{}, providers.Errorf(Name, "config", "credentials are not valid JSON")
	}
	if s.From == "" && s.MessagingServiceSID == "" {
		return nil, c, providers.Errorf(Name, "config", "set from or messaging_service_sid")
	}
	cl, err := New(Config{AccountSID: s.AccountSID, AuthToken: c.AuthToken, APIKeySID: s.APIKeySID, From: s.From,
		MessagingServiceSID: s.MessagingServiceSID, StatusCallbackURL: p.StatusCallbackURL, BaseURL: p.BaseURL,
		HTTPClient: p.HTTPClient, IdempotencyHeader: p.IdempotencyHeader})
	return cl, c, err
}

func orEmpty(b []byte) []byte {
	if len(b) == 0 {
		return []byte("{}")
	}
	return b
}
