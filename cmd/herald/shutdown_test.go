package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/operatorservice/v1"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/internal/secrets"
	"github.com/herald-notify/herald/internal/testenv"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/providertest"
	"github.com/herald-notify/herald/providers/resolver"
)

// buildHerald builds this command into a temporary directory.
func buildHerald(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "herald")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build herald: %v\n%s", err, out)
	}
	return bin
}

// lockedBuffer collects a process's output.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// proc is a running herald process.
type proc struct {
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
	err  error // the Wait error, once done is closed
}

func startHerald(t *testing.T, bin string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), out: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start herald %v: %v", args, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("herald %v output:\n%s", args, p.out.String())
		}
	})
	return p
}

// wait waits up to d for the process to exit and returns its exit code (-1: it did
// not exit in time).
func (p *proc) wait(d time.Duration) int {
	select {
	case <-p.done:
	case <-time.After(d):
		return -1
	}
	var exit *exec.ExitError
	if errors.As(p.err, &exit) {
		return exit.ExitCode()
	}
	if p.err != nil {
		return -2
	}
	return 0
}

// TestWorkerDrainsOnSIGTERM runs the real `herald worker`, has a slow SendGrid fake
// hold the email send, and sends SIGTERM while the provider call is in flight. The
// worker must let the call finish and record it (HERALD_WORKER_STOP_TIMEOUT, default
// 30 s) before it exits 0; a worker started afterwards must not send it again.
//
// Without the drain (run with HERALD_WORKER_STOP_TIMEOUT=0 in the environment, which
// the worker process inherits) the call is cancelled mid-flight, the provider still
// accepts the message, nothing records it, and the restarted worker's retry sends it
// a second time: this test fails.
func TestWorkerDrainsOnSIGTERM(t *testing.T) {
	t.Parallel()
	bin := buildHerald(t)
	sg := providertest.NewSendGrid()
	t.Cleanup(sg.Close)
	h := apitest.Start(t, apitest.Options{NoWorker: true, Process: resolver.Process{SendGridBaseURL: sg.URL}})
	tenantID, key := h.Tenant("drain")
	h.Template(key, apitest.SimpleTemplate("order_shipped"))
	ctx := context.Background()
	if err := h.Providers.PutProviderConfig(ctx, providers.ProviderConfig{TenantID: tenantID, Channel: "email", Provider: "sendgrid", Enabled: true,
		Settings: json.RawMessage(`{"from":"shop@example.com"}`), Secret: []byte(`{"api_key":"SG.test-key"}`)}); err != nil {
		t.Fatal(err)
	}
	if r := h.Do(http.MethodPut, "/v1/users/ada", key, map[string]any{"email": "ada@example.com"}); r.Status != http.StatusCreated {
		t.Fatalf("create user: %d %s", r.Status, r.Body)
	}
	env := append(os.Environ(),
		"HERALD_DATABASE_URL="+testenv.DatabaseURL(t),
		"HERALD_TEMPORAL_ADDRESS="+testenv.TemporalAddress(t),
		"HERALD_TASK_QUEUE="+h.TaskQueue,
		"HERALD_SENDGRID_BASE_URL="+sg.URL,
		"HERALD_EGRESS_ALLOW=127.0.0.1", // the fake's address: internal, refused by default
		"HERALD_METRICS_ADDR=off",       // tests run side by side: no fixed port
		"HERALD_SECRETS_KEY="+h.SecretsKey,
	)
	submit := func(n int) string {
		t.Helper()
		r := h.Do(http.MethodPost, "/v1/notifications", key, map[string]any{"user_id": "ada", "template_id": "order_shipped",
			"channels": []string{"email"}, "data": map[string]any{"body": "drain test", "n": n}})
		if r.Status != http.StatusAccepted {
			t.Fatalf("submit: %d %s", r.Status, r.Body)
		}
		return r.Str("notification_id")
	}
	sentFor := func(id string) int { // messages the provider accepted for notification id
		t.Helper()
		n := 0
		for _, r := range sg.AcceptedRequests() {
			m, err := providertest.DecodeMail(r)
			if err != nil {
				t.Fatal(err)
			}
			if m.Personalizations[0].CustomArgs["notification_id"] == id {
				n++
			}
		}
		return n
	}

	// The provider takes 3 s to answer the first send.
	const providerDelay = 3 * time.Second
	sg.Next(providertest.Slow(providerDelay))
	w1 := startHerald(t, bin, env, "worker")
	id := submit(1)
	if !sg.WaitCalls(1, 30*time.Second) {
		t.Fatal("the send never reached the provider")
	}
	sigterm := time.Now()
	if err := w1.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code := w1.wait(60 * time.Second)
	took := time.Since(sigterm)
	t.Logf("worker exited %d %s after SIGTERM (provider delay %s)", code, took.Round(time.Millisecond), providerDelay)
	if code != 0 {
		t.Errorf("worker exit code %d after SIGTERM, want 0", code)
	}
	if n := sentFor(id); n != 1 {
		t.Errorf("provider accepted %d messages by the time the worker exited, want 1", n)
	}
	d, err := h.Store.GetDelivery(ctx, tenantID, id, herald.ChannelEmail)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != herald.DeliverySent || d.ProviderMessageID == nil || *d.ProviderMessageID == "" {
		t.Errorf("after the drained shutdown the delivery row is %s (message id %v), want sent with the provider's id", d.Status, d.ProviderMessageID)
	}

	// A worker started afterwards finishes the workflow and sends nothing again:
	// wait until the notification's workflow has no activity left (a retry of an
	// unrecorded send would run now) and a second notification went through.
	w2 := startHerald(t, bin, env, "worker")
	key1, runID, err := ids.ParseNotificationID(id)
	if err != nil {
		t.Fatal(err)
	}
	wfID := ids.NotificationWorkflowID(tenantID, key1)
	h.Eventually(60*time.Second, "the first notification's workflow to finish its delivery", func() bool {
		desc, err := h.Temporal.DescribeWorkflow(ctx, wfID, runID)
		if err != nil || len(desc.RawResponse.GetPendingActivities()) > 0 {
			return false
		}
		d, err := h.Store.GetDelivery(ctx, tenantID, id, herald.ChannelEmail)
		return err == nil && d.Status == herald.DeliverySent
	})
	second := submit(2)
	h.Eventually(30*time.Second, "the second notification to be sent", func() bool {
		d, err := h.Store.GetDelivery(ctx, tenantID, second, herald.ChannelEmail)
		return err == nil && d.Status == herald.DeliverySent
	})
	h.Eventually(30*time.Second, "the first notification's overall status", func() bool {
		r := h.Do(http.MethodGet, "/v1/notifications/"+id, key, nil)
		return r.Status == http.StatusOK && r.Str("status") == "sent"
	})
	if n := sentFor(id); n != 1 {
		t.Errorf("provider accepted %d messages for the notification in flight at SIGTERM, want exactly 1", n)
	}
	if d, err := h.Store.GetDelivery(ctx, tenantID, id, herald.ChannelEmail); err != nil || d.Attempts != 1 {
		t.Errorf("delivery attempts %d (%v), want 1", d.Attempts, err)
	}
	if n := sg.Accepted(); n != 2 {
		t.Errorf("provider accepted %d messages in all, want 2 (one per notification)", n)
	}
	if err := w2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := w2.wait(60 * time.Second); code != 0 {
		t.Errorf("second worker exit code %d after SIGTERM, want 0", code)
	}
	if out := w1.out.String(); !strings.Contains(out, "worker stopped") {
		t.Errorf("the first worker did not log its stop:\n%s", out)
	}
}

