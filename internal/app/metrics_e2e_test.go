package app

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/config"
	"github.com/herald-notify/herald/internal/secrets"
	"github.com/herald-notify/herald/internal/testenv"
)

// TestWorkerOnlyServesMetricsOnItsOwnAddress: a worker-only Run serves GET
// /metrics at HERALD_METRICS_ADDR, with the Temporal SDK's worker metrics, and
// stops serving when the worker stops.
func TestWorkerOnlyServesMetricsOnItsOwnAddress(t *testing.T) {
	ln := listen(t)
	addr := ln.Addr().String()
	ln.Close()
	key, err := secrets.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Config{TaskQueue: testenv.UniqueName(t, "tq"), MetricsAddr: addr, ShutdownTimeout: time.Second}
	a, err := New(cfg, testenv.Pool(t), testenv.TemporalClient(t), Options{Logger: quiet, SecretsKey: key})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, Services{Worker: true}) }()

	var body string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if body = string(b); resp.StatusCode == http.StatusOK && strings.Contains(body, "temporal_worker_task_slots_available") {
			break
		}
	}
	if !strings.Contains(body, "temporal_worker_task_slots_available") || !strings.Contains(body, "herald_dead_letters_open") {
		t.Fatalf("worker /metrics lacks the SDK's worker metrics or Herald's:\n%.2000s", body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := http.Get("http://" + addr + "/metrics"); err == nil {
		t.Error("metrics still served after the worker stopped")
	}
}

// TestAPIServesMetricsOnItsOwnAddressOnly: an API process served GET /metrics
// on the API port to anyone. Now, without HERALD_METRICS_TOKEN, the API port
// answers 404 and the metrics listener (HERALD_METRICS_ADDR) serves them.
func TestAPIServesMetricsOnItsOwnAddressOnly(t *testing.T) {
	free := func() string {
		ln := listen(t)
		defer ln.Close()
		return ln.Addr().String()
	}
	apiAddr, metricsAddr := free(), free()
	key, err := secrets.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Config{TaskQueue: testenv.UniqueName(t, "tq"), HTTPAddr: apiAddr, MetricsAddr: metricsAddr, ShutdownTimeout: time.Second}
	a, err := New(cfg, testenv.Pool(t), testenv.TemporalClient(t), Options{Logger: quiet, SecretsKey: key})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, Services{API: true}) }()
	get := func(addr string) (int, string) {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var status int
	var body string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if status, body = get(metricsAddr); status == http.StatusOK {
			break
		}
	}
	if status != http.StatusOK || !strings.Contains(body, "herald_inbox_streams_open") {
		t.Fatalf("metrics listener: %d %.500s", status, body)
	}
	if status, body := get(apiAddr); status != http.StatusNotFound {
		t.Fatalf("GET /metrics on the API port: %d %.300s; want 404", status, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}
