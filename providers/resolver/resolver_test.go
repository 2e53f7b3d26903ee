package resolver_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/fcm"
	"github.com/herald-notify/herald/providers/providertest"
	"github.com/herald-notify/herald/providers/resolver"
	"github.com/herald-notify/herald/providers/sandbox"
)

// configs is an in-memory provider_configs: tenant/channel → configs.
type configs struct {
	mu sync.Mutex
	m  map[string][]providers.ProviderConfig
}

func (c *configs) put(pc providers.ProviderConfig) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string][]providers.ProviderConfig{}
	}
	c.m[pc.TenantID+"/"+string(pc.Channel)] = []providers.ProviderConfig{pc}
}

func (c *configs) ProviderConfigs(_ context.Context, tenantID string, channel herald.Channel) ([]providers.ProviderConfig, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[tenantID+"/"+string(channel)], nil
}

type nopEmail struct{ id int64 }

func (*nopEmail) SendEmail(context.Context, providers.EmailMessage, string, providers.Tags) (providers.Result, error) {
	return providers.Result{Provider: "counted"}, nil
}

// counted is an email provider that counts how often a sender is built, and
// fails to build while fail is set.
type counted struct {
	builds atomic.Int64
	fail   atomic.Bool
}

func (c *counted) registry() *providers.Registry {
	return providers.NewRegistry(providers.Definition{
		Name: "counted", Channels: []herald.Channel{herald.ChannelEmail},
		Validate: func(context.Context, json.RawMessage, json.RawMessage) (json.RawMessage, error) { return nil, nil },
		Build: func(context.Context, providers.ProviderConfig, providers.Env) (providers.Sender, error) {
			if c.fail.Load() {
				return providers.Sender{}, errors.New("cannot build")
			}
			return providers.Sender{Email: &nopEmail{id: c.builds.Add(1)}}, nil
		},
	})
}

func emailConfig(tenant, secret string, updated time.Time) providers.ProviderConfig {
	return providers.ProviderConfig{TenantID: tenant, Channel: herald.ChannelEmail, Provider: "counted", Enabled: true,
		Settings: json.RawMessage(`{}`), Secret: []byte(secret), UpdatedAt: updated}
}

func chainEmail(t *testing.T, r *resolver.Resolver, tenant string) providers.EmailSender {
	t.Helper()
	chain, err := r.Chain(context.Background(), tenant, herald.ChannelEmail)
	if err != nil {
		t.Fatal(err)
	}
	if len(chain) != 1 || chain[0].Provider != "counted" || chain[0].Account != tenant+"/email/counted/0" {
		t.Fatalf("chain %+v", chain)
	}
	return chain[0].Email
}

func TestSenderIsBuiltOncePerConfigVersion(t *testing.T) {
	c := &counted{}
	store := &configs{}
	r := resolver.New(store, resolver.Process{Registry: c.registry()}, &sandbox.MemoryRecorder{})
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	store.put(emailConfig("t_a", "key-1", t0))

	first := chainEmail(t, r, "t_a")
	for range 99 {
		if got := chainEmail(t, r, "t_a"); got != first {
			t.Fatal("same config version, different sender")
		}
	}
	if n := c.builds.Load(); n != 1 || r.Builds() != 1 {
		t.Fatalf("100 resolutions of one config version built %d senders, want 1", n)
	}

	// An update (updated_at moves): one new sender, then reused.
	store.put(emailConfig("t_a", "key-2", t0.Add(time.Second)))
	second := chainEmail(t, r, "t_a")
	if second == first || chainEmail(t, r, "t_a") != second || c.builds.Load() != 2 {
		t.Fatalf("after an update: new sender %t, builds %d (want a new one, 2 builds)", second != first, c.builds.Load())
	}
	// Another write within the same clock tick still counts as a new version.
	store.put(emailConfig("t_a", "key-3", t0.Add(time.Second)))
	if chainEmail(t, r, "t_a") == second || c.builds.Load() != 3 {
		t.Fatalf("same updated_at, new credentials: builds %d, want 3", c.builds.Load())
	}
	// Another tenant's config is its own entry.
	store.put(emailConfig("t_b", "key-3", t0.Add(time.Second)))
	if chainEmail(t, r, "t_b") == chainEmail(t, r, "t_a") || c.builds.Load() != 4 {
		t.Fatalf("two tenants: builds %d, want 4", c.builds.Load())
	}
}

