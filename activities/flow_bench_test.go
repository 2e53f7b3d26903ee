package activities_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/templates"
	"github.com/herald-notify/herald/internal/testenv"
	"github.com/herald-notify/herald/workflows"
)

// benchSink is the floor's workflow: it takes signals and does nothing with
// them (the bare signal-with-start the digest's accept path is compared with).
func benchSink(ctx workflow.Context) error {
	ch := workflow.GetSignalChannel(ctx, "sink")
	for {
		var v contract.DigestEvent
		ok, _ := ch.ReceiveWithTimeout(ctx, 5*time.Second, &v)
		if !ok {
			for ch.ReceiveAsync(&v) {
			}
			return nil
		}
	}
}

// concurrently runs fn(i) for i < n on workers goroutines and returns how long
// it took; any error fails the benchmark.
func concurrently(b *testing.B, n, workers int, fn func(i int) error) time.Duration {
	b.Helper()
	start := time.Now()
	var wg sync.WaitGroup
	next := make(chan int)
	var mu sync.Mutex
	var first error
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(i); err != nil {
					mu.Lock()
					first = err
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	if first != nil {
		b.Fatal(first)
	}
	return time.Since(start)
}

// cpuPer runs fn and returns the CPU (ms) the test process, PostgreSQL and
// Temporal spent per unit (n units).
func cpuPer(b *testing.B, name string, n int, fn func()) float64 {
	b.Helper()
	pgPort, temporalPort := portOf(testenv.DatabaseURL(b)), portOf(testenv.TemporalAddress(b))
	before := cpuSnapshot(pgPort, temporalPort)
	start := time.Now()
	fn()
	used := cpuSnapshot(pgPort, temporalPort).minus(before)
	ms := func(j uint64) float64 { return float64(j) * 10 / float64(n) }
	ours := ms(used["test"] + used["postgres"] + used["temporal"])
	b.Logf("%s: %d in %s; CPU per unit %.3f ms (test process %.3f, postgres %.3f, temporal %.3f; others on the machine %.3f)",
		name, n, time.Since(start).Round(time.Millisecond), ours, ms(used["test"]), ms(used["postgres"]), ms(used["temporal"]), ms(used["other"]))
	return ours
}

// postJSON posts body to the harness's API with a plain client (no OpenAPI
// check, so the bench's own process does only what a tenant's client would)
// and wants status.
func postJSON(hc *http.Client, url, key string, body any, status int) error {
	return sendJSON(hc, http.MethodPost, url, key, body, status)
}

// sendJSON sends body as method to url with the tenant key and wants one of
// statuses.
func sendJSON(hc *http.Client, method, url, key string, body any, statuses ...int) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequest(method, url, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if !slices.Contains(statuses, resp.StatusCode) {
		return fmt.Errorf("%s %s: %d, want %v: %s", method, url, resp.StatusCode, statuses, got)
	}
	return nil
}

// BenchmarkDigest measures what a tenant does, in one run on the same servers:
//
//   - accept: 2,000 events of one user and key, 32 at a time, as
//     POST /v1/notifications with a flow_id (a flow whose first step is a
//     digest) through the real API, against the floor: 2,000 bare
//     signal-with-starts to one workflow ID (a sink that drops them), 32 at a
//     time. Goal: ≥ 0.9.
//   - CPU per event: 2,000 such events end to end into one digest (accepted,
//     the digest, its one in-app send), against 300 single in-app
//     notifications end to end (POST /v1/notifications with a template_id);
//     CPU of the whole machine's share that is ours: this process (the API
//     and the worker), PostgreSQL and Temporal, read from /proc. Goal: ≥ 10.
//
// Run it with: go test -run '^$' -bench BenchmarkDigest -benchtime 1x ./activities/
func BenchmarkDigest(b *testing.B) {
	h := apitest.Start(b, apitest.Options{})
	tenantID, key := h.TenantWith("bench-digest", "alert")
	h.Template(key, templates.Template{ID: "digest", Category: "comments",
		InApp: &templates.InAppContent{Title: "Comments", Body: `{{.digest.count}} new comments, first: {{(index .digest.items 0).text}}`}})
	h.PutUser(key, "ada", map[string]any{})
	ctx := context.Background()
	sinkQueue := h.TaskQueue + "-sink"
	w := sdkworker.New(h.Temporal, sinkQueue, sdkworker.Options{})
	w.RegisterWorkflow(benchSink)
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(w.Stop)
	wf := workflows.NewClient(h.Temporal, h.TaskQueue)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}
	notifications := h.URL + "/v1/notifications"
	const flowDef = `{"category":"comments","steps":[{"type":"digest","window":"1h","key":"{{.thread}}"},
		{"type":"send","template_id":"digest","channels":["in_app"]}]}`
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		const n, workers = 2000, 32
		suffix := time.Now().Format("150405.000")
		acceptFlow := "bench-accept-" + strings.ReplaceAll(suffix, ".", "")
		h.MustDo(http.StatusCreated, http.MethodPut, "/v1/flows/"+acceptFlow, key, flowDef)
		floorID := "bench-sink-" + suffix
		floor := concurrently(b, n, workers, func(i int) error {
			_, err := h.Temporal.SignalWithStartWorkflow(ctx, floorID, "sink", contract.DigestEvent{Seq: int64(i), At: time.Now()},
				client.StartWorkflowOptions{TaskQueue: sinkQueue}, benchSink)
			return err
		})
		accept := concurrently(b, n, workers, func(i int) error {
			return postJSON(hc, notifications, key, map[string]any{"user_id": "ada", "flow_id": acceptFlow,
				"idempotency_key": fmt.Sprintf("bench-a-%s-%d", suffix, i),
				"data":            map[string]any{"thread": "t", "text": fmt.Sprintf("comment %d with some words", i)}}, http.StatusAccepted)
		})
		floorRate, acceptRate := n/floor.Seconds(), n/accept.Seconds()
		b.ReportMetric(floorRate, "bare-sws/s")
		b.ReportMetric(acceptRate, "digest-accept/s")
		b.ReportMetric(acceptRate/floorRate, "accept-ratio")
		b.Logf("accept: bare signal-with-start %.0f/s, POST /v1/notifications (digest-first flow) %.0f/s: ratio %.2f (goal >= 0.9)",
			floorRate, acceptRate, acceptRate/floorRate)
		if err := wf.FlushDigest(ctx, tenantID, acceptFlow, "ada", "t"); err != nil {
			b.Fatal(err)
		}

		const events, singles = 2000, 300
		pool := testenv.Pool(b)
		count := func(q string, args ...any) int {
			var v int
			if err := pool.QueryRow(ctx, q, args...).Scan(&v); err != nil {
				b.Fatal(err)
			}
			return v
		}
		flowID := "bench-cpu-" + strings.ReplaceAll(suffix, ".", "")
		h.MustDo(http.StatusCreated, http.MethodPut, "/v1/flows/"+flowID, key, flowDef)
		// The accept phase's digest is sent before the CPU phases start.
		h.Eventually(time.Minute, "the accept phase's digest sent", func() bool {
			return count(`SELECT count(*) FROM inbox WHERE tenant_id = $1 AND body LIKE $2`, tenantID, fmt.Sprintf("%d new comments%%", n)) >= it+1
		})
		digested := cpuPer(b, "digested event (accept + digest share + send share)", events, func() {
			concurrently(b, events, workers, func(i int) error {
				return postJSON(hc, notifications, key, map[string]any{"user_id": "ada", "flow_id": flowID,
					"idempotency_key": fmt.Sprintf("bench-d-%s-%d", suffix, i),
					"data":            map[string]any{"thread": "cpu", "text": fmt.Sprintf("comment %d", i)}}, http.StatusAccepted)
			})
			h.Eventually(5*time.Minute, "every event joined", func() bool {
				return count(`SELECT count(*) FROM digest_events e JOIN flow_runs r USING (tenant_id, notification_id) WHERE e.tenant_id = $1 AND r.flow_id = $2`,
					tenantID, flowID) == events
			})
			if err := wf.FlushDigest(ctx, tenantID, flowID, "ada", "cpu"); err != nil {
				b.Error(err)
			}
			h.Eventually(time.Minute, "the digest sent", func() bool {
				return count(`SELECT count(*) FROM inbox WHERE tenant_id = $1 AND body LIKE $2`, tenantID, fmt.Sprintf("%d new comments%%", events)) >= it+1
			})
		})
		single := cpuPer(b, "single in-app notification", singles, func() {
			concurrently(b, singles, workers, func(i int) error {
				return postJSON(hc, notifications, key, map[string]any{"user_id": "ada", "template_id": "alert", "channels": []string{"in_app"},
					"idempotency_key": fmt.Sprintf("bench-n-%s-%d", suffix, i), "dedup_ttl_sec": 1,
					"data": map[string]any{"title": "t", "body": fmt.Sprintf("n %d", i)}}, http.StatusAccepted)
			})
			h.Eventually(5*time.Minute, "every notification delivered", func() bool {
				return count(`SELECT count(*) FROM inbox WHERE tenant_id = $1 AND body LIKE 'n %'`, tenantID) >= singles*(it+1)
			})
			time.Sleep(2 * time.Second) // the runs end their dedup windows
		})
		b.ReportMetric(digested, "cpu-ms/digested-event")
		b.ReportMetric(single, "cpu-ms/notification")
		b.ReportMetric(single/digested, "cpu-ratio")
		b.Logf("CPU: %.3f ms per digested event, %.3f ms per single notification: the digest path is %.2fx cheaper (goal >= 10)",
			digested, single, single/digested)
	}
}

