// Package resolver picks the providers that send a tenant's message on a channel:
// the tenant's configured providers (credentials opened from provider_configs).
// When the tenant configured none, a process with Process.SandboxFallback (the
// dev stack, tests) uses the sandbox provider, so it runs end to end without
// accounts; any other process (production) gets providers.ErrNoProvider.
//
// Senders are built through the provider registry and kept: a config's sender
// (an HTTP client, FCM's OAuth token source) is built once per config version
// and reused by every delivery until the config changes, so FCM exchanges its
// service account key for a token once, not on every push. The cache is an LRU
// of at most Process.CacheSize configs, one sender per config: a config update
// replaces its entry, and a config evicted for being idle is built again when it
// is next used.
package resolver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"

	"github.com/herald-notify/herald/internal/egress"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/breaker"
	"github.com/herald-notify/herald/providers/fcm"
	"github.com/herald-notify/herald/providers/registry"
	"github.com/herald-notify/herald/providers/sandbox"
	"github.com/herald-notify/herald/providers/sendgrid"
	"github.com/herald-notify/herald/providers/twilio"
)

// Process holds the process-wide provider settings.
type Process struct {
	SendGridBaseURL string
	TwilioBaseURL   string
	FCMBaseURL      string
	// FCMTokenURL replaces Google's OAuth token endpoint for FCM service
	// accounts ("": the real one; tests point it at a fake). A key's own
	// token_uri is never used.
	FCMTokenURL string
	// PublicBaseURL is where providers reach Herald's webhooks.
	PublicBaseURL string
	// HTTPClient sets the provider API timeout (nil or 0: DefaultTimeout); its
	// Transport and CheckRedirect are not used: every provider request goes
	// through Egress's transport and follows no redirect.
	HTTPClient *http.Client
	// Egress is the policy every provider connection is made under, HTTP and
	// SMTP alike (nil: egress.Default(), which refuses loopback, private,
	// link-local and metadata addresses; HERALD_EGRESS_ALLOW).
	Egress *egress.Policy
	// WrapTransport, when set, wraps the provider HTTP clients' transport (the
	// egress policy's), for tracing; the wrapped transport still dials.
	WrapTransport func(http.RoundTripper) http.RoundTripper
	// Breaker tunes the per-account circuit breakers (zero: 5 failures, 30 s cool-down).
	Breaker breaker.Config
	// Registry lists the providers senders are built with (nil: registry.New()).
	Registry *providers.Registry
	// CacheSize bounds how many provider configs keep a built sender (0:
	// DefaultCacheSize).
	CacheSize int
	// SandboxFallback sends a channel the tenant configured no provider for
	// through the sandbox provider (HERALD_SANDBOX_FALLBACK; `herald dev` and the
	// tests). Without it such a channel has no chain: providers.ErrNoProvider.
	SandboxFallback bool
}

// DefaultTimeout bounds one provider API request when Process.HTTPClient sets
// no timeout.
const DefaultTimeout = 30 * time.Second

// DefaultCacheSize is the default bound of the sender cache: provider configs
// (a tenant has at most a few per channel) whose senders are kept.
const DefaultCacheSize = 10_000

// Configs reads a tenant's enabled provider configs of a channel in failover
// order; *providers.Store is one.
type Configs interface {
	ProviderConfigs(ctx context.Context, tenantID string, channel herald.Channel) ([]providers.ProviderConfig, error)
}

// Sender is one resolved provider for a channel.
type Sender = providers.Sender

// TwilioWebhookPath is where Twilio posts message status callbacks.
const TwilioWebhookPath = twilio.WebhookPath

// Resolver builds senders per tenant. It is safe for concurrent use.
type Resolver struct {
	configs  Configs
	reg      *providers.Registry
	env      providers.Env
	baseURLs map[string]string // provider name → API root ("": the real one)
	// tokenURLs: provider name → OAuth token endpoint ("": the real one)
	tokenURLs map[string]string
	sandbox   Sender
	// fallback: no configured provider → the sandbox (else ErrNoProvider).
	fallback bool
	// breakers live as long as the process: each worker learns a provider
	// account's health itself and stops hammering one that keeps failing.
	breakers *breaker.Set
	senders  *lru.Cache[string, cached] // tenant/channel/provider → its sender
	building singleflight.Group
	builds   atomic.Int64
}

// cached is the sender of one version of a config.
type cached struct {
	version string
	sender  Sender
}

