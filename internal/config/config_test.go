package config

import (
	"os"
	"strings"
	"testing"
	"time"
)

// clearEnv unsets every HERALD_ variable for the test.
func clearEnv(t *testing.T) {
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "HERALD_") {
			t.Setenv(name, "") // restored after the test
			os.Unsetenv(name)
		}
	}
}

func TestDefaults(t *testing.T) {
	clearEnv(t)
	c, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string][2]time.Duration{
		"WorkerStopTimeout":     {c.WorkerStopTimeout, 30 * time.Second},
		"ShutdownTimeout":       {c.ShutdownTimeout, 15 * time.Second},
		"HTTPReadHeaderTimeout": {c.HTTPReadHeaderTimeout, 10 * time.Second},
		"HTTPReadTimeout":       {c.HTTPReadTimeout, 30 * time.Second},
		"HTTPWriteTimeout":      {c.HTTPWriteTimeout, 60 * time.Second},
		"HTTPIdleTimeout":       {c.HTTPIdleTimeout, 120 * time.Second},
		"DefaultDedupWindow":    {c.DefaultDedupWindow, 24 * time.Hour},
		"WebhookTolerance":      {c.WebhookTolerance, 5 * time.Minute},
	} {
		if got[0] != got[1] {
			t.Errorf("%s = %s, want %s", name, got[0], got[1])
		}
	}
	if c.TaskQueue != DefaultTaskQueue || c.HTTPAddr != DefaultHTTPAddr || c.TenantRatePerSecond != 200 || c.TenantBurst != 400 {
		t.Errorf("defaults: %+v", c)
	}
}

func TestDurations(t *testing.T) {
	clearEnv(t)
	t.Setenv("HERALD_WORKER_STOP_TIMEOUT", "0")
	t.Setenv("HERALD_HTTP_WRITE_TIMEOUT", "5s")
	c, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if c.WorkerStopTimeout != 0 || c.HTTPWriteTimeout != 5*time.Second {
		t.Errorf("WorkerStopTimeout %s, HTTPWriteTimeout %s", c.WorkerStopTimeout, c.HTTPWriteTimeout)
	}
	for name, v := range map[string]string{
		"HERALD_WORKER_STOP_TIMEOUT": "-1s",
		"HERALD_HTTP_READ_TIMEOUT":   "0",
		"HERALD_HTTP_IDLE_TIMEOUT":   "soon",
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(name, v)
			if _, err := FromEnv(); err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s=%s: err %v, want one naming the variable", name, v, err)
			}
		})
	}
}

// TestWorkerCacheSize: the worker's sticky cache defaults to
// worker.DefaultCacheSize, takes a positive whole number, and refuses 0,
// negatives and words, naming the variable.
func TestWorkerCacheSize(t *testing.T) {
	clearEnv(t)
	c, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if c.WorkerCacheSize != 1000 {
		t.Errorf("default WorkerCacheSize %d, want 1000", c.WorkerCacheSize)
	}
	t.Setenv("HERALD_WORKER_CACHE_SIZE", "250")
	if c, err = FromEnv(); err != nil || c.WorkerCacheSize != 250 {
		t.Errorf("HERALD_WORKER_CACHE_SIZE=250: %d, %v", c.WorkerCacheSize, err)
	}
	for _, v := range []string{"0", "-5", "many", "1.5"} {
		t.Setenv("HERALD_WORKER_CACHE_SIZE", v)
		if _, err := FromEnv(); err == nil || !strings.Contains(err.Error(), "HERALD_WORKER_CACHE_SIZE") {
			t.Errorf("HERALD_WORKER_CACHE_SIZE=%s: err %v, want one naming the variable", v, err)
		}
	}
}