// historyActions counts a run chain's history events and, of them, the ones
// Temporal bills as actions (starts, signals, timers, activities and local
// activity markers, child starts, search attribute upserts, continue-as-new).
func historyActions(b *testing.B, c client.Client, workflowID string) (events, actions int) {
	b.Helper()
	ctx := context.Background()
	for runID := c.GetWorkflow(ctx, workflowID, "").GetRunID(); runID != ""; {
		it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		next := ""
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				b.Fatal(err)
			}
			events++
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
				enumspb.EVENT_TYPE_TIMER_STARTED, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, enumspb.EVENT_TYPE_MARKER_RECORDED,
				enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED, enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES,
				enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
				actions++
			}
			if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
				next = a.GetContinuedExecutionRunId()
			}
		}
		runID = next
	}
	return events, actions
}

// BenchmarkDailyDigests: users × events each into scheduled daily digests
// (HERALD_BENCH_DIGEST_USERS, default 500; HERALD_BENCH_DIGEST_EVENTS, default
// 4; the full size is 10,000 × 20), posted through the API (a
// digest-first flow: no run per event, 32 at a time), then every digest
// flushed (closed and sent: the close path is measured too).
//
// The worker is a real `herald worker` process of its own (built from
// cmd/herald, configured from the environment as in production; this process
// runs the API and the bench's client). The bench samples the worker's RSS
// from /proc every second (VmRSS, and VmHWM for the peak: goal < 256 MB) and
// its own metrics endpoint (goroutines, Go heap, the SDK's sticky cache). It
// reports the peak, a series, Temporal actions and history events per event
// (counted in the digests' histories; also the server's `action` counter when
// HERALD_TEMPORAL_METRICS_URL names the Temporal server's Prometheus
// endpoint), the largest digest's history, the wall time of each phase and the
// CPU of the worker, this process, PostgreSQL and Temporal per event.
// HERALD_BENCH_WORKER_ENV (space-separated NAME=value) is added to the
// worker's environment, to compare settings; HERALD_BENCH_DIGEST_WAIT_MIN
// (default 120) bounds each wait (a run that times out still logs the
// worker's RSS so far).
//
// Run it with: go test -run '^$' -bench BenchmarkDailyDigests -benchtime 1x -timeout 2h ./activities/
func BenchmarkDailyDigests(b *testing.B) {
	users, perUser := envInt("HERALD_BENCH_DIGEST_USERS", 500), envInt("HERALD_BENCH_DIGEST_EVENTS", 4)
	wait := time.Duration(envInt("HERALD_BENCH_DIGEST_WAIT_MIN", 120)) * time.Minute
	bin := buildHerald(b)
	h := apitest.Start(b, apitest.Options{NoWorker: true})
	tenantID, key := h.Tenant("bench-daily")
	h.Template(key, templates.Template{ID: "daily", Category: "activity",
		InApp: &templates.InAppContent{Title: "Today", Body: `{{.digest.count}} things happened, first: {{(index .digest.items 0).what}}`}})
	rows := make([]store.User, users)
	for i := range rows {
		tz := []string{"America/New_York", "Europe/Paris", "Asia/Tokyo", "UTC"}[i%4]
		rows[i] = store.User{UserID: fmt.Sprintf("d%05d", i), Timezone: &tz}
	}
	ctx := context.Background()
	if err := h.Store.InsertUsers(ctx, tenantID, rows); err != nil {
		b.Fatal(err)
	}
	const def = `{"category":"activity","steps":[{"type":"digest","mode":"scheduled","schedule":{"every":"day","at":"09:00"}},
		{"type":"send","template_id":"daily","channels":["in_app"]}]}`
	metricsAddr := freeLoopbackAddr(b)
	workerEnv := []string{"HERALD_METRICS_ADDR=" + metricsAddr, "HERALD_WORKER_STOP_TIMEOUT=0"}
	workerEnv = append(workerEnv, strings.Fields(os.Getenv("HERALD_BENCH_WORKER_ENV"))...)
	w := startHeraldWorker(b, bin, h, workerEnv...)
	worker := &procSampler{pid: w.cmd.Process.Pid, metricsURL: "http://" + metricsAddr + "/metrics", start: time.Now(), cur: "idle"}
	worker.run(time.Second)
	// Logged even when a phase times out: the worker's memory so far.
	b.Cleanup(func() {
		worker.stop()
		b.Logf("worker RSS per phase (peak VmHWM %d MB; goal < 256): %s", worker.peakKB()/1024, worker.phaseSummary())
		b.Logf("worker RSS series: %s", worker.series(30))
	})
	wf := workflows.NewClient(h.Temporal, h.TaskQueue)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}
	pool := testenv.Pool(b)
	count := func(q string, args ...any) int {
		var v int
		if err := pool.QueryRow(ctx, q, args...).Scan(&v); err != nil {
			b.Fatal(err)
		}
		return v
	}
	temporalMetrics := os.Getenv("HERALD_TEMPORAL_METRICS_URL")
	pgPort, temporalPort := portOf(testenv.DatabaseURL(b)), portOf(testenv.TemporalAddress(b))
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		suffix := strings.ReplaceAll(time.Now().Format("150405.000"), ".", "")
		flowID := "daily-" + suffix
		h.MustDo(http.StatusCreated, http.MethodPut, "/v1/flows/"+flowID, key, def)
		n := users * perUser
		actions0 := serverActions(hc, temporalMetrics)
		cpu0, workerCPU0 := cpuSnapshot(pgPort, temporalPort), procJiffies(worker.pid)
		start := time.Now()
		worker.phase("accept")
		accept := concurrently(b, n, 32, func(i int) error {
			u := fmt.Sprintf("d%05d", i%users)
			return postJSON(hc, h.URL+"/v1/notifications", key, map[string]any{"user_id": u, "flow_id": flowID,
				"idempotency_key": fmt.Sprintf("daily-%s-%d", suffix, i), "data": map[string]any{"what": fmt.Sprintf("event %d for %s", i, u)}},
				http.StatusAccepted)
		})
		// Every digest has opened its window once the worker took each
		// digest's first signal (the later ones may still be queued: the
		// flushes queue behind them, so the close phase includes them).
		worker.phase("open")
		h.Eventually(wait, "every digest open", func() bool {
			time.Sleep(time.Second)
			return count(`SELECT count(*) FROM digests WHERE tenant_id = $1 AND flow_id = $2 AND status = 'open'`, tenantID, flowID) == users
		})
		allOpen := time.Since(start)
		worker.phase("close")
		closeStart := time.Now()
		concurrently(b, users, 32, func(u int) error {
			return wf.FlushDigest(ctx, tenantID, flowID, fmt.Sprintf("d%05d", u), "")
		})
		h.Eventually(wait, "every digest sent", func() bool {
			time.Sleep(time.Second)
			return count(`SELECT count(*) FROM inbox WHERE tenant_id = $1 AND body LIKE '% things happened%'`, tenantID) >= users*(it+1)
		})
		closed := time.Since(closeStart)
		total := time.Since(start)
		worker.phase("after")
		cpu, workerCPU := cpuSnapshot(pgPort, temporalPort).minus(cpu0), procJiffies(worker.pid)-workerCPU0
		if got := count(`SELECT COALESCE(sum(count), 0)::int FROM digests WHERE tenant_id = $1 AND flow_id = $2 AND status = $3`,
			tenantID, flowID, herald.DigestSent); got != n {
			b.Fatalf("the digests hold %d events, want %d", got, n)
		}
		time.Sleep(2 * time.Second)
		actions1 := serverActions(hc, temporalMetrics)
		// Temporal's share: every digest (an event has no run of its own).
		var mu sync.Mutex
		dgEvents, dgActions, largest := 0, 0, 0
		concurrently(b, users, 16, func(u int) error {
			e, a := historyActions(b, h.Temporal, workflows.DigestWorkflowID(tenantID, flowID, fmt.Sprintf("d%05d", u), ""))
			mu.Lock()
			dgEvents, dgActions, largest = dgEvents+e, dgActions+a, max(largest, e)
			mu.Unlock()
			return nil
		})
		peakMB := float64(worker.peakKB()) / 1024
		perEventActions := float64(dgActions) / float64(n)
		ms := func(j uint64) float64 { return float64(j) * 10 / float64(n) }
		b.ReportMetric(peakMB, "worker-peak-rss-MB")
		b.ReportMetric(perEventActions, "actions/event")
		b.ReportMetric(float64(largest), "largest-digest-history")
		b.ReportMetric(total.Seconds(), "wall-s")
		b.ReportMetric(float64(n)/total.Seconds(), "events/s")
		b.Logf("%d users x %d events into daily digests, worker in its own process (env %q)", users, perUser, workerEnv[2:])
		b.Logf("wall: %s in all, %.0f events/s: accepted through the API in %s (%.0f/s), every digest open at %s, "+
			"%d digests flushed and sent in %s", total.Round(time.Second), float64(n)/total.Seconds(), accept.Round(time.Second),
			float64(n)/accept.Seconds(), allOpen.Round(time.Second), users, closed.Round(time.Second))
		b.Logf("worker peak RSS (VmHWM) %.0f MB (goal < 256)", peakMB)
		b.Logf("per event: %.2f Temporal actions in its digest (no run of its own; the digest's send not counted), %.2f history events; largest digest history %d events",
			perEventActions, float64(dgEvents)/float64(n), largest)
		if actions0 >= 0 && actions1 >= 0 {
			b.ReportMetric((actions1-actions0)/float64(n), "server-actions/event")
			b.Logf("the Temporal server's action counter: %.0f over the run, %.2f per event (everything: signals, digests, the sends' runs)",
				actions1-actions0, (actions1-actions0)/float64(n))
		}
		b.Logf("CPU per event: worker %.3f ms, API+bench %.3f, postgres %.3f, temporal %.3f (others on the machine %.3f)",
			ms(workerCPU), ms(cpu["test"]), ms(cpu["postgres"]), ms(cpu["temporal"]), ms(cpu["other"]-min(cpu["other"], workerCPU)))
	}
}

