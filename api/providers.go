package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/jsondecode"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/webhooks"
	"github.com/herald-notify/herald/providers"
)

// Per-tenant provider configuration: PUT /v1/providers/{channel},
// GET /v1/providers, DELETE /v1/providers/{channel}/{provider}.
//
// Credentials are write-only: they are validated, sealed by providers.Store
// (AES-GCM, bound to tenant/channel/provider) and never returned, echoed in an
// error message or logged. A response only says whether credentials are stored.

// maxProviderPriority bounds a provider config's priority.
const maxProviderPriority = 1000

// providersRoom holds the tenants' provider configs and push tokens, the
// providers' delivery receipt webhooks and, in development, the sandbox's
// outbox.
type providersRoom struct {
	responder
	store *store.Store
	users *userDirectory
	cfg   ProviderConfig
	// baseURL is how providers reach this API (Config.PublicBaseURL).
	baseURL string
	// emitter tells the tenant's status webhooks of a delivery a receipt moved.
	emitter *webhooks.Emitter
	// pushTokensPerUser caps a user's device tokens (UserConfig's).
	pushTokensPerUser int
}

func (h *providersRoom) register(v1, public gin.IRouter, mw *middleware) {
	v1.PUT("/providers/:channel", mw.audited(auditProviderPut, auditFields), h.putProvider)
	v1.GET("/providers", h.listProviders)
	v1.DELETE("/providers/:channel/:provider", mw.audited(auditProviderDelete, auditFields), h.deleteProvider)
	v1.PUT("/users/:user_id/push-tokens", mw.audited(auditPushTokenPut, auditFields), h.putPushToken)
	v1.GET("/users/:user_id/push-tokens", h.listPushTokens)
	v1.DELETE("/users/:user_id/push-tokens/:token", mw.audited(auditPushTokenDelete, auditFields), h.deletePushToken)
	public.GET("/v1/sandbox/messages", h.sandboxOn, mw.authenticate, h.listSandboxMessages)
	for _, p := range webhookProviders {
		public.POST(providers.WebhookPrefix+p, mw.limitPublic("webhook", h.webhookMaxBody(p), true), h.webhook(p))
	}
	for _, p := range inboundWebhookProviders {
		public.POST(providers.WebhookPrefix+p+providers.InboundSuffix, mw.limitPublic("webhook", h.webhookMaxBody(p), true), h.inboundWebhook(p))
	}
}

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
	Channel        herald.Channel  `json:"channel"`
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

// haveProviders answers 500 when the server was built without a provider store
// or registry.
func (h *providersRoom) haveProviders(c *gin.Context) bool {
	switch {
	case h.cfg.Store == nil:
		h.abort(c, errors.New("api: Config.Providers.Store is not set"))
		return false
	case h.cfg.Registry == nil:
		h.abort(c, errors.New("api: Config.Providers.Registry is not set"))
		return false
	}
	return true
}

// channelProviders lists the providers that can serve channel, in display order
// (none: not a provider channel).
func (h *providersRoom) channelProviders(channel herald.Channel) []string {
	return h.cfg.Registry.ForChannel(channel)
}

// providerChannel is how every handler under /providers/{channel} begins: the
// providers are wired (haveProviders) and the path's channel is one a provider
// serves. It returns the channel, or aborts c and returns false.
func (h *providersRoom) providerChannel(c *gin.Context) (herald.Channel, bool) {
	if !h.haveProviders(c) {
		return "", false
	}
	channel := herald.Channel(c.Param("channel"))
	if len(h.channelProviders(channel)) == 0 {
		h.abort(c, badField("channel", "unknown_channel", "channel must be email, sms or push"))
		return "", false
	}
	return channel, true
}

