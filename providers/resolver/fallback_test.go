package resolver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/resolver"
	"github.com/herald-notify/herald/providers/sandbox"
)

// TestNoConfigIsNoProviderUnlessSandboxFallback: a tenant with no provider for a
// channel gets the sandbox only where SandboxFallback is on (herald dev, tests);
// elsewhere the chain is providers.ErrNoProvider, never a silent sandbox "send".
func TestNoConfigIsNoProviderUnlessSandboxFallback(t *testing.T) {
	ctx := context.Background()
	prod := resolver.New(&configs{}, resolver.Process{}, &sandbox.MemoryRecorder{})
	for _, ch := range []herald.Channel{herald.ChannelEmail, herald.ChannelSMS, herald.ChannelPush} {
		chain, err := prod.Chain(ctx, "t_a", ch)
		if !errors.Is(err, providers.ErrNoProvider) || chain != nil {
			t.Errorf("%s without a config and without fallback: chain %v, error %v; want ErrNoProvider", ch, chain, err)
		}
	}

	dev := resolver.New(&configs{}, resolver.Process{SandboxFallback: true}, &sandbox.MemoryRecorder{})
	chain, err := dev.Chain(ctx, "t_a", herald.ChannelEmail)
	if err != nil || len(chain) != 1 || chain[0].Provider != sandbox.Name {
		t.Fatalf("with fallback: chain %+v, error %v; want the sandbox alone", chain, err)
	}

	// A configured provider is used either way.
	c := &counted{}
	store := &configs{}
	store.put(emailConfig("t_a", "key", time.Now()))
	withConfig := resolver.New(store, resolver.Process{Registry: c.registry()}, &sandbox.MemoryRecorder{})
	chainEmail(t, withConfig, "t_a")
}
