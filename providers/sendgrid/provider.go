package sendgrid

import (
	"context"
	"encoding/json"
	"errors"
	"net/mail"
	"strings"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/providers"
)

// MaxWebhookBodyBytes caps an Event Webhook batch (SendGrid posts batches of at
// most 768 KB).
const MaxWebhookBodyBytes = 2 << 20

// WebhookQueryTenant is the webhook URL's optional query parameter naming the
// tenant (.../v1/webhooks/sendgrid?tenant=<tenant id>).
const WebhookQueryTenant = "tenant"

// Definition is SendGrid for the provider registry: email, with a signed Event
// Webhook.
func Definition() providers.Definition {
	return providers.Definition{
		Name: Name, Channels: []string{herald.ChannelEmail}, NeedsCredentials: true,
		Validate: validate,
		Build: func(_ context.Context, pc providers.ProviderConfig, env providers.Env) (providers.Sender, error) {
			c, _, err := FromConfig(pc, env.BaseURL, env.HTTPClient)
			if err != nil {
				return providers.Sender{}, err
			}
			return providers.Sender{Email: c}, nil
		},
		Webhook: &providers.Webhook{Channel: herald.ChannelEmail, MaxBodyBytes: MaxWebhookBodyBytes, Receive: receive},
	}
}

func validate(_ context.Context, settings, credentials json.RawMessage) (json.RawMessage, error) {
	var st Settings
	if settings == nil {
		return nil, providers.BadField("settings.from", "missing_field", "settings.from is required")
	}
	if err := providers.DecodeObject(settings, "settings", &st); err != nil {
		return nil, err
	}
	if st.From == "" {
		return nil, providers.BadField("settings.from", "missing_field", "settings.from is required")
	}
	if a, err := mail.ParseAddress(st.From); err != nil || a.Address != st.From || len(st.From) > 254 {
		return nil, providers.BadField("settings.from", "invalid_field", "settings.from must be a plain address such as noreply@example.com")
	}
	if len(st.FromName) > 200 || strings.ContainsAny(st.FromName, "\r\n") {
		return nil, providers.BadField("settings.from_name", "invalid_field", "settings.from_name must be one line of at most 200 bytes")
	}
	if st.WebhookPublicKey != "" {
		if _, err := NewWebhookVerifier(st.WebhookPublicKey, 0); err != nil {
			return nil, providers.BadField("settings.webhook_public_key", "invalid_field",
				"settings.webhook_public_key must be the base64 ECDSA P-256 public key SendGrid shows for the signed Event Webhook")
		}
	}
	if credentials != nil {
		var cr Credentials
		if err := providers.DecodeObject(credentials, "credentials", &cr); err != nil {
			return nil, err
		}
		if err := providers.ValidSecret("credentials.api_key", cr.APIKey); err != nil {
			return nil, err
		}
	}
	return providers.MarshalSettings(st), nil
}

func errNotEvents() error {
	return providers.BadField("", "malformed_json", "the body must be a JSON array of SendGrid events")
}

// receive handles the signed Event Webhook.
//
// The tenant is the WebhookQueryTenant parameter when present; events naming
// another tenant are then ignored. Without it, the tenant is the `tenant` custom
// arg Herald put on every message: all events of the batch that carry one must
// agree (400 otherwise), and a batch in which no event carries one names nothing
// Herald sent: it is acknowledged without being verified, since there is no key
// to verify it with and nothing to change.
func receive(ctx context.Context, req providers.WebhookRequest, config providers.ConfigLookup) (providers.WebhookBatch, error) {
	tenantID := req.HTTP.URL.Query().Get(WebhookQueryTenant)
	var receipts []providers.Receipt
	parsed := false
	if tenantID == "" {
		var err error
		if receipts, err = ParseEvents(req.Body); err != nil {
			return providers.WebhookBatch{}, errNotEvents()
		}
		parsed = true
		tenants := map[string]struct{}{}
		for _, r := range receipts {
			if r.TenantID != "" {
				tenants[r.TenantID] = struct{}{}
			}
		}
		switch len(tenants) {
		case 0:
			return providers.WebhookBatch{Receipts: receipts}, nil
		case 1:
			for t := range tenants {
				tenantID = t
			}
		default:
			return providers.WebhookBatch{}, providers.BadField("tenant", "ambiguous_tenant",
				"the events name %d different tenants; give the webhook URL a ?%s=<tenant id> parameter", len(tenants), WebhookQueryTenant)
		}
	}

	pc, err := config(ctx, tenantID)
	if err != nil {
		return providers.WebhookBatch{}, err
	}
	var st Settings
	if err := json.Unmarshal(pc.Settings, &st); err != nil || st.WebhookPublicKey == "" {
		return providers.WebhookBatch{}, providers.Unverified("no SendGrid webhook key is configured for the tenant")
	}
	v, err := NewWebhookVerifier(st.WebhookPublicKey, req.Tolerance)
	if err != nil {
		return providers.WebhookBatch{}, providers.Unverified("the tenant's SendGrid webhook key is not usable")
	}
	if err := v.Verify(req.HTTP.Header, req.Body); err != nil {
		switch {
		case errors.Is(err, ErrMissingSignature):
			return providers.WebhookBatch{}, providers.Unverified("the %s and %s headers are required", SignatureHeader, TimestampHeader)
		case errors.Is(err, ErrStaleTimestamp):
			return providers.WebhookBatch{}, providers.Unverified("the %s is missing, malformed or outside the accepted window", TimestampHeader)
		default:
			return providers.WebhookBatch{}, providers.Unverified("the signature does not verify")
		}
	}
	if !parsed {
		if receipts, err = ParseEvents(req.Body); err != nil {
			return providers.WebhookBatch{}, errNotEvents()
		}
	}
	return providers.WebhookBatch{TenantID: tenantID, Receipts: receipts}, nil
}
