// Package breaker puts a circuit breaker (github.com/sony/gobreaker/v2) in front of
// any EmailSender, SMSSender or PushSender, one breaker per provider account, so a
// provider that keeps failing is skipped for a while instead of hammered, and a
// failover chain moves on to the next provider at once.
//
// # What trips it
//
// A breaker opens after Config.Failures consecutive failures that say something
// about the provider's health: retryable *providers.Error values (5xx, 429, SMTP
// 4xx, timeouts, refused connections) and errors that are not *providers.Error at
// all (which package providers treats as retryable). Permanent errors (an invalid
// address, an unsubscribed recipient, a dead push token, rejected credentials) are
// excluded: the provider answered, the message or its configuration was wrong, and
// neither counts as success nor failure. Context cancellation (the caller gave up)
// and circuit_open errors of an inner breaker are excluded too. A success resets
// the count.
//
// While open, a call returns at once, without calling the provider, a retryable
// *providers.Error{Code: "circuit_open"} whose RetryAfter is the time left until
// the breaker half-opens. After Config.CoolDown it half-opens: Config.Probes calls
// go through; if they succeed it closes, if one fails it opens again for another
// cool-down. Calls beyond the probes while half-open also get circuit_open.
//
// # Why process-local state is enough
//
// A Set lives in one worker process; workers do not share breaker state. That is
// deliberate: each worker learns a provider's health itself, at the cost of at most
// Failures failing calls per worker per cool-down, which is bounded and small (ten
// workers, five failures, 30 s cool-down: at most 50 calls to a dead provider per
// 30 s, against thousands without a breaker). The rest is spread by Temporal: a
// circuit_open error is retryable, so the activity retries with backoff, possibly
// on another worker whose breaker will trip on its own after a few calls. A shared
// breaker (in PostgreSQL or Redis) would put a network round trip and a new
// failure mode in front of every send to protect a provider from a handful of
// extra calls, and a false "open" shared across the fleet would stop all sending
// through a healthy provider. The breaker is an optimisation for latency and
// politeness, never a correctness mechanism: delivery guarantees come from the
// (notification_id, channel) guard, not from it.
package breaker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/herald-notify/herald/providers"
)

// CodeOpen is the providers.Error Code returned while a breaker is open.
const CodeOpen = "circuit_open"

// Defaults.
const (
	DefaultFailures = 5
	DefaultCoolDown = 30 * time.Second
	DefaultProbes   = 1
)

// State is a breaker's state.
type State = gobreaker.State

// States.
const (
	StateClosed   = gobreaker.StateClosed
	StateHalfOpen = gobreaker.StateHalfOpen
	StateOpen     = gobreaker.StateOpen
)

// Config configures breakers. The zero Config uses the defaults.
type Config struct {
	// Failures is how many consecutive counted failures open the breaker
	// (default 5).
	Failures uint32
	// CoolDown is how long an open breaker refuses calls before it half-opens
	// (default 30 s).
	CoolDown time.Duration
	// Probes is how many calls a half-open breaker lets through; that many
	// successes close it (default 1).
	Probes uint32
	// Window, when positive, clears the failure count of a closed breaker every
	// Window, so failures far apart in time never add up to Failures. 0 never
	// clears it (a success still resets the consecutive count).
	Window time.Duration
	// Counts overrides which errors count: it returns true for an error that
	// counts as a failure, false for one that is ignored. nil means
	// CountsAsFailure.
	Counts func(err error) bool
	// OnStateChange, when set, is called on every transition (for logs and
	// metrics). It runs while the breaker is locked: do not call back into it.
	OnStateChange func(key string, from, to State)
}

func (c Config) withDefaults() Config {
	if c.Failures == 0 {
		c.Failures = DefaultFailures
	}
	if c.CoolDown <= 0 {
		c.CoolDown = DefaultCoolDown
	}
	if c.Probes == 0 {
		c.Probes = DefaultProbes
	}
	if c.Counts == nil {
		c.Counts = CountsAsFailure
	}
	return c
}

