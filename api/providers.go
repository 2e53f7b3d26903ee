package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/mail"
	"regexp"
	"strings"
	"time"
	"unicode"

	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/fcm"
	"github.com/herald-notify/herald/providers/sandbox"
	"github.com/herald-notify/herald/providers/sendgrid"
	"github.com/herald-notify/herald/providers/smtp"
	"github.com/herald-notify/herald/providers/twilio"
)

// Per-tenant provider configuration: PUT /v1/providers/{channel},
// GET /v1/providers, DELETE /v1/providers/{channel}/{provider}.
//
// Credentials are write-only: they are validated, sealed by providers.Store
// (AES-GCM, bound to tenant/channel/provider) and never returned, echoed in an
// error message or logged. A response only says whether credentials are stored.

// channelProviders lists which providers can serve a channel, in display order.
var channelProviders = map[string][]string{
	herald.ChannelEmail: {sendgrid.Name, smtp.Name, sandbox.Name},
	herald.ChannelSMS:   {twilio.Name, sandbox.Name},
	herald.ChannelPush:  {fcm.Name, sandbox.Name},
}

// providerChannels is the channel order of GET /v1/providers.
var providerChannels = []string{herald.ChannelEmail, herald.ChannelSMS, herald.ChannelPush}

// MaxProviderPriority bounds a provider config's priority.
const MaxProviderPriority = 1000

var (
	twilioAccountSID = regexp.MustCompile(`^AC[0-9a-fA-F]{32}$`)
	twilioServiceSID = regexp.MustCompile(`^MG[0-9a-fA-F]{32}$`)
	twilioAPIKeySID  = regexp.MustCompile(`^SK[0-9a-fA-F]{32}$`)
	// A Google Cloud project id: 6 to 30 lowercase letters, digits and hyphens,
	// starting with a letter and not ending with a hyphen.
	gcpProjectID = regexp.MustCompile(`^[a-z][a-z0-9-]{4,28}[a-z0-9]$`)
)

type putProviderRequest struct {
	Provider    *string         `json:"provider"`
	Settings    json.RawMessage `json:"settings"`
	Credentials json.RawMessage `json:"credentials"`
	Priority    *int            `json:"priority"`
	Enabled     *bool           `json:"enabled"`
	// RatePerSecond caps this account's sends across all workers (0 or absent: none).
	RatePerSecond *float64 `json:"rate_per_second"`
}

// providerConfigView is a provider config as the API shows it: never the secret.
type providerConfigView struct {
	Channel        string          `json:"channel"`
	Provider       string          `json:"provider"`
	Priority       int             `json:"priority"`
	Enabled        bool            `json:"enabled"`
	Settings       json.RawMessage `json:"settings"`
	HasCredentials bool            `json:"has_credentials"`
	RatePerSecond  float64         `json:"rate_per_second"`
	UpdatedAt      time.Time       `json:"updated_at"`
}

func viewProviderConfig(pc providers.ProviderConfig) providerConfigView {
	settings := pc.Settings
	if len(settings) == 0 {
		settings = json.RawMessage(`{}`)
	}
	return providerConfigView{Channel: pc.Channel, Provider: pc.Provider, Priority: pc.Priority, Enabled: pc.Enabled,
		Settings: settings, HasCredentials: pc.HasSecret, RatePerSecond: pc.RatePerSecond, UpdatedAt: pc.UpdatedAt.UTC()}
}

// twilioCredentials are the secret part of a Twilio config. WebhookAuthToken is
// the account's auth token, needed to verify status callbacks when auth_token is
// an API key secret (settings.api_key_sid set); twilio.FromConfig ignores it.
type twilioCredentials struct {
	AuthToken        string `json:"auth_token"`
	WebhookAuthToken string `json:"webhook_auth_token,omitempty"`
}

// webhookToken is the token Twilio signs status callbacks with.
func (c twilioCredentials) webhookToken() string {
	if c.WebhookAuthToken != "" {
		return c.WebhookAuthToken
	}
	return c.AuthToken
}

// haveProviders answers 500 when the server was built without a provider store.
func (s *Server) haveProviders(c *gin.Context) bool {
	if s.cfg.Providers == nil {
		s.abort(c, errors.New("api: Config.Providers is not set"))
		return false
	}
	return true
}

func validProviderChannel(channel string) *Error {
	if _, ok := channelProviders[channel]; !ok {
		return badField("channel", "unknown_channel", "channel must be email, sms or push")
	}
	return nil
}

