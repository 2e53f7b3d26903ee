package providers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"
	"unicode"

	"github.com/herald-notify/herald/internal/egress"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/jsondecode"
)

// Definition is one provider as the rest of Herald sees it: the channels it
// serves, how a tenant's config of it is checked, how a sender is built from a
// stored config, and how its delivery receipts are received. Each provider
// package has a Definition(); package registry lists them all. The API and the
// resolver only ever go through a Registry, never a provider package.
type Definition struct {
	// Name is the provider name in provider_configs, Results and Errors.
	Name string
	// Channels are the channels it can serve.
	Channels []herald.Channel
	// NeedsCredentials: a config of this provider cannot be created without
	// credentials.
	NeedsCredentials bool
	// Validate checks a config as a tenant sends it: settings and credentials
	// are the raw JSON, nil when absent (credentials, when present, are known to
	// be a JSON object). It returns the settings to store. A refusal is a
	// *FieldError naming the field ("settings.from"); it never quotes a
	// credential.
	Validate func(ctx context.Context, settings, credentials json.RawMessage) (json.RawMessage, error)
	// Build makes the sender of a stored config: only the channel senders of the
	// returned Sender are set (the resolver fills in the rest). It does not call
	// the provider. Senders are kept and shared for as long as the config does
	// not change, so they must be safe for concurrent use.
	Build func(ctx context.Context, pc ProviderConfig, env Env) (Sender, error)
	// Webhook is nil for a provider that posts no delivery receipts.
	Webhook *Webhook
	// Inbound, when set, receives the messages recipients send back (Twilio's
	// incoming SMS, for STOP and START), at WebhookPrefix + name + InboundSuffix;
	// its batches carry address events only.
	Inbound *Webhook
}

// InboundSuffix follows a provider's webhook path for its Inbound webhook
// (/v1/webhooks/twilio/inbound).
const InboundSuffix = "/inbound"

// Serves reports whether the provider can serve channel.
func (d Definition) Serves(channel herald.Channel) bool { return slices.Contains(d.Channels, channel) }

// Env is what building a sender takes from the process.
type Env struct {
	// BaseURL replaces the provider's API root ("": the real one; tests point it
	// at a fake).
	BaseURL string
	// TokenURL replaces the provider's OAuth token endpoint ("": the real one;
	// FCM's tests point it at a fake). Never taken from a tenant's config.
	TokenURL string
	// PublicBaseURL is where providers reach Herald's webhooks.
	PublicBaseURL string
	// HTTPClient is the client for provider APIs, on Egress's transport
	// (nil: the provider's default, on the default egress policy).
	HTTPClient *http.Client
	// Egress is the policy every connection a sender makes goes through: the
	// HTTP client above is built on it, and the SMTP relay is dialled through
	// it (nil: egress.Default(), which refuses every internal address).
	Egress *egress.Policy
	// Sandbox records what the sandbox provider "sends".
	Sandbox SandboxRecorder
}

// Sender is one provider account resolved to send a tenant's channel.
type Sender struct {
	// Provider is the provider's name, recorded on the delivery row.
	Provider string
	// Account identifies the provider account (its breaker and rate-limit key).
	Account string
	// RatePerSecond caps the account's sends across all workers (0: no cap).
	RatePerSecond float64
	Email         EmailSender
	SMS           SMSSender
	Push          PushSender
}

// FieldError is a config (or webhook request) refused for one field; the API
// answers 400 with its code, field and message.
type FieldError = jsondecode.Error

// BadField builds a FieldError.
func BadField(field, code, format string, args ...any) *FieldError {
	return jsondecode.Field(field, code, format, args...)
}

// DecodeObject strictly decodes raw, the object field called name
// ("settings", "credentials"), into dst: unknown keys are refused, and errors
// name the full path ("settings.from").
func DecodeObject(raw json.RawMessage, name string, dst any) *FieldError {
	return jsondecode.Object(raw, name, dst)
}

// ValidSecret checks a required credential string without ever echoing it.
func ValidSecret(field, v string) *FieldError {
	if v == "" {
		return BadField(field, "missing_field", "%s is required", field)
	}
	if len(v) > 1024 {
		return BadField(field, "invalid_field", "%s must be at most 1024 bytes", field)
	}
	for _, r := range v {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return BadField(field, "invalid_field", "%s must not contain whitespace or control characters", field)
		}
	}
	return nil
}

// MarshalSettings encodes validated settings (a plain struct) for storage.
func MarshalSettings(v any) json.RawMessage {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("providers: settings of type %T do not marshal: %v", v, err)) // plain structs of strings
	}
	return raw
}