// freeLoopbackAddr is a loopback address with a port nothing listens on now.
func freeLoopbackAddr(b testing.TB) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// procJiffies is a process's CPU time (user + system) in clock ticks.
func procJiffies(pid int) uint64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	return ut + st
}

// procStatusKB reads fields (VmRSS, VmHWM, …) of /proc/PID/status, in KiB.
func procStatusKB(pid int, fields ...string) []int {
	out := make([]int, len(fields))
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(raw), "\n") {
		for i, f := range fields {
			if v, ok := strings.CutPrefix(line, f+":"); ok {
				out[i], _ = strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			}
		}
	}
	return out
}

// serverActions sums the Temporal server's `action` counter (-1: no URL, or
// unreadable).
func serverActions(hc *http.Client, url string) float64 {
	if url == "" {
		return -1
	}
	m, err := scrape(hc, url, "action{")
	if err != nil {
		return -1
	}
	return m["action{"]
}

// scrape sums, per wanted prefix, the samples of a Prometheus exposition whose
// line starts with it (a metric name, or a name and "{").
func scrape(hc *http.Client, url string, wanted ...string) (map[string]float64, error) {
	resp, err := hc.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		for _, w := range wanted {
			if !strings.HasPrefix(line, w) {
				continue
			}
			rest := line[len(w):]
			if !strings.HasSuffix(w, "{") && rest != "" && rest[0] != ' ' && rest[0] != '{' {
				continue // a longer name
			}
			if i := strings.LastIndexByte(line, ' '); i > 0 {
				if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
					out[w] += v
				}
			}
		}
	}
	return out, nil
}

