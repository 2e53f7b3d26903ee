package activities_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/templates"
)

// laneScenario: a backlog of bulk notifications is submitted, then critical ones
// arrive one by one while the backlog drains. It returns each critical
// notification's accept → delivered latency and how much of the backlog was still
// undelivered when each critical one was delivered.
type laneResult struct {
	critical      []time.Duration
	bulkLeft      []int // undelivered bulk notifications when each critical one was delivered
	bulkSubmit    time.Duration
	bulkDrained   time.Duration
	bulkUndrained int // bulk notifications still undelivered when the scenario stopped waiting
	bulkAccepted  int
}

func runLaneScenario(tb testing.TB, bulk, critical int, drainWait time.Duration) laneResult {
	h := apitest.Start(tb, apitest.Options{})
	tenantID, key := h.Tenant("lanes")
	h.Template(key, templates.Template{ID: "newsletter", Category: "marketing",
		InApp: &templates.InAppContent{Title: "News {{.n}}", Body: "This week at the shop"}})
	h.Template(key, templates.Template{ID: "password_reset", Category: "security", Critical: true,
		InApp: &templates.InAppContent{Title: "Reset your password", Body: "Code {{.code}}"}})
	const users = 50
	for u := range users {
		h.PutUser(key, fmt.Sprintf("u%d", u), map[string]any{"locale": "en"})
	}

	var res laneResult
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(bulk) {
					return
				}
				r := h.Submit(key, map[string]any{"user_id": fmt.Sprintf("u%d", i%users),
					"template_id": "newsletter", "priority": "bulk", "data": map[string]any{"n": i}})
				if r.Status != http.StatusAccepted {
					tb.Errorf("bulk submit: %d %s", r.Status, r.Body)
					return
				}
			}
		}()
	}
	wg.Wait()
	res.bulkSubmit = time.Since(start)
	res.bulkAccepted = bulk

	delivered := func() int {
		n, err := h.Store.CountInboxForTemplate(context.Background(), tenantID, "newsletter")
		if err != nil {
			tb.Fatal(err)
		}
		return n
	}
	for c := range critical {
		sent := time.Now()
		id := h.Accept(key, map[string]any{"user_id": "u0", "template_id": "password_reset",
			"data": map[string]any{"code": strconv.Itoa(100000 + c)}})
		deadline := sent.Add(60 * time.Second)
		for {
			st := h.Do(http.MethodGet, "/v1/notifications/"+id, key, nil)
			if st.Str("status") == "delivered" {
				res.critical = append(res.critical, time.Since(sent))
				res.bulkLeft = append(res.bulkLeft, bulk-delivered())
				break
			}
			if time.Now().After(deadline) {
				tb.Fatalf("critical notification %s not delivered within 60 s", id)
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Wait for the backlog to drain, at most drainWait (then report how much was left).
	for delivered() < bulk && time.Since(start) < drainWait {
		time.Sleep(200 * time.Millisecond)
	}
	res.bulkDrained = time.Since(start)
	res.bulkUndrained = bulk - delivered()
	return res
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p*float64(len(s))+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

// TestCriticalOvertakesBulkBacklog is the small CI version of the priority-lane
// scenario: every critical notification is delivered while most of the bulk backlog
// ahead of it is still waiting (it does not queue behind it). The latency goal
// itself is measured by BenchmarkCriticalDuringBulkBacklog.
func TestCriticalOvertakesBulkBacklog(t *testing.T) {
	if testing.Short() {
		t.Skip("drains a backlog; run without -short")
	}
	const bulk, critical = 600, 5
	res := runLaneScenario(t, bulk, critical, 5*time.Minute)
	t.Logf("bulk %d submitted in %s, drained in %s; critical latencies %v, bulk still waiting at each: %v",
		bulk, res.bulkSubmit.Round(time.Millisecond), res.bulkDrained.Round(time.Millisecond), res.critical, res.bulkLeft)
	// The first critical notification arrives right after the whole backlog was
	// submitted: in one shared queue it would wait for the backlog ahead of it.
	if res.bulkUndrained > 0 {
		t.Fatalf("%d bulk notifications still undelivered after 5 minutes", res.bulkUndrained)
	}
	if res.bulkLeft[0] < bulk/4 {
		t.Fatalf("the first critical notification was delivered only when %d of %d bulk ones were left: it queued behind the backlog", res.bulkLeft[0], bulk)
	}
}

// BenchmarkCriticalDuringBulkBacklog measures critical-lane latency while a bulk
// backlog drains (the goal docs/bench.md measures against: p99 ≤ 2 s over ≥ 20
// critical sends with ≥ 10,000 bulk queued). Run: make bench-lanes
// (HERALD_BENCH_BULK, HERALD_BENCH_CRITICAL tune it).
func BenchmarkCriticalDuringBulkBacklog(b *testing.B) {
	bulk, critical := envInt("HERALD_BENCH_BULK", 10000), envInt("HERALD_BENCH_CRITICAL", 20)
	for range b.N {
		res := runLaneScenario(b, bulk, critical, time.Duration(envInt("HERALD_BENCH_DRAIN_WAIT_SEC", 60))*time.Second)
		p50, p99 := percentile(res.critical, 0.5), percentile(res.critical, 0.99)
		b.ReportMetric(float64(p50.Milliseconds()), "critical-p50-ms")
		b.ReportMetric(float64(p99.Milliseconds()), "critical-p99-ms")
		b.ReportMetric(float64(res.bulkUndrained), "bulk-left")
		b.Logf("bulk=%d (submitted in %s; %d still undelivered after %s) critical=%d p50=%s p99=%s max=%s; bulk still queued at each critical delivery: %v",
			bulk, res.bulkSubmit.Round(time.Millisecond), res.bulkUndrained, res.bulkDrained.Round(time.Second), critical, p50, p99,
			percentile(res.critical, 1), res.bulkLeft)
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