// WebhookPrefix + the provider's name is where a provider posts its receipts
// (/v1/webhooks/sendgrid).
const WebhookPrefix = "/v1/webhooks/"

// Webhook receives the delivery receipts a provider posts to WebhookPrefix +
// its name. The
// request carries no API key: it is authenticated by the provider's signature,
// checked with the config of the tenant the request names.
type Webhook struct {
	// Channel is the channel whose deliveries the receipts are about.
	Channel herald.Channel
	// MaxBodyBytes caps the request body.
	MaxBodyBytes int64
	// Precheck, when set, refuses a request before its body is read (a missing
	// signature, a stale timestamp, no tenant named), so a forged request costs
	// no body read at all. It returns a *SignatureError.
	Precheck func(r *http.Request, tolerance time.Duration) error
	// Receive finds the tenant the request names, verifies the request with that
	// tenant's config (loaded with config) and returns the receipts. A refusal
	// is a *SignatureError (401) or a *FieldError (400); any other error is
	// Herald's (500, the provider retries).
	Receive func(ctx context.Context, req WebhookRequest, config ConfigLookup) (WebhookBatch, error)
}

// ConfigLookup returns a tenant's config of the provider whose webhook is
// called: the zero ProviderConfig when the tenant has none.
type ConfigLookup func(ctx context.Context, tenantID string) (ProviderConfig, error)

// WebhookRequest is a webhook call as received.
type WebhookRequest struct {
	// HTTP is the request (its body already read into Body).
	HTTP *http.Request
	// Body is the raw body, exactly as received: signatures are over these bytes.
	Body []byte
	// PublicBaseURL is how the provider reaches Herald (scheme://host[:port]).
	PublicBaseURL string
	// Tolerance bounds the age of a signed timestamp (0: the provider's default).
	Tolerance time.Duration
}

// WebhookBatch is what a verified webhook request holds.
type WebhookBatch struct {
	// TenantID is the tenant the request was verified for; "" when the request
	// names no tenant at all: it is acknowledged and changes nothing.
	TenantID string
	// Receipts are the delivery receipts, in request order.
	Receipts []Receipt
	// Addresses are the events that put an address on the tenant's
	// suppression list or take it off (a SendGrid hard bounce or spam
	// report, a Twilio inbound STOP or START), in request order.
	Addresses []AddressEvent
	// Untracked counts events that are not receipts Herald tracks (a Twilio
	// inbound message): received and ignored.
	Untracked int
}

// SignatureError refuses a webhook request that does not verify; the API
// answers 401 with Message.
type SignatureError struct{ Message string }

func (e *SignatureError) Error() string { return e.Message }

// Unverified builds a SignatureError.
func Unverified(format string, args ...any) *SignatureError {
	return &SignatureError{Message: fmt.Sprintf(format, args...)}
}

// Registry is the set of providers Herald can configure, by name.
type Registry struct {
	defs  []Definition
	index map[string]int
}

// NewRegistry returns a registry of defs, in the order given (the order the API
// lists a channel's providers in). It panics on a duplicate or incomplete
// definition: the list is fixed at build time.
func NewRegistry(defs ...Definition) *Registry {
	r := &Registry{index: map[string]int{}}
	for _, d := range defs {
		if d.Name == "" || len(d.Channels) == 0 || d.Validate == nil || d.Build == nil {
			panic(fmt.Sprintf("providers: incomplete definition %q", d.Name))
		}
		if _, dup := r.index[d.Name]; dup {
			panic("providers: provider " + d.Name + " registered twice")
		}
		for _, wh := range []*Webhook{d.Webhook, d.Inbound} {
			if wh != nil && (wh.Receive == nil || wh.Channel == "" || wh.MaxBodyBytes <= 0) {
				panic("providers: incomplete webhook of " + d.Name)
			}
		}
		r.index[d.Name] = len(r.defs)
		r.defs = append(r.defs, d)
	}
	return r
}

// Get returns the named provider.
func (r *Registry) Get(name string) (Definition, bool) {
	i, ok := r.index[name]
	if !ok {
		return Definition{}, false
	}
	return r.defs[i], true
}

// ForChannel returns the names of the providers that can serve channel, in
// registry order (none for an unknown channel).
func (r *Registry) ForChannel(channel herald.Channel) []string {
	var names []string
	for _, d := range r.defs {
		if d.Serves(channel) {
			names = append(names, d.Name)
		}
	}
	return names
}

// All returns every definition, in registry order.
func (r *Registry) All() []Definition { return slices.Clone(r.defs) }