// procSampler samples a process's RSS and its metrics endpoint every tick.
type procSampler struct {
	pid        int
	metricsURL string
	start      time.Time
	mu         sync.Mutex
	samples    []procSample
	cur        string
	done       chan struct{}
	stopped    chan struct{}
}

type procSample struct {
	at                 time.Duration
	phase              string
	rssKB, hwmKB       int
	goroutines, heapMB float64
	stickyCache        float64
}

func (p *procSampler) phase(name string) {
	p.mu.Lock()
	p.cur = name
	p.mu.Unlock()
	p.sample()
}

func (p *procSampler) run(every time.Duration) {
	p.done, p.stopped = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.stopped)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.done:
				return
			case <-t.C:
				p.sample()
			}
		}
	}()
}

func (p *procSampler) stop() {
	select {
	case <-p.done:
	default:
		close(p.done)
		<-p.stopped
	}
}

func (p *procSampler) sample() {
	kb := procStatusKB(p.pid, "VmRSS", "VmHWM")
	s := procSample{at: time.Since(p.start), rssKB: kb[0], hwmKB: kb[1]}
	hc := &http.Client{Timeout: 2 * time.Second}
	if m, err := scrape(hc, p.metricsURL, "go_goroutines", "go_memstats_heap_inuse_bytes", "temporal_sticky_cache_size"); err == nil {
		s.goroutines, s.heapMB, s.stickyCache = m["go_goroutines"], m["go_memstats_heap_inuse_bytes"]/(1<<20), m["temporal_sticky_cache_size"]
	}
	p.mu.Lock()
	s.phase = p.cur
	p.samples = append(p.samples, s)
	p.mu.Unlock()
}

