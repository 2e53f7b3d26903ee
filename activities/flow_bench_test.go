package activities_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
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
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(raw))
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
	if resp.StatusCode != status {
		return fmt.Errorf("POST %s: %d, want %d: %s", url, resp.StatusCode, status, got)
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

// rssKB is this process's peak resident set (VmHWM), in KiB.
func rssKB() int {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	return 0
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
// digest-first flow: no run per event), then every digest flushed. It reports
// this process's peak RSS (API and worker in one process), Temporal actions
// and history events per event (the digests' histories) and the largest
// digest's history.
//
// Run it with: go test -run '^$' -bench BenchmarkDailyDigests -benchtime 1x ./activities/
func BenchmarkDailyDigests(b *testing.B) {
	users, perUser := envInt("HERALD_BENCH_DIGEST_USERS", 500), envInt("HERALD_BENCH_DIGEST_EVENTS", 4)
	h := apitest.Start(b, apitest.Options{})
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
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		suffix := strings.ReplaceAll(time.Now().Format("150405.000"), ".", "")
		flowID := "daily-" + suffix
		h.MustDo(http.StatusCreated, http.MethodPut, "/v1/flows/"+flowID, key, def)
		n := users * perUser
		took := concurrently(b, n, 32, func(i int) error {
			u := fmt.Sprintf("d%05d", i%users)
			return postJSON(hc, h.URL+"/v1/notifications", key, map[string]any{"user_id": u, "flow_id": flowID,
				"idempotency_key": fmt.Sprintf("daily-%s-%d", suffix, i), "data": map[string]any{"what": fmt.Sprintf("event %d for %s", i, u)}},
				http.StatusAccepted)
		})
		h.Eventually(30*time.Minute, "every digest open", func() bool {
			return count(`SELECT count(*) FROM digests WHERE tenant_id = $1 AND flow_id = $2 AND status = 'open'`, tenantID, flowID) == users
		})
		joined := took
		open := users
		for u := 0; u < users; u++ {
			if err := wf.FlushDigest(ctx, tenantID, flowID, fmt.Sprintf("d%05d", u), ""); err != nil {
				b.Fatal(err)
			}
		}
		h.Eventually(30*time.Minute, "every digest sent", func() bool {
			return count(`SELECT count(*) FROM inbox WHERE tenant_id = $1 AND body LIKE '% things happened%'`, tenantID) >= users*(it+1)
		})
		if got := count(`SELECT COALESCE(sum(count), 0)::int FROM digests WHERE tenant_id = $1 AND flow_id = $2 AND status = $3`,
			tenantID, flowID, herald.DigestSent); got != n {
			b.Fatalf("the digests hold %d events, want %d", got, n)
		}
		time.Sleep(2 * time.Second)
		// Temporal's share: every digest (an event has no run of its own).
		dgEvents, dgActions, largest := 0, 0, 0
		for u := 0; u < users; u++ {
			e, a := historyActions(b, h.Temporal, workflows.DigestWorkflowID(tenantID, flowID, fmt.Sprintf("d%05d", u), ""))
			dgEvents, dgActions, largest = dgEvents+e, dgActions+a, max(largest, e)
		}
		perEventActions := float64(dgActions) / float64(n)
		b.ReportMetric(float64(rssKB())/1024, "peak-rss-MB")
		b.ReportMetric(perEventActions, "actions/event")
		b.ReportMetric(float64(largest), "largest-digest-history")
		b.Logf("%d users x %d events into daily digests (%d open before the flush): accepted through the API in %s; peak RSS of API+worker %d MB (goal < 256); "+
			"per event: %.2f Temporal actions (in its digest; no run of its own; sends not counted), %.2f history events; largest digest history %d events",
			users, perUser, open, joined.Round(time.Millisecond), rssKB()/1024, perEventActions, float64(dgEvents)/float64(n), largest)
	}
}