// putProvider creates or replaces the tenant's config of one provider on a channel.
// A body without credentials keeps the stored ones (required when creating).
func (s *Server) putProvider(c *gin.Context) {
	if !s.haveProviders(c) {
		return
	}
	channel := c.Param("channel")
	if err := validProviderChannel(channel); err != nil {
		s.abort(c, err)
		return
	}
	var req putProviderRequest
	if err := decodeJSON(c, &req); err != nil {
		s.abort(c, err)
		return
	}
	if req.Provider == nil || *req.Provider == "" {
		s.abort(c, badField("provider", "missing_field", "provider is required (%s)", strings.Join(channelProviders[channel], " or ")))
		return
	}
	provider := *req.Provider
	if !contains(channelProviders[channel], provider) {
		s.abort(c, badField("provider", "invalid_field", "provider for %s must be %s", channel, strings.Join(channelProviders[channel], " or ")))
		return
	}
	priority := 0
	if req.Priority != nil {
		priority = *req.Priority
		if priority < 0 || priority > MaxProviderPriority {
			s.abort(c, badField("priority", "invalid_field", "priority must be an integer from 0 to %d", MaxProviderPriority))
			return
		}
	}
	enabled := true
	if req.Enabled != nil {
		enabled = *req.Enabled
	}
	rate := 0.0
	if req.RatePerSecond != nil {
		rate = *req.RatePerSecond
		if rate < 0 || rate > 100_000 {
			s.abort(c, badField("rate_per_second", "invalid_field", "rate_per_second must be from 0 (no cap) to 100000"))
			return
		}
	}
	settings, secret, verr := validateProviderConfig(c.Request.Context(), channel, provider, req.Settings, req.Credentials)
	if verr != nil {
		s.abort(c, verr)
		return
	}

	tenantID := tenantOf(c).ID
	ctx := c.Request.Context()
	existing, err := s.cfg.Providers.GetProviderConfig(ctx, tenantID, channel, provider)
	created := errors.Is(err, herald.ErrNotFound)
	if err != nil && !created {
		s.abort(c, err)
		return
	}
	if secret == nil && provider != sandbox.Name && (created || !existing.HasSecret) {
		s.abort(c, badField("credentials", "missing_field", "credentials are required when a %s config is created", provider))
		return
	}
	if err := s.cfg.Providers.PutProviderConfig(ctx, providers.ProviderConfig{
		TenantID: tenantID, Channel: channel, Provider: provider, Priority: priority, Enabled: enabled,
		Settings: settings, Secret: secret, RatePerSecond: rate,
	}); err != nil {
		s.abort(c, err)
		return
	}
	stored, err := s.cfg.Providers.GetProviderConfig(ctx, tenantID, channel, provider)
	if err != nil {
		s.abort(c, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	c.JSON(status, viewProviderConfig(stored))
}

// listProviders lists the tenant's provider configs, enabled or not, in channel
// order and then the order of channelProviders. No secrets.
func (s *Server) listProviders(c *gin.Context) {
	if !s.haveProviders(c) {
		return
	}
	tenantID := tenantOf(c).ID
	items := []providerConfigView{}
	for _, ch := range providerChannels {
		for _, p := range channelProviders[ch] {
			pc, err := s.cfg.Providers.GetProviderConfig(c.Request.Context(), tenantID, ch, p)
			if errors.Is(err, herald.ErrNotFound) {
				continue
			}
			if err != nil {
				s.abort(c, err)
				return
			}
			items = append(items, viewProviderConfig(pc))
		}
	}
	c.JSON(http.StatusOK, gin.H{"items": items})
}

// deleteProvider removes one provider config; the channel falls back to the next
// configured provider, or to the sandbox when none is left.
func (s *Server) deleteProvider(c *gin.Context) {
	if !s.haveProviders(c) {
		return
	}
	channel := c.Param("channel")
	if err := validProviderChannel(channel); err != nil {
		s.abort(c, err)
		return
	}
	provider := c.Param("provider")
	if !contains(channelProviders[channel], provider) {
		s.abort(c, notFound("provider config"))
		return
	}
	ok, err := s.cfg.Providers.DeleteProviderConfig(c.Request.Context(), tenantOf(c).ID, channel, provider)
	if err != nil {
		s.abort(c, err)
		return
	}
	if !ok {
		s.abort(c, notFound("provider config"))
		return
	}
	c.Status(http.StatusNoContent)
}

// validateProviderConfig checks settings and credentials for the provider and
// returns the settings to store (compact JSON) and the secret (nil when the body
// had no credentials). Error messages never include a credential's value.
func validateProviderConfig(ctx context.Context, channel, provider string, rawSettings, rawCreds json.RawMessage) (json.RawMessage, []byte, *Error) {
	hasSettings := !isAbsent(rawSettings)
	hasCreds := !isAbsent(rawCreds)
	var secret []byte
	if hasCreds {
		if !isJSONObject(rawCreds) {
			return nil, nil, badField("credentials", "invalid_type", "credentials must be an object")
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, rawCreds); err != nil {
			return nil, nil, badField("credentials", "invalid_type", "credentials must be an object")
		}
		secret = buf.Bytes()
	}

	switch provider {
	case sandbox.Name:
		if hasSettings {
			var none struct{}
			if err := decodeObject(rawSettings, "settings", &none); err != nil {
				return nil, nil, err
			}
		}
		if hasCreds {
			return nil, nil, badField("credentials", "invalid_field", "the sandbox provider takes no credentials")
		}
		return json.RawMessage(`{}`), nil, nil

	case smtp.Name:
		var st smtp.Settings
		if !hasSettings {
			return nil, nil, badField("settings.host", "missing_field", "settings.host is required")
		}
		if err := decodeObject(rawSettings, "settings", &st); err != nil {
			return nil, nil, err
		}
		switch {
		case st.Host == "" || len(st.Host) > 253 || strings.ContainsAny(st.Host, " /\r\n"):
			return nil, nil, badField("settings.host", "invalid_field", "settings.host must be the relay's host name")
		case st.Port < 0 || st.Port > 65535:
			return nil, nil, badField("settings.port", "invalid_field", "settings.port must be from 1 to 65535 (0: the TLS mode's default)")
		case st.From == "":
			return nil, nil, badField("settings.from", "missing_field", "settings.from is required")
		}
		if a, err := mail.ParseAddress(st.From); err != nil || a.Address != st.From {
			return nil, nil, badField("settings.from", "invalid_field", "settings.from must be a plain address such as noreply@example.com")
		}
		if hasCreds {
			var cr smtp.Credentials
			if err := decodeObject(rawCreds, "credentials", &cr); err != nil {
				return nil, nil, err
			}
		}
		if _, err := smtp.FromConfig(providers.ProviderConfig{Provider: smtp.Name, Settings: rawSettings, Secret: secret}); err != nil {
			return nil, nil, badField("settings", "invalid_field", "smtp settings: %v", err)
		}
		return marshalSettings(st), secret, nil

	case sendgrid.Name:
		var st sendgrid.Settings
		if !hasSettings {
			return nil, nil, badField("settings.from", "missing_field", "settings.from is required")
		}
		if err := decodeObject(rawSettings, "settings", &st); err != nil {
			return nil, nil, err
		}
		if st.From == "" {
			return nil, nil, badField("settings.from", "missing_field", "settings.from is required")
		}
		if a, err := mail.ParseAddress(st.From); err != nil || a.Address != st.From || len(st.From) > 254 {
			return nil, nil, badField("settings.from", "invalid_field", "settings.from must be a plain address such as noreply@example.com")
		}
		if len(st.FromName) > 200 || strings.ContainsAny(st.FromName, "\r\n") {
			return nil, nil, badField("settings.from_name", "invalid_field", "settings.from_name must be one line of at most 200 bytes")
		}
		if st.WebhookPublicKey != "" {
			if _, err := sendgrid.NewWebhookVerifier(st.WebhookPublicKey, 0); err != nil {
				return nil, nil, badField("settings.webhook_public_key", "invalid_field",
					"settings.webhook_public_key must be the base64 ECDSA P-256 public key SendGrid shows for the signed Event Webhook")
			}
		}
		if hasCreds {
			var cr sendgrid.Credentials
			if err := decodeObject(rawCreds, "credentials", &cr); err != nil {
				return nil, nil, err
			}
			if err := validSecret("credentials.api_key", cr.APIKey); err != nil {
				return nil, nil, err
			}
		}
		return marshalSettings(st), secret, nil

	case twilio.Name:
		var st twilio.Settings
		if !hasSettings {
			return nil, nil, badField("settings.account_sid", "missing_field", "settings.account_sid is required")
		}
		if err := decodeObject(rawSettings, "settings", &st); err != nil {
			return nil, nil, err
		}
		switch {
		case st.AccountSID == "":
			return nil, nil, badField("settings.account_sid", "missing_field", "settings.account_sid is required")
		case !twilioAccountSID.MatchString(st.AccountSID):
			return nil, nil, badField("settings.account_sid", "invalid_field", "settings.account_sid must be AC followed by 32 hex digits")
		case st.From == "" && st.MessagingServiceSID == "":
			return nil, nil, badField("settings.from", "missing_field", "set settings.from or settings.messaging_service_sid")
		case st.From != "" && !e164.MatchString(st.From):
			return nil, nil, badField("settings.from", "invalid_field", "settings.from must be in E.164 form, such as +14155550100")
		case st.MessagingServiceSID != "" && !twilioServiceSID.MatchString(st.MessagingServiceSID):
			return nil, nil, badField("settings.messaging_service_sid", "invalid_field", "settings.messaging_service_sid must be MG followed by 32 hex digits")
		case st.APIKeySID != "" && !twilioAPIKeySID.MatchString(st.APIKeySID):
			return nil, nil, badField("settings.api_key_sid", "invalid_field", "settings.api_key_sid must be SK followed by 32 hex digits")
		}
		if hasCreds {
			var cr twilioCredentials
			if err := decodeObject(rawCreds, "credentials", &cr); err != nil {
				return nil, nil, err
			}
			if err := validSecret("credentials.auth_token", cr.AuthToken); err != nil {
				return nil, nil, err
			}
			if cr.WebhookAuthToken != "" {
				if err := validSecret("credentials.webhook_auth_token", cr.WebhookAuthToken); err != nil {
					return nil, nil, err
				}
			} else if st.APIKeySID != "" {
				return nil, nil, badField("credentials.webhook_auth_token", "missing_field",
					"with settings.api_key_sid, credentials.auth_token is the API key secret: also give the account's auth token as credentials.webhook_auth_token to verify status callbacks")
			}
		}
		return marshalSettings(st), secret, nil

	case fcm.Name:
		var st fcm.Settings
		if !hasSettings {
			return nil, nil, badField("settings.project_id", "missing_field", "settings.project_id is required")
		}
		if err := decodeObject(rawSettings, "settings", &st); err != nil {
			return nil, nil, err
		}
		if st.ProjectID == "" {
			return nil, nil, badField("settings.project_id", "missing_field", "settings.project_id is required")
		}
		if !gcpProjectID.MatchString(st.ProjectID) {
			return nil, nil, badField("settings.project_id", "invalid_field", "settings.project_id must be a Firebase project id (6 to 30 lowercase letters, digits and hyphens)")
		}
		if hasCreds {
			if err := validServiceAccount(ctx, st, secret); err != nil {
				return nil, nil, err
			}
		}
		return marshalSettings(st), secret, nil
	}
	return nil, nil, badField("provider", "invalid_field", "provider for %s must be %s", channel, strings.Join(channelProviders[channel], " or "))
}

// validServiceAccount checks that creds is a Google service account key and that
// the FCM client accepts it (without calling FCM).
func validServiceAccount(ctx context.Context, st fcm.Settings, creds []byte) *Error {
	var sa struct {
		Type        string `json:"type"`
		ClientEmail string `json:"client_email"`
		PrivateKey  string `json:"private_key"`
	}
	if err := json.Unmarshal(creds, &sa); err != nil {
		return badField("credentials", "invalid_field", "credentials must be a Google service account key (the JSON file's object)")
	}
	switch {
	case sa.Type != "service_account":
		return badField("credentials.type", "invalid_field", "credentials.type must be service_account")
	case sa.ClientEmail == "":
		return badField("credentials.client_email", "missing_field", "credentials.client_email is required")
	case sa.PrivateKey == "":
		return badField("credentials.private_key", "missing_field", "credentials.private_key is required")
	case !strings.Contains(sa.PrivateKey, "PRIVATE KEY"):
		return badField("credentials.private_key", "invalid_field", "credentials.private_key must be a PEM private key")
	}
	settings, _ := json.Marshal(st)
	if _, err := fcm.FromConfig(ctx, providers.ProviderConfig{Channel: herald.ChannelPush, Provider: fcm.Name,
		Settings: settings, Secret: creds}, ""); err != nil {
		// The error may quote the key file; say only that it was refused.
		return badField("credentials", "invalid_field", "credentials are not a usable service account key")
	}
	return nil
}

// validSecret checks a required credential string without ever echoing it.
func validSecret(field, v string) *Error {
	if v == "" {
		return badField(field, "missing_field", "%s is required", field)
	}
	if len(v) > 1024 {
		return badField(field, "invalid_field", "%s must be at most 1024 bytes", field)
	}
	for _, r := range v {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return badField(field, "invalid_field", "%s must not contain whitespace or control characters", field)
		}
	}
	return nil
}

func marshalSettings(v any) json.RawMessage {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("api: settings of type %T do not marshal: %v", v, err)) // plain structs of strings
	}
	return raw
}

// isAbsent: the field was not sent, or sent as null.
func isAbsent(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

func isJSONObject(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '{'
}

// decodeObject strictly decodes a nested object field (unknown keys rejected),
// naming errors by their full path ("settings.from").
func decodeObject(raw json.RawMessage, name string, dst any) *Error {
	if !isJSONObject(raw) {
		return badField(name, "invalid_type", "%s must be an object", name)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		e := jsonError(err)
		switch e.Code {
		case "unknown_field":
			e.Message = fmt.Sprintf("unknown field %q in %s", e.Field, name)
			e.Field = name + "." + e.Field
		case "invalid_type":
			e.Field = name + "." + e.Field
			e.Message = name + "." + e.Message
		default:
			e.Field = name
		}
		return e
	}
	return nil
}
