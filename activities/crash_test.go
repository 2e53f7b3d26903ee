package activities_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/testenv"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/providertest"
)

// workerProcess is a real `herald worker` process, killed with SIGKILL by the test.
type workerProcess struct {
	t   testing.TB
	bin string
	env []string
	cmd *exec.Cmd
	log *os.File
}

func (w *workerProcess) start() {
	w.t.Helper()
	w.cmd = exec.Command(w.bin, "worker")
	w.cmd.Env = w.env
	w.cmd.Stdout, w.cmd.Stderr = w.log, w.log
	if err := w.cmd.Start(); err != nil {
		w.t.Fatalf("start worker: %v", err)
	}
}

// crashHarness is the start of every worker-kill test: the herald binary, the
// fakes, and a harness whose worker the test runs as a process of its own
// (startWorkerProcess); opts are the harness's other options. It skips under
// -short.
func crashHarness(t *testing.T, opts apitest.Options) (bin string, f apitest.Fakes, h *apitest.Harness) {
	t.Helper()
	if testing.Short() {
		t.Skip("kills and restarts worker processes; run without -short")
	}
	bin = buildHerald(t)
	f = apitest.StartFakes(t)
	opts.NoWorker, opts.Process = true, process(f)
	return bin, f, apitest.Start(t, opts)
}

// buildHerald builds cmd/herald into the test's temporary directory.
func buildHerald(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "herald")
	build := exec.Command("go", "build", "-o", bin, "../cmd/herald")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build herald: %v\n%s", err, out)
	}
	return bin
}

// startWorkerProcess starts bin as a worker of h's task queue against the test
// services and f's SendGrid fake, logging to a file in the test's temporary
// directory, killed when the test ends; extraEnv goes last (it wins).
func startWorkerProcess(t *testing.T, bin string, h *apitest.Harness, f apitest.Fakes, extraEnv ...string) *workerProcess {
	t.Helper()
	return startHeraldWorker(t, bin, h, append([]string{
		"HERALD_SENDGRID_BASE_URL=" + f.SendGrid.URL,
		"HERALD_EGRESS_ALLOW=127.0.0.1", // the fakes' address: internal, refused by default
	}, extraEnv...)...)
}

// startHeraldWorker starts bin as a worker of h's task queue against the test
// services (no metrics listener unless env gives one), logging to a file in
// the test's temporary directory, killed when the test ends; env goes last
// (it wins).
func startHeraldWorker(t testing.TB, bin string, h *apitest.Harness, env ...string) *workerProcess {
	t.Helper()
	logFile, err := os.Create(filepath.Join(t.TempDir(), "worker.log"))
	if err != nil {
		t.Fatal(err)
	}
	base := append(os.Environ(),
		"HERALD_DATABASE_URL="+testenv.DatabaseURL(t),
		"HERALD_TEMPORAL_ADDRESS="+testenv.TemporalAddress(t),
		"HERALD_TASK_QUEUE="+h.TaskQueue,
		"HERALD_METRICS_ADDR=off", // tests run side by side: no fixed port
		"HERALD_SECRETS_KEY="+h.SecretsKey,
	)
	w := &workerProcess{t: t, bin: bin, log: logFile, env: append(base, env...)}
	w.start()
	t.Cleanup(func() { _ = w.cmd.Process.Kill(); _ = w.cmd.Wait() })
	return w
}

func (w *workerProcess) kill() {
	w.t.Helper()
	if err := w.cmd.Process.Kill(); err != nil { // SIGKILL: no cleanup, no goodbye to Temporal
		w.t.Fatalf("kill worker: %v", err)
	}
	_ = w.cmd.Wait()
}

// crashMode is where in a delivery the worker dies.
type crashMode int

const (
	// killBeforeAccept: the provider holds the request and has not accepted it.
	killBeforeAccept crashMode = iota
	// killAfterRecord: the provider accepted and the guard record says sent.
	killAfterRecord
	// killAfterAcceptWithReceipt: the provider accepted, the worker died before
	// recording it, and the provider's receipt arrived before the retry.
	killAfterAcceptWithReceipt
	// killAfterAcceptNoReceipt: as above, but no receipt arrived before the retry:
	// the documented residual window.
	killAfterAcceptNoReceipt
)