// TestWorkerExitsOnFatalError runs the real `herald worker` on a namespace of its
// own and deletes the namespace under it. The SDK's pollers give up after their
// grace period for non-retriable errors (2 minutes) and report a fatal error; the
// process must then exit non-zero rather than idle with no worker polling.
func TestWorkerExitsOnFatalError(t *testing.T) {
	t.Parallel()
	bin := buildHerald(t)
	tc := testenv.TemporalClient(t)
	ctx := context.Background()
	ns := freshNamespace(t)
	key, err := secrets.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(),
		"HERALD_DATABASE_URL="+testenv.DatabaseURL(t),
		"HERALD_TEMPORAL_ADDRESS="+testenv.TemporalAddress(t),
		"HERALD_TEMPORAL_NAMESPACE="+ns,
		"HERALD_METRICS_ADDR=off",
		"HERALD_TASK_QUEUE="+testenv.UniqueName(t, "tq"),
		"HERALD_SECRETS_KEY="+key,
	)
	// A namespace just registered may not be visible to the frontend yet; start the
	// worker until all four lanes (three for notifications, one for tenant
	// webhooks) are polling.
	var w *proc
	started := func() bool { return strings.Count(w.out.String(), `msg="Started Worker"`) == 4 }
	for attempt := 0; ; attempt++ {
		w = startHerald(t, bin, env, "worker")
		deadline := time.Now().Add(30 * time.Second)
		for !started() && time.Now().Before(deadline) && w.wait(100*time.Millisecond) == -1 {
			// starting
		}
		if started() && w.wait(time.Second) == -1 {
			break // running, every lane polling
		}
		if attempt == 10 {
			t.Fatalf("the worker never started on namespace %s:\n%s", ns, w.out.String())
		}
		time.Sleep(time.Second)
	}
	if _, err := tc.OperatorService().DeleteNamespace(ctx, &operatorservice.DeleteNamespaceRequest{Namespace: ns}); err != nil {
		t.Fatalf("delete namespace %s: %v", ns, err)
	}
	deleted := time.Now()
	code := w.wait(6 * time.Minute)
	t.Logf("worker exited %d %s after its namespace was deleted", code, time.Since(deleted).Round(time.Second))
	if code == -1 {
		t.Fatal("the worker kept running for 6 minutes with no namespace: a fatal worker error must end the process")
	}
	if code == 0 {
		t.Fatalf("the worker exited 0 after a fatal error, want non-zero:\n%s", w.out.String())
	}
	if out := w.out.String(); !strings.Contains(out, "herald: worker:") {
		t.Errorf("the fatal error is not in the worker's output:\n%s", out)
	}
}