// peakKB is the process's peak RSS (its VmHWM) so far.
func (p *procSampler) peakKB() int {
	p.sample()
	p.mu.Lock()
	defer p.mu.Unlock()
	peak := 0
	for _, s := range p.samples {
		peak = max(peak, s.hwmKB, s.rssKB)
	}
	return peak
}

// phaseSummary is each phase's peak RSS, goroutines, Go heap and sticky cache.
func (p *procSampler) phaseSummary() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for i := 0; i < len(p.samples); {
		ph := p.samples[i].phase
		var rss, g, heap, cache float64
		for ; i < len(p.samples) && p.samples[i].phase == ph; i++ {
			s := p.samples[i]
			rss, g, heap, cache = max(rss, float64(s.rssKB)/1024), max(g, s.goroutines), max(heap, s.heapMB), max(cache, s.stickyCache)
		}
		out = append(out, fmt.Sprintf("%s: RSS %.0f MB, Go heap in use %.0f MB, goroutines %.0f, sticky cache %.0f", ph, rss, heap, g, cache))
	}
	return strings.Join(out, "; ")
}

// series is at most n samples spread over the run: seconds, phase and RSS.
func (p *procSampler) series(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	step := max(1, len(p.samples)/n)
	for i := 0; i < len(p.samples); i += step {
		s := p.samples[i]
		out = append(out, fmt.Sprintf("%.0fs %s %.0fMB", s.at.Seconds(), s.phase, float64(s.rssKB)/1024))
	}
	return strings.Join(out, ", ")
}