// New returns a Resolver reading configs from store; sandboxRecorder records
// what the sandbox provider "sends".
func New(store Configs, proc Process, sandboxRecorder sandbox.Recorder) *Resolver {
	reg := proc.Registry
	if reg == nil {
		reg = registry.New()
	}
	size := proc.CacheSize
	if size <= 0 {
		size = DefaultCacheSize
	}
	senders, err := lru.New[string, cached](size)
	if err != nil {
		panic(err) // only for a size <= 0
	}
	policy := proc.Egress
	if policy == nil {
		policy = egress.Default()
	}
	timeout := DefaultTimeout
	if proc.HTTPClient != nil && proc.HTTPClient.Timeout > 0 {
		timeout = proc.HTTPClient.Timeout
	}
	hc := policy.Client(timeout)
	if proc.WrapTransport != nil {
		hc.Transport = proc.WrapTransport(hc.Transport)
	}
	return &Resolver{
		configs: store, reg: reg,
		env: providers.Env{PublicBaseURL: proc.PublicBaseURL, HTTPClient: hc, Egress: policy,
			Sandbox: sandboxRecorder},
		tokenURLs: map[string]string{fcm.Name: proc.FCMTokenURL},
		baseURLs: map[string]string{
			sendgrid.Name: proc.SendGridBaseURL, twilio.Name: proc.TwilioBaseURL, fcm.Name: proc.FCMBaseURL,
		},
		sandbox:  sandbox.Sender(sandbox.New(sandboxRecorder)),
		fallback: proc.SandboxFallback,
		breakers: breaker.NewSet(proc.Breaker),
		senders:  senders,
	}
}

// Chain returns the tenant's enabled providers for channel in failover order
// (lowest priority number first), each behind its circuit breaker. When the
// tenant configured none it is the sandbox alone with Process.SandboxFallback,
// else an error wrapping providers.ErrNoProvider.
func (r *Resolver) Chain(ctx context.Context, tenantID string, channel herald.Channel) ([]Sender, error) {
	cfgs, err := r.configs.ProviderConfigs(ctx, tenantID, channel)
	if err != nil {
		return nil, fmt.Errorf("load %s provider config: %w", channel, err)
	}
	if len(cfgs) == 0 {
		if !r.fallback {
			return nil, fmt.Errorf("%w for %s (PUT /v1/providers/%s)", providers.ErrNoProvider, channel, channel)
		}
		return []Sender{r.sandbox}, nil
	}
	chain := make([]Sender, 0, len(cfgs))
	for _, pc := range cfgs {
		s, err := r.sender(ctx, pc)
		if err != nil {
			return nil, fmt.Errorf("%s provider %s: %w", channel, pc.Provider, err)
		}
		chain = append(chain, s)
	}
	return chain, nil
}

// Builds counts the senders built so far (cache misses that succeeded).
func (r *Resolver) Builds() int64 { return r.builds.Load() }

// sender returns pc's sender: the cached one when it was built from this
// version of the config, else a new one (built once however many deliveries ask
// for it at the same time), which replaces the entry of any older version.
func (r *Resolver) sender(ctx context.Context, pc providers.ProviderConfig) (Sender, error) {
	key := pc.TenantID + "/" + string(pc.Channel) + "/" + pc.Provider
	version := configVersion(pc)
	if c, ok := r.senders.Get(key); ok && c.version == version {
		return c.sender, nil
	}
	v, err, _ := r.building.Do(key+"@"+version, func() (any, error) {
		if c, ok := r.senders.Get(key); ok && c.version == version {
			return c.sender, nil
		}
		// The sender outlives this delivery: nothing it keeps may be cancelled
		// with the delivery's context.
		s, err := r.build(context.WithoutCancel(ctx), pc)
		if err != nil {
			return nil, err // not cached: the next delivery tries again
		}
		r.senders.Add(key, cached{version: version, sender: s})
		return s, nil
	})
	if err != nil {
		return Sender{}, err
	}
	return v.(Sender), nil
}

func (r *Resolver) build(ctx context.Context, pc providers.ProviderConfig) (Sender, error) {
	def, ok := r.reg.Get(pc.Provider)
	if !ok {
		return Sender{}, errors.New("unknown provider " + pc.Provider)
	}
	env := r.env
	env.BaseURL, env.TokenURL = r.baseURLs[pc.Provider], r.tokenURLs[pc.Provider]
	s, err := def.Build(ctx, pc, env)
	if err != nil {
		return Sender{}, err
	}
	r.builds.Add(1)
	s.Provider = pc.Provider
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
	return s, nil
}

// configVersion names what a config's sender is built from: updated_at, which
// every write of the config moves, and a digest of the settings, credentials,
// priority and rate, so that two writes within one clock tick cannot share a
// sender either.
func configVersion(pc providers.ProviderConfig) string {
	h := sha256.New()
	for _, part := range [][]byte{pc.Settings, pc.Secret, []byte(strconv.Itoa(pc.Priority)),
		[]byte(strconv.FormatFloat(pc.RatePerSecond, 'g', -1, 64))} {
		h.Write([]byte(strconv.Itoa(len(part)) + ":"))
		h.Write(part)
	}
	return pc.UpdatedAt.UTC().Format(time.RFC3339Nano) + "/" + hex.EncodeToString(h.Sum(nil)[:16])
}