// CountsAsFailure is the default failure rule: retryable provider errors and
// non-provider errors count; permanent errors, context cancellation and
// circuit_open errors do not.
func CountsAsFailure(err error) bool {
	if err == nil {
		return false
	}
	if pe, ok := providers.AsError(err); ok {
		return !pe.Permanent && pe.Code != CodeOpen && pe.Code != "canceled"
	}
	return !errors.Is(err, context.Canceled)
}

// IsOpen reports whether err is a breaker's circuit_open error.
func IsOpen(err error) bool {
	pe, ok := providers.AsError(err)
	return ok && pe.Code == CodeOpen
}

// Breaker is one circuit breaker, for one provider account. It is safe for
// concurrent use.
type Breaker struct {
	key      string
	cfg      Config
	cb       *gobreaker.CircuitBreaker[providers.Result]
	openedAt atomic.Int64 // unix nanos of the last transition to open
}

// New returns a closed breaker named key.
func New(key string, cfg Config) *Breaker {
	cfg = cfg.withDefaults()
	b := &Breaker{key: key, cfg: cfg}
	counts := cfg.Counts
	b.cb = gobreaker.NewCircuitBreaker[providers.Result](gobreaker.Settings{
		Name:        key,
		MaxRequests: cfg.Probes,
		Interval:    cfg.Window,
		Timeout:     cfg.CoolDown,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= cfg.Failures },
		// Anything not excluded and not counted as a failure is a success
		// (the provider answered).
		IsSuccessful: func(err error) bool { return err == nil || !counts(err) },
		IsExcluded:   func(err error) bool { return err != nil && !counts(err) },
		OnStateChange: func(name string, from, to gobreaker.State) {
			if to == gobreaker.StateOpen {
				b.openedAt.Store(time.Now().UnixNano())
			}
			if cfg.OnStateChange != nil {
				cfg.OnStateChange(name, from, to)
			}
		},
	})
	return b
}

// Key returns the breaker's key.
func (b *Breaker) Key() string { return b.key }

// State returns the current state (an open breaker whose cool-down passed reports
// half-open).
func (b *Breaker) State() State { return b.cb.State() }

// Counts returns the current counts (requests, successes, failures, consecutive
// ones) of the breaker's current generation.
func (b *Breaker) Counts() gobreaker.Counts { return b.cb.Counts() }

// Do runs call through the breaker. provider names the provider in the
// circuit_open error. While the breaker is open, call is not run.
func (b *Breaker) Do(provider string, call func() (providers.Result, error)) (providers.Result, error) {
	res, err := b.cb.Execute(call)
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		return providers.Result{}, b.openError(provider, err)
	}
	return res, err
}

func (b *Breaker) openError(provider string, err error) *providers.Error {
	pe := &providers.Error{Provider: provider, Code: CodeOpen, Err: err}
	if errors.Is(err, gobreaker.ErrTooManyRequests) {
		pe.Reason = fmt.Sprintf("circuit breaker %s is half-open and its probe is in flight: provider skipped", b.key)
		pe.RetryAfter = time.Second
		return pe
	}
	left := b.cfg.CoolDown
	if at := b.openedAt.Load(); at != 0 {
		left = b.cfg.CoolDown - time.Since(time.Unix(0, at))
	}
	if left < time.Millisecond {
		left = time.Millisecond
	}
	pe.RetryAfter = left
	pe.Reason = fmt.Sprintf("circuit breaker %s is open after %d consecutive failures: provider skipped for %s", b.key, b.cfg.Failures, left.Round(time.Millisecond))
	return pe
}

// Email wraps s; provider names it in circuit_open errors.
func (b *Breaker) Email(provider string, s providers.EmailSender) providers.EmailSender {
	return &emailSender{b: b, provider: provider, next: s}
}

// SMS wraps s; provider names it in circuit_open errors.
func (b *Breaker) SMS(provider string, s providers.SMSSender) providers.SMSSender {
	return &smsSender{b: b, provider: provider, next: s}
}

// Push wraps s; provider names it in circuit_open errors.
func (b *Breaker) Push(provider string, s providers.PushSender) providers.PushSender {
	return &pushSender{b: b, provider: provider, next: s}
}

