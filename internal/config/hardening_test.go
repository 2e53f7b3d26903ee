package config

import (
	"slices"
	"testing"
)

// The hardening settings (stream, action and byte bounds): their defaults, "0 turns a bucket off", and refusals.
func TestHardeningSettings(t *testing.T) {
	clearEnv(t)
	c, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if c.InboxActionLimit != (Bucket{Rate: 5, Burst: 30}) || c.AuthFailureLimit != (Bucket{Rate: 10, Burst: 50}) ||
		c.WebhookPorts != nil || c.MetricsToken != "" {
		t.Fatalf("defaults: actions %+v, auth failures %+v, webhook ports %v, metrics token %q",
			c.InboxActionLimit, c.AuthFailureLimit, c.WebhookPorts, c.MetricsToken)
	}
	t.Setenv("HERALD_INBOX_ACTION_RATE", "0")
	t.Setenv("HERALD_WEBHOOK_PORTS", "8443, 9443")
	if c, err = FromEnv(); err != nil || c.InboxActionLimit.Rate != -1 || !slices.Equal(c.WebhookPorts, []uint16{8443, 9443}) {
		t.Fatalf("rate 0 and two ports: %+v %v %v", c.InboxActionLimit, c.WebhookPorts, err)
	}
	for name, bad := range map[string]string{"HERALD_WEBHOOK_PORTS": "70000", "HERALD_METRICS_TOKEN": "short", "HERALD_AUTH_FAILURE_BURST": "-1"} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(name, bad)
			if _, err := FromEnv(); err == nil {
				t.Fatalf("%s=%s accepted", name, bad)
			}
		})
	}
}
