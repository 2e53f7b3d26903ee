// Package resolver picks the provider that sends a tenant's message on a channel:
// the tenant's configured provider (credentials opened from provider_configs), or
// the sandbox provider when the tenant configured none, so a dev stack runs end to
// end without accounts.
package resolver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/fcm"
	"github.com/herald-notify/herald/providers/sandbox"
	"github.com/herald-notify/herald/providers/sendgrid"
	"github.com/herald-notify/herald/providers/twilio"
)

// Process holds the process-wide provider settings.
type Process struct {
	SendGridBaseURL string
	TwilioBaseURL   string
	FCMBaseURL      string
	// PublicBaseURL is where providers reach Herald's webhooks.
	PublicBaseURL string
	HTTPClient    *http.Client
}

// Resolver builds senders per tenant.
type Resolver struct {
	store   *providers.Store
	proc    Process
	sandbox *sandbox.Provider
}

// New returns a Resolver; sandboxRecorder records what the sandbox provider "sends".
func New(store *providers.Store, proc Process, sandboxRecorder sandbox.Recorder) *Resolver {
	return &Resolver{store: store, proc: proc, sandbox: sandbox.New(sandboxRecorder)}
}

// Sender is one resolved provider for a channel.
type Sender struct {
	// Provider is the provider's name, recorded on the delivery row.
	Provider string
	Email    providers.EmailSender
	SMS      providers.SMSSender
	Push     providers.PushSender
}

// TwilioWebhookPath is where Twilio posts message status callbacks.
const TwilioWebhookPath = "/v1/webhooks/twilio"

// Resolve returns the tenant's first enabled provider for channel (lowest priority
// number), or the sandbox.
func (r *Resolver) Resolve(ctx context.Context, tenantID, channel string) (Sender, error) {
	cfgs, err := r.store.ProviderConfigs(ctx, tenantID, channel)
	if err != nil {
		return Sender{}, fmt.Errorf("load %s provider config: %w", channel, err)
	}
	if len(cfgs) == 0 {
		return Sender{Provider: sandbox.Name, Email: r.sandbox, SMS: r.sandbox, Push: r.sandbox}, nil
	}
	return r.build(ctx, cfgs[0])
}

func (r *Resolver) build(ctx context.Context, pc providers.ProviderConfig) (Sender, error) {
	switch pc.Provider {
	case sendgrid.Name:
		c, _, err := sendgrid.FromConfig(pc, r.proc.SendGridBaseURL, r.proc.HTTPClient)
		return Sender{Provider: pc.Provider, Email: c}, err
	case twilio.Name:
		c, _, err := twilio.FromConfig(pc, twilio.Process{
			BaseURL:           r.proc.TwilioBaseURL,
			StatusCallbackURL: strings.TrimRight(r.proc.PublicBaseURL, "/") + TwilioWebhookPath,
			HTTPClient:        r.proc.HTTPClient,
		})
		return Sender{Provider: pc.Provider, SMS: c}, err
	case fcm.Name:
		c, err := fcm.FromConfig(ctx, pc, r.proc.FCMBaseURL)
		return Sender{Provider: pc.Provider, Push: c}, err
	case sandbox.Name:
		return Sender{Provider: sandbox.Name, Email: r.sandbox, SMS: r.sandbox, Push: r.sandbox}, nil
	default:
		return Sender{}, errors.New("unknown provider " + pc.Provider)
	}
}
