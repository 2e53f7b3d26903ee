package smtp

import (
	"encoding/json"
	"time"

	"github.com/herald-notify/herald/internal/egress"
	"github.com/herald-notify/herald/providers"
)

// Settings are the non-secret per-tenant settings (provider_configs.config).
type Settings struct {
	Host string `json:"host"`
	// Port 0 (absent) means the TLS policy's default: 25, 587 or 465.
	Port     int    `json:"port,omitempty"`
	From     string `json:"from"`
	FromName string `json:"from_name,omitempty"`
	// TLS is "none", "starttls" (default) or "tls".
	TLS string `json:"tls,omitempty"`
	// TimeoutSeconds replaces DefaultTimeout when positive.
	TimeoutSeconds int `json:"timeout_seconds,omitempty"`
	// MessageIDDomain replaces DefaultMessageIDDomain (e.g. the tenant's sending
	// domain, which some spam filters prefer).
	MessageIDDomain string `json:"message_id_domain,omitempty"`
}

// Credentials are the secret part (provider_configs.secret_ciphertext, sealed).
// Both empty means the relay takes mail without AUTH.
type Credentials struct {
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
}

// String redacts both fields (some relays' usernames are access key ids) so
// credentials can never be logged by accident.
func (Credentials) String() string { return "smtp.Credentials{[redacted]}" }

// FromConfig builds a Client from a stored provider config; the relay is
// dialled under policy (nil: egress.Default()).
func FromConfig(pc providers.ProviderConfig, policy *egress.Policy) (*Client, error) {
	var s Settings
	var c Credentials
	if err := json.Unmarshal(orEmpty(pc.Settings), &s); err != nil {
		return nil, providers.Errorf(Name, "config", "settings: %v", err)
	}
	if err := json.Unmarshal(orEmpty(pc.Secret), &c); err != nil {
		return nil, providers.Errorf(Name, "config", "credentials are not valid JSON")
	}
	if c.Password != "" && c.Username == "" {
		return nil, providers.Errorf(Name, "config", "credentials have a password but no username")
	}
	if s.TimeoutSeconds < 0 {
		return nil, providers.Errorf(Name, "config", "timeout_seconds is negative")
	}
	return New(Config{
		Host: s.Host, Port: s.Port, TLS: TLSPolicy(s.TLS),
		Username: c.Username, Password: c.Password,
		From: s.From, FromName: s.FromName,
		Timeout:         time.Duration(s.TimeoutSeconds) * time.Second,
		MessageIDDomain: s.MessageIDDomain,
		Egress:          policy,
	})
}

func orEmpty(b []byte) []byte {
	if len(b) == 0 {
		return []byte("{}")
	}
	return b
}