type emailSender struct {
	b        *Breaker
	provider string
	next     providers.EmailSender
}

func (s *emailSender) SendEmail(ctx context.Context, msg providers.EmailMessage, key string, tags providers.Tags) (providers.Result, error) {
	return s.b.Do(s.provider, func() (providers.Result, error) { return s.next.SendEmail(ctx, msg, key, tags) })
}

// MaxEmailBatch is the wrapped sender's (0 when it cannot batch).
func (s *emailSender) MaxEmailBatch() int {
	if b, ok := s.next.(providers.BatchEmailSender); ok {
		return b.MaxEmailBatch()
	}
	return 0
}

// SendEmailBatch sends through the wrapped sender's batch call, behind the same
// circuit as its single sends.
func (s *emailSender) SendEmailBatch(ctx context.Context, msg providers.EmailMessage, to []providers.BatchRecipient) (providers.Result, error) {
	b, ok := s.next.(providers.BatchEmailSender)
	if !ok || b.MaxEmailBatch() == 0 {
		return providers.Result{}, providers.Errorf(s.provider, "bad_request", "provider %s cannot send email in batches", s.provider)
	}
	return s.b.Do(s.provider, func() (providers.Result, error) { return b.SendEmailBatch(ctx, msg, to) })
}

type smsSender struct {
	b        *Breaker
	provider string
	next     providers.SMSSender
}

func (s *smsSender) SendSMS(ctx context.Context, msg providers.SMSMessage, key string, tags providers.Tags) (providers.Result, error) {
	return s.b.Do(s.provider, func() (providers.Result, error) { return s.next.SendSMS(ctx, msg, key, tags) })
}

type pushSender struct {
	b        *Breaker
	provider string
	next     providers.PushSender
}

func (s *pushSender) SendPush(ctx context.Context, msg providers.PushMessage, key string, tags providers.Tags) (providers.Result, error) {
	return s.b.Do(s.provider, func() (providers.Result, error) { return s.next.SendPush(ctx, msg, key, tags) })
}

// Set keeps one Breaker per key, created on first use with the Set's Config. It is
// process-local (see the package comment) and safe for concurrent use. Keys are
// never evicted: there is one per configured provider account, a bounded number.
type Set struct {
	cfg Config
	mu  sync.Mutex
	m   map[string]*Breaker
}

// NewSet returns an empty Set.
func NewSet(cfg Config) *Set { return &Set{cfg: cfg, m: map[string]*Breaker{}} }

// Get returns the breaker for key, creating it closed.
func (s *Set) Get(key string) *Breaker {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[key]
	if !ok {
		b = New(key, s.cfg)
		s.m[key] = b
	}
	return b
}

// States returns every breaker's state by key (for a status page or metrics).
func (s *Set) States() map[string]State {
	s.mu.Lock()
	bs := make([]*Breaker, 0, len(s.m))
	for _, b := range s.m {
		bs = append(bs, b)
	}
	s.mu.Unlock()
	out := make(map[string]State, len(bs))
	for _, b := range bs {
		out[b.key] = b.State()
	}
	return out
}

// Email wraps s with the breaker for key.
func (s *Set) Email(key, provider string, sender providers.EmailSender) providers.EmailSender {
	return s.Get(key).Email(provider, sender)
}

// SMS wraps s with the breaker for key.
func (s *Set) SMS(key, provider string, sender providers.SMSSender) providers.SMSSender {
	return s.Get(key).SMS(provider, sender)
}

// Push wraps s with the breaker for key.
func (s *Set) Push(key, provider string, sender providers.PushSender) providers.PushSender {
	return s.Get(key).Push(provider, sender)
}

// Key is the breaker key of one provider account: tenant, channel, provider and
// priority ("t_acme/email/sendgrid/0"), so a tenant's two accounts of the same
// provider (primary and fallback) have separate breakers.
func Key(pc providers.ProviderConfig) string {
	return strings.Join([]string{pc.TenantID, string(pc.Channel), pc.Provider, strconv.Itoa(pc.Priority)}, "/")
}
