package config

import "testing"

// TestSandboxFallbackIsOffByDefault: a production process (herald api/worker with
// no HERALD_SANDBOX_FALLBACK) never lets the sandbox pretend to send.
func TestSandboxFallbackIsOffByDefault(t *testing.T) {
	clearEnv(t)
	c, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if c.SandboxFallback {
		t.Fatal("SandboxFallback is on by default")
	}
	for v, want := range map[string]bool{"true": true, "1": true, "false": false, "0": false} {
		t.Setenv(EnvSandboxFallback, v)
		c, err := FromEnv()
		if err != nil || c.SandboxFallback != want {
			t.Errorf("%s=%s: SandboxFallback %v, %v; want %v", EnvSandboxFallback, v, c.SandboxFallback, err, want)
		}
	}
	t.Setenv(EnvSandboxFallback, "yes")
	if _, err := FromEnv(); err == nil {
		t.Errorf("%s=yes was accepted", EnvSandboxFallback)
	}
}
