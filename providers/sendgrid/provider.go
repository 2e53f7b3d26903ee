package sendgrid

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/mail"
	"strings"
	"time"

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
		Name: Name, Channels: []herald.Channel{herald.ChannelEmail}, NeedsCredentials: true,
		Validate: validate,
		Build: func(_ context.Context, pc providers.ProviderConfig, env providers.Env) (providers.Sender, error) {
			c, _, err := FromConfig(pc, env.BaseURL, env.HTTPClient)
			if err != nil {
				return providers.Sender{}, err
			}
			return providers.Sender{Email: c}, nil
		},
		Webhook: &providers.Webhook{Channel: herald.ChannelEmail, MaxBodyBytes: MaxWebhookBodyBytes, Precheck: precheck, Receive: receive},
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

// precheck: with the WebhookQueryTenant parameter, an unsigned or stale request
// is refused before its body is read.
func precheck(r *http.Request, tolerance time.Duration) error {
	if r.URL.Query().Get(WebhookQueryTenant) == "" {
		return nil
	}
	return unverified(CheckHeaders(r.Header, tolerance, time.Now()))
}

// unverified is the 401 for a verification error (nil for nil).
func unverified(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrMissingSignature):
		return providers.Unverified("the %s and %s headers are required", SignatureHeader, TimestampHeader)
	case errors.Is(err, ErrStaleTimestamp):
		return providers.Unverified("the %s is missing, malformed or outside the accepted window", TimestampHeader)
	default:
		return providers.Unverified("the signature does not verify")
	}
}

// receive handles the signed Event Webhook.
//
// The tenant is the WebhookQueryTenant parameter when present; events naming
// another tenant are then ignored. Without it, the tenant is the `tenant` custom
// arg Herald put on every message: all events of the batch that carry one must
// agree (400 otherwise), and a batch in which no event carries one names nothing
// Herald sent: it is acknowledged without being verified, since there is no key
// to verify it with and nothing to change.
//
// Nothing is decoded before the signature verifies: without the parameter the
// body is only scanned (ScanBatch: one pass, no allocation) for its tenant.
func receive(ctx context.Context, req providers.WebhookRequest, config providers.ConfigLookup) (providers.WebhookBatch, error) {
	ambiguous := providers.BadField("tenant", "ambiguous_tenant",
		"the events name more than one tenant; give the webhook URL a ?%s=<tenant id> parameter", WebhookQueryTenant)
	tenantID := req.HTTP.URL.Query().Get(WebhookQueryTenant)
	fromBody := tenantID == ""
	if fromBody {
		batch, err := ScanBatch(req.Body)
		if err != nil {
			return providers.WebhookBatch{}, errNotEvents()
		}
		switch len(batch.Tenants) {
		case 0:
			return providers.WebhookBatch{Untracked: batch.Events}, nil
		case 1:
			tenantID = batch.Tenants[0]
		default:
			return providers.WebhookBatch{}, ambiguous
		}
		if err := unverified(CheckHeaders(req.HTTP.Header, req.Tolerance, time.Now())); err != nil {
			return providers.WebhookBatch{}, err
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
		return providers.WebhookBatch{}, unverified(err)
	}
	parsed, err := ParseBatch(req.Body)
	if err != nil {
		return providers.WebhookBatch{}, errNotEvents()
	}
	if fromBody {
		// The scan does not decode escapes: the decoded events must agree.
		for _, r := range parsed.Receipts {
			if r.TenantID != "" && r.TenantID != tenantID {
				return providers.WebhookBatch{}, ambiguous
			}
		}
		for _, a := range parsed.Addresses {
			if a.TenantID != "" && a.TenantID != tenantID {
				return providers.WebhookBatch{}, ambiguous
			}
		}
	}
	return providers.WebhookBatch{TenantID: tenantID, Receipts: parsed.Receipts, Addresses: parsed.Addresses}, nil
}