// putProvider creates or replaces the tenant's config of one provider on a channel.
// A body without credentials keeps the stored ones (required when creating).
func (h *providersRoom) putProvider(c *gin.Context) {
	channel, ok := h.providerChannel(c)
	if !ok {
		return
	}
	var req putProviderRequest
	if err := decodeJSON(c, &req); err != nil {
		h.abort(c, err)
		return
	}
	if req.Provider == nil || *req.Provider == "" {
		h.abort(c, badField("provider", "missing_field", "provider is required (%s)", strings.Join(h.channelProviders(channel), " or ")))
		return
	}
	provider := *req.Provider
	if !contains(h.channelProviders(channel), provider) {
		h.abort(c, badField("provider", "invalid_field", "provider for %s must be %s", channel, strings.Join(h.channelProviders(channel), " or ")))
		return
	}
	priority := 0
	if req.Priority != nil {
		priority = *req.Priority
		if priority < 0 || priority > maxProviderPriority {
			h.abort(c, badField("priority", "invalid_field", "priority must be an integer from 0 to %d", maxProviderPriority))
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
			h.abort(c, badField("rate_per_second", "invalid_field", "rate_per_second must be from 0 (no cap) to 100000"))
			return
		}
	}
	def, _ := h.cfg.Registry.Get(provider)
	settings, secret, verr := validateProviderConfig(c.Request.Context(), def, req.Settings, req.Credentials)
	if verr != nil {
		h.abort(c, verr)
		return
	}

	tenantID := tenantOf(c).ID
	ctx := c.Request.Context()
	existing, err := h.cfg.Store.GetProviderConfig(ctx, tenantID, channel, provider)
	created := errors.Is(err, herald.ErrNotFound)
	if err != nil && !created {
		h.abort(c, err)
		return
	}
	if secret == nil && def.NeedsCredentials && (created || !existing.HasSecret) {
		h.abort(c, badField("credentials", "missing_field", "credentials are required when a %s config is created", provider))
		return
	}
	if err := h.cfg.Store.PutProviderConfig(ctx, providers.ProviderConfig{
		TenantID: tenantID, Channel: channel, Provider: provider, Priority: priority, Enabled: enabled,
		Settings: settings, Secret: secret, RatePerSecond: rate,
	}); err != nil {
		h.abort(c, err)
		return
	}
	stored, err := h.cfg.Store.GetProviderConfig(ctx, tenantID, channel, provider)
	if err != nil {
		h.abort(c, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	c.JSON(status, viewProviderConfig(stored))
}

// listProviders lists the tenant's provider configs, enabled or not, in channel
// order and then the registry's order. No secrets.
func (h *providersRoom) listProviders(c *gin.Context) {
	if !h.haveProviders(c) {
		return
	}
	tenantID := tenantOf(c).ID
	items := []providerConfigView{}
	for _, ch := range herald.ProviderChannels {
		for _, p := range h.channelProviders(ch) {
			pc, err := h.cfg.Store.GetProviderConfig(c.Request.Context(), tenantID, ch, p)
			if errors.Is(err, herald.ErrNotFound) {
				continue
			}
			if err != nil {
				h.abort(c, err)
				return
			}
			items = append(items, viewProviderConfig(pc))
		}
	}
	c.JSON(http.StatusOK, gin.H{"items": items})
}

// deleteProvider removes one provider config; the channel falls back to the next
// configured provider, or to the sandbox when none is left.
func (h *providersRoom) deleteProvider(c *gin.Context) {
	channel, ok := h.providerChannel(c)
	if !ok {
		return
	}
	provider := c.Param("provider")
	if !contains(h.channelProviders(channel), provider) {
		h.abort(c, notFound("provider config"))
		return
	}
	ok, err := h.cfg.Store.DeleteProviderConfig(c.Request.Context(), tenantOf(c).ID, channel, provider)
	if err != nil {
		h.abort(c, err)
		return
	}
	if !ok {
		h.abort(c, notFound("provider config"))
		return
	}
	c.Status(http.StatusNoContent)
}

// validateProviderConfig checks settings and credentials with the provider's
// Validate and returns the settings to store (compact JSON) and the secret (nil
// when the body had no credentials). Error messages never include a
// credential's value.
func validateProviderConfig(ctx context.Context, def providers.Definition, rawSettings, rawCreds json.RawMessage) (json.RawMessage, []byte, *httpError) {
	var settings, creds json.RawMessage
	if !isAbsent(rawSettings) {
		settings = rawSettings
	}
	var secret []byte
	if !isAbsent(rawCreds) {
		if !jsondecode.IsObject(rawCreds) {
			return nil, nil, badField("credentials", "invalid_type", "credentials must be an object")
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, rawCreds); err != nil {
			return nil, nil, badField("credentials", "invalid_type", "credentials must be an object")
		}
		creds, secret = rawCreds, buf.Bytes()
	}
	stored, err := def.Validate(ctx, settings, creds)
	if err != nil {
		var fe *providers.FieldError
		if errors.As(err, &fe) {
			return nil, nil, fieldError(fe)
		}
		// Not a refusal the provider named: say nothing that could quote the config.
		return nil, nil, badField("settings", "invalid_field", "the %s config is not valid", def.Name)
	}
	return stored, secret, nil
}

// isAbsent: the field was not sent, or sent as null.
func isAbsent(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}