func TestConcurrentDeliveriesShareOneBuild(t *testing.T) {
	c := &counted{}
	store := &configs{}
	r := resolver.New(store, resolver.Process{Registry: c.registry()}, &sandbox.MemoryRecorder{})
	store.put(emailConfig("t_a", "key", time.Now()))
	var wg sync.WaitGroup
	senders := make([]providers.EmailSender, 50)
	for i := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			senders[i] = chainEmail(t, r, "t_a")
		}()
	}
	wg.Wait()
	for _, s := range senders {
		if s != senders[0] {
			t.Fatal("concurrent resolutions got different senders")
		}
	}
	if n := c.builds.Load(); n != 1 {
		t.Fatalf("50 concurrent resolutions built %d senders, want 1", n)
	}
}

func TestCacheIsBoundedAndFailuresAreNotCached(t *testing.T) {
	c := &counted{}
	store := &configs{}
	r := resolver.New(store, resolver.Process{Registry: c.registry(), CacheSize: 2}, &sandbox.MemoryRecorder{})
	now := time.Now()
	for _, tenant := range []string{"t_a", "t_b", "t_c"} {
		store.put(emailConfig(tenant, "key", now))
		chainEmail(t, r, tenant)
	}
	chainEmail(t, r, "t_c")
	chainEmail(t, r, "t_b")
	if n := c.builds.Load(); n != 3 {
		t.Fatalf("builds %d, want 3", n)
	}
	chainEmail(t, r, "t_a") // the least recently used: evicted by t_c
	if n := c.builds.Load(); n != 4 {
		t.Fatalf("an evicted config must be built again: builds %d, want 4", n)
	}

	store.put(emailConfig("t_d", "key", now))
	c.fail.Store(true)
	if _, err := r.Chain(context.Background(), "t_d", herald.ChannelEmail); err == nil {
		t.Fatal("a failed build resolved")
	}
	c.fail.Store(false)
	chainEmail(t, r, "t_d")
	if n := c.builds.Load(); n != 5 {
		t.Fatalf("after a failed build: builds %d, want 5", n)
	}
}

// TestFCMTokenIsExchangedOnceForNPushes drives the real FCM provider (default
// registry) against the FCM fake: N pushes, each resolved as a delivery
// attempt does, make one token exchange; a new key makes one more.
func TestFCMTokenIsExchangedOnceForNPushes(t *testing.T) {
	fake := providertest.NewFCM()
	defer fake.Close()
	store := &configs{}
	r := resolver.New(store, resolver.Process{FCMBaseURL: fake.URL, FCMTokenURL: fake.TokenURL(), Egress: providertest.Loopback()},
		&sandbox.MemoryRecorder{})
	t0 := time.Now()
	store.put(providers.ProviderConfig{TenantID: "t_a", Channel: herald.ChannelPush, Provider: "fcm", Enabled: true,
		Settings: json.RawMessage(`{"project_id":"herald-test"}`), Secret: providertest.ServiceAccountJSON(t, fcm.GoogleTokenURL), UpdatedAt: t0})

	push := func(n int) {
		t.Helper()
		for i := range n {
			chain, err := r.Chain(context.Background(), "t_a", herald.ChannelPush)
			if err != nil {
				t.Fatal(err)
			}
			tags := providers.Tags{TenantID: "t_a", NotificationID: "n_" + string(rune('a'+i%26)), Channel: herald.ChannelPush}
			if _, err := chain[0].Push.SendPush(context.Background(), providers.PushMessage{Token: "device-1", Title: "t"},
				tags.IdempotencyKey(), tags); err != nil {
				t.Fatal(err)
			}
		}
	}
	const n = 20
	push(n)
	if fake.Accepted() != n || fake.TokenRequests() != 1 || r.Builds() != 1 {
		t.Fatalf("%d pushes: accepted %d, token exchanges %d, clients built %d (want %d, 1, 1)",
			n, fake.Accepted(), fake.TokenRequests(), r.Builds(), n)
	}

	store.put(providers.ProviderConfig{TenantID: "t_a", Channel: herald.ChannelPush, Provider: "fcm", Enabled: true,
		Settings: json.RawMessage(`{"project_id":"herald-test"}`), Secret: providertest.ServiceAccountJSON(t, fcm.GoogleTokenURL), UpdatedAt: t0.Add(time.Second)})
	push(n)
	if fake.Accepted() != 2*n || fake.TokenRequests() != 2 || r.Builds() != 2 {
		t.Fatalf("after a key rotation and %d more pushes: token exchanges %d, clients built %d (want 2, 2)",
			n, fake.TokenRequests(), r.Builds())
	}
}
