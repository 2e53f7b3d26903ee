package twilio

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/providers"
)

// MaxWebhookBodyBytes caps a status callback (a score of short parameters,
// about 1 KB). The signature covers the sorted parameters, so the body is parsed
// before it can be verified: the cap bounds that work.
const MaxWebhookBodyBytes = 16 << 10

// WebhookPath is where Twilio posts message status callbacks.
const WebhookPath = providers.WebhookPrefix + Name

var (
	accountSID = regexp.MustCompile(`^AC[0-9a-fA-F]{32}$`)
	serviceSID = regexp.MustCompile(`^MG[0-9a-fA-F]{32}$`)
	apiKeySID  = regexp.MustCompile(`^SK[0-9a-fA-F]{32}$`)
	e164       = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)
)

// Definition is Twilio for the provider registry: SMS, with signed status
// callbacks.
func Definition() providers.Definition {
	return providers.Definition{
		Name: Name, Channels: []herald.Channel{herald.ChannelSMS}, NeedsCredentials: true,
		Validate: validate,
		Build: func(_ context.Context, pc providers.ProviderConfig, env providers.Env) (providers.Sender, error) {
			c, _, err := FromConfig(pc, Process{
				BaseURL:           env.BaseURL,
				StatusCallbackURL: strings.TrimRight(env.PublicBaseURL, "/") + WebhookPath,
				HTTPClient:        env.HTTPClient,
			})
			if err != nil {
				return providers.Sender{}, err
			}
			return providers.Sender{SMS: c}, nil
		},
		Webhook: &providers.Webhook{Channel: herald.ChannelSMS, MaxBodyBytes: MaxWebhookBodyBytes, Precheck: precheck, Receive: receive},
		Inbound: &providers.Webhook{Channel: herald.ChannelSMS, MaxBodyBytes: MaxWebhookBodyBytes, Precheck: precheck, Receive: receiveInbound},
	}
}

func validate(_ context.Context, settings, credentials json.RawMessage) (json.RawMessage, error) {
	var st Settings
	if settings == nil {
		return nil, providers.BadField("settings.account_sid", "missing_field", "settings.account_sid is required")
	}
	if err := providers.DecodeObject(settings, "settings", &st); err != nil {
		return nil, err
	}
	switch {
	case st.AccountSID == "":
		return nil, providers.BadField("settings.account_sid", "missing_field", "settings.account_sid is required")
	case !accountSID.MatchString(st.AccountSID):
		return nil, providers.BadField("settings.account_sid", "invalid_field", "settings.account_sid must be AC followed by 32 hex digits")
	case st.From == "" && st.MessagingServiceSID == "":
		return nil, providers.BadField("settings.from", "missing_field", "set settings.from or settings.messaging_service_sid")
	case st.From != "" && !e164.MatchString(st.From):
		return nil, providers.BadField("settings.from", "invalid_field", "settings.from must be in E.164 form, such as +14155550100")
	case st.MessagingServiceSID != "" && !serviceSID.MatchString(st.MessagingServiceSID):
		return nil, providers.BadField("settings.messaging_service_sid", "invalid_field", "settings.messaging_service_sid must be MG followed by 32 hex digits")
	case st.APIKeySID != "" && !apiKeySID.MatchString(st.APIKeySID):
		return nil, providers.BadField("settings.api_key_sid", "invalid_field", "settings.api_key_sid must be SK followed by 32 hex digits")
	}
	if credentials != nil {
		var cr Credentials
		if err := providers.DecodeObject(credentials, "credentials", &cr); err != nil {
			return nil, err
		}
		if err := providers.ValidSecret("credentials.auth_token", cr.AuthToken); err != nil {
			return nil, err
		}
		if cr.WebhookAuthToken != "" {
			if err := providers.ValidSecret("credentials.webhook_auth_token", cr.WebhookAuthToken); err != nil {
				return nil, err
			}
		} else if st.APIKeySID != "" {
			return nil, providers.BadField("credentials.webhook_auth_token", "missing_field",
				"with settings.api_key_sid, credentials.auth_token is the API key secret: also give the account's auth token as credentials.webhook_auth_token to verify status callbacks")
		}
	}
	return providers.MarshalSettings(st), nil
}

