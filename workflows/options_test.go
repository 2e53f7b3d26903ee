package workflows

import (
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/herald"
)

// An invalid stored override never reaches Temporal (which would refuse to
// schedule the send, failing the workflow task forever): the default applies.
func TestProviderOptionsFallBackToTheDefaultForAnInvalidOverride(t *testing.T) {
	bad := map[herald.Channel]herald.RetryPolicy{herald.ChannelEmail: {InitialInterval: herald.Duration{Duration: 10 * time.Minute}}}
	p := providerOptions(herald.ChannelEmail, bad).RetryPolicy
	if p.InitialInterval != time.Second || p.MaximumInterval != 5*time.Minute || p.MaximumAttempts != 12 {
		t.Fatalf("want the default policy, got %+v", p)
	}
	good := map[herald.Channel]herald.RetryPolicy{herald.ChannelEmail: {InitialInterval: herald.Duration{Duration: 10 * time.Minute}, MaximumInterval: herald.Duration{Duration: 20 * time.Minute}}}
	if p := providerOptions(herald.ChannelEmail, good).RetryPolicy; p.InitialInterval != 10*time.Minute || p.MaximumInterval != 20*time.Minute {
		t.Fatalf("a valid override applies, got %+v", p)
	}
}
