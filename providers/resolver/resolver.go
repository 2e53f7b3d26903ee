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
	"github.com/herald-notify/herald/providers/breaker"
	"github.com/herald-notify/herald/providers/fcm"
	"github.com/herald-notify/herald/providers/sandbox"
	"github.com/herald-notify/herald/providers/sendgrid"
	"github.com/herald-notify/herald/providers/smtp"
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
	// Breaker tunes the per-account circuit breakers (zero: 5 failures, 30 s cool-down).
	Breaker breaker.Config
}

// Resolver builds senders per tenant.
type Resolver struct {
	store   *providers.Store
	proc    Process
	sandbox *sandbox.Provider
	// breakers live as long as the process: each worker learns a provider
	// account's health itself and stops hammering one that keeps failing.
	breakers *breaker.Set
}

// New returns a Resolver; sandboxRecorder records what the sandbox provider "sends".
func New(store *providers.Store, proc Process, sandboxRecorder sandbox.Recorder) *Resolver {
	return &Resolver{store: store, proc: proc, sandbox: sandbox.New(sandboxRecorder), breakers: breaker.NewSet(proc.Breaker)}
}

// Sender is one resolved provider for a channel.
type Sender struct {
	// Provider is the provider's name, recorded on the delivery row.
	Provider string
	// Account identifies the provider account (its breaker and rate-limit key).
	Account string
	// RatePerSecond caps the account's sends across all workers (0: no cap).
	RatePerSecond float64
	Email         providers.EmailSender
	SMS           providers.SMSSender
	Push          providers.PushSender
}

// TwilioWebhookPath is where Twilio posts message status callbacks.
const TwilioWebhookPath = "/v1/webhooks/twilio"

// Chain returns the tenant's enabled providers for channel in failover order
// (lowest priority number first), each behind its circuit breaker; or the sandbox
// alone when the tenant configured none.
func (r *Resolver) Chain(ctx context.Context, tenantID, channel string) ([]Sender, error) {
	cfgs, err := r.store.ProviderConfigs(ctx, tenantID, channel)
	if err != nil {
		return nil, fmt.Errorf("load %s provider config: %w", channel, err)
	}
	if len(cfgs) == 0 {
		return []Sender{r.sandboxSender()}, nil
	}
	chain := make([]Sender, 0, len(cfgs))
	for _, pc := range cfgs {
		s, err := r.build(ctx, pc)
		if err != nil {
			return nil, fmt.Errorf("%s provider %s: %w", channel, pc.Provider, err)
		}
		s.Account, s.RatePerSecond = breaker.Key(pc), pc.RatePerSecond
		if s.Provider != sandbox.Name {
			key := s.Account
			if s.Email != nil {
				s.Email = r.breakers.Email(key, s.Provider, s.Email)
			}
			if s.SMS != nil {
				s.SMS = r.breakers.SMS(key, s.Provider, s.SMS)
			}
			if s.Push != nil {
				s.Push = r.breakers.Push(key, s.Provider, s.Push)
			}
		}
		chain = append(chain, s)
	}
	return chain, nil
}

func (r *Resolver) sandboxSender() Sender {
	return Sender{Provider: sandbox.Name, Email: r.sandbox, SMS: r.sandbox, Push: r.sandbox}
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
	case smtp.Name:
		c, err := smtp.FromConfig(pc)
		if err != nil {
			return Sender{}, err
		}
		return Sender{Provider: pc.Provider, Email: c}, nil
	case sandbox.Name:
		return r.sandboxSender(), nil
	default:
		return Sender{}, errors.New("unknown provider " + pc.Provider)
	}
}
