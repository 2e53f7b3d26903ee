package config

import (
	"strings"
	"testing"
)

func TestCostLimitsAndOperatorKey(t *testing.T) {
	clearEnv(t)
	c, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if c.PreviewLimit != (Bucket{10, 20}) || c.TemplateSaveLimit != (Bucket{2, 30}) || c.RedriveLimit != (Bucket{10, 50}) ||
		c.BulkRedriveLimit != (Bucket{0.2, 3}) || c.OperatorKey != "" {
		t.Errorf("defaults: preview %v, save %v, redrive %v, bulk %v, operator key %q", c.PreviewLimit, c.TemplateSaveLimit, c.RedriveLimit, c.BulkRedriveLimit, c.OperatorKey)
	}
	t.Setenv("HERALD_PREVIEW_RATE", "0")
	t.Setenv("HERALD_BULK_REDRIVE_RATE", "0.5")
	t.Setenv("HERALD_BULK_REDRIVE_BURST", "1")
	t.Setenv("HERALD_OPERATOR_KEY", strings.Repeat("k", MinOperatorKeyLen))
	if c, err = FromEnv(); err != nil {
		t.Fatal(err)
	}
	if c.PreviewLimit.Rate != 0 || c.BulkRedriveLimit != (Bucket{0.5, 1}) || len(c.OperatorKey) != MinOperatorKeyLen {
		t.Errorf("set: preview %v, bulk %v, operator key %d bytes", c.PreviewLimit, c.BulkRedriveLimit, len(c.OperatorKey))
	}
	for name, v := range map[string]string{
		"HERALD_TEMPLATE_SAVE_RATE":  "-1",
		"HERALD_TEMPLATE_SAVE_BURST": "2.5",
		"HERALD_REDRIVE_BURST":       "many",
		"HERALD_OPERATOR_KEY":        "short",
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(name, v)
			if _, err := FromEnv(); err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s=%s: err %v, want one naming the variable", name, v, err)
			}
		})
	}
}