func (m crashMode) String() string {
	return [...]string{"before-accept", "after-record", "after-accept+receipt", "after-accept-no-receipt"}[m]
}

// wantAccepted is how many times the provider accepts the message in each mode.
func (m crashMode) wantAccepted() int {
	if m == killAfterAcceptNoReceipt {
		return 2 // SendGrid has no idempotency key: the retry sends again
	}
	return 1
}

// TestWorkerCrashesDuringDelivery SIGKILLs a real worker process at each point of a
// delivery, 5 times per point (20 kills), and checks that a fresh worker finishes
// every notification with the documented number of provider sends.
func TestWorkerCrashesDuringDelivery(t *testing.T) {
	bin, f, h := crashHarness(t, apitest.Options{})
	tenantID, key := h.TenantWith("crash", "order_shipped")
	configure(h, f, tenantID)
	h.PutUser(key, "ada", map[string]any{"email": "ada@example.com"})

	w := startWorkerProcess(t, bin, h, f)

	const perMode = 5
	kills, delivered := 0, 0
	accepted := map[crashMode]int{}
	for i := 0; i < 4*perMode; i++ {
		mode := crashMode(i % 4)
		func() { // one kill; the harness reports failures on t, so no subtests
			t.Logf("kill %02d: %s", i, mode)
			id := send(h, key, "email")
			switch mode {
			case killBeforeAccept, killAfterAcceptWithReceipt, killAfterAcceptNoReceipt:
				hold := f.SendGrid.HoldNext(mode != killBeforeAccept)
				select {
				case <-hold.Arrived():
				case <-time.After(20 * time.Second):
					t.Fatalf("the provider call never arrived; worker log: %s", w.log.Name())
				}
				w.kill()
				hold.Reject(providertest.Fail500()) // the caller is gone; the answer goes nowhere
				if mode == killAfterAcceptWithReceipt {
					recordReceipt(t, h, f, tenantID, id)
				}
			case killAfterRecord:
				h.Eventually(20*time.Second, "the guard record", func() bool {
					d, err := h.Store.GetDelivery(context.Background(), tenantID, id, "email")
					return err == nil && d.Status == herald.DeliverySent
				})
				w.kill()
			}
			kills++
			w.start()
			h.AwaitStatus(key, id, map[bool]herald.NotificationStatus{true: "delivered", false: "sent"}[mode == killAfterAcceptWithReceipt], 60*time.Second)
			delivered++
			n := len(apitest.MailsFor(t, f.SendGrid, id))
			accepted[mode] += n
			if n != mode.wantAccepted() {
				t.Fatalf("kill %02d %s: provider accepted %d times, want %d", i, mode, n, mode.wantAccepted())
			}
		}()
	}
	t.Logf("kills=%d delivered=%d provider-accepted: before-accept=%d after-record=%d after-accept+receipt=%d after-accept-no-receipt=%d",
		kills, delivered, accepted[killBeforeAccept], accepted[killAfterRecord], accepted[killAfterAcceptWithReceipt], accepted[killAfterAcceptNoReceipt])
	if kills < 20 || delivered != kills {
		t.Fatalf("kills=%d delivered=%d", kills, delivered)
	}
}

// recordReceipt stores the provider's receipt for the accepted message, as the
// SendGrid webhook would.
func recordReceipt(t *testing.T, h *apitest.Harness, f apitest.Fakes, tenantID, id string) {
	t.Helper()
	var msgID string
	if mails := apitest.MailsFor(t, f.SendGrid, id); len(mails) > 0 {
		msgID = mails[len(mails)-1].MessageID
	}
	if msgID == "" {
		t.Fatal("the held request was not accepted")
	}
	if ok, err := h.Providers.RecordReceipt(context.Background(), providers.Receipt{Provider: "sendgrid", TenantID: tenantID,
		NotificationID: id, Channel: "email", ProviderMessageID: msgID, Status: providers.ReceiptDelivered,
		ProviderStatus: "delivered", OccurredAt: time.Now()}); err != nil || !ok {
		t.Fatalf("record receipt: %v %v", ok, err)
	}
}