// receive handles a message status callback at the StatusCallback URL Herald set
// on each message (…/v1/webhooks/twilio?tenant=…&notification_id=…&channel=sms).
// X-Twilio-Signature is checked with the tenant's auth token over the public URL
// Twilio called: the public base URL (a proxy in front of Herald changes scheme
// and port) plus the path and raw query as received.
// precheck: a request naming no tenant or carrying no signature is refused
// before its body is read.
func precheck(r *http.Request, _ time.Duration) error {
	if r.URL.Query().Get(QueryTenant) == "" {
		return providers.Unverified("the callback URL names no tenant, so its signature cannot be checked")
	}
	if r.Header.Get(SignatureHeader) == "" {
		return providers.Unverified("the %s header is required", SignatureHeader)
	}
	return nil
}

// receive verifies a status callback: the body is parsed once, by the check (the
// signature covers the sorted parameters), in time linear in its size.
func receive(ctx context.Context, req providers.WebhookRequest, config providers.ConfigLookup) (providers.WebhookBatch, error) {
	tenantID := req.HTTP.URL.Query().Get(QueryTenant)
	form, err := verified(ctx, req, config)
	if err != nil {
		return providers.WebhookBatch{}, err
	}
	r, err := ParseStatusCallback(req.HTTP.URL.Query(), form, time.Now())
	if errors.Is(err, ErrNotDeliveryStatus) {
		return providers.WebhookBatch{TenantID: tenantID, Untracked: 1}, nil
	}
	if err != nil {
		return providers.WebhookBatch{}, err
	}
	return providers.WebhookBatch{TenantID: tenantID, Receipts: []providers.Receipt{r}}, nil
}

// verified checks a request's X-Twilio-Signature with the auth token of the
// tenant its URL names and returns its parameters.
func verified(ctx context.Context, req providers.WebhookRequest, config providers.ConfigLookup) (url.Values, error) {
	if err := precheck(req.HTTP, 0); err != nil {
		return nil, err
	}
	pc, err := config(ctx, req.HTTP.URL.Query().Get(QueryTenant))
	if err != nil {
		return nil, err
	}
	var cr Credentials
	if len(pc.Secret) == 0 || json.Unmarshal(pc.Secret, &cr) != nil || cr.WebhookToken() == "" {
		return nil, providers.Unverified("no Twilio credentials are configured for the tenant")
	}
	fullURL := PublicURL(req.PublicBaseURL, req.HTTP)
	form, err := NewWebhookValidator(cr.WebhookToken()).ValidateForm(fullURL, req.Body, req.HTTP.Header.Get(SignatureHeader))
	if err != nil {
		return nil, providers.Unverified("%s does not verify for %s", SignatureHeader, fullURL)
	}
	return form, nil
}

// receiveInbound handles an incoming message at the URL the tenant set as its
// Twilio number's messaging webhook (…/v1/webhooks/twilio/inbound?tenant=…),
// verified like a status callback: a STOP-family keyword lists the sender's
// number, a START-family one takes it off the list (ParseInbound); any other
// message is acknowledged and ignored.
func receiveInbound(ctx context.Context, req providers.WebhookRequest, config providers.ConfigLookup) (providers.WebhookBatch, error) {
	form, err := verified(ctx, req, config)
	if err != nil {
		return providers.WebhookBatch{}, err
	}
	tenantID := req.HTTP.URL.Query().Get(QueryTenant)
	e, ok := ParseInbound(form)
	if !ok {
		return providers.WebhookBatch{TenantID: tenantID, Untracked: 1}, nil
	}
	e.TenantID = tenantID
	return providers.WebhookBatch{TenantID: tenantID, Addresses: []providers.AddressEvent{e}}, nil
}
