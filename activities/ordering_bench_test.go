package activities_test

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/testenv"
)

// BenchmarkOrdered measures ordered delivery against the same notifications
// without an ordering key, in one run on the same servers (docs/ordering.md,
// docs/bench.md):
//
//   - across users: 2,000 email notifications to 1,000 users (2 each), 32
//     submitted at a time, accept → every one sent (the sandbox provider), in
//     four chunks ABBA (unordered, ordered, ordered, unordered); ordered with
//     ordering_key "user". Goal: ordered/unordered throughput ≥ 0.8.
//   - one user's burst: 200 notifications to one user, 32 submitted at a time,
//     accept → all sent, ordered vs unordered (ordered hands them to the
//     provider one after another: the ratio is the price of the guarantee).
//   - cost: the CPU (this process: API and worker; PostgreSQL; Temporal) per
//     notification of the across-users chunks, ordered minus unordered, and the
//     history events per notification workflow by type, ordered minus
//     unordered (each is a Temporal action or part of one).
//
// Run it with: go test -run '^$' -bench BenchmarkOrdered -benchtime 1x ./activities/
func BenchmarkOrdered(b *testing.B) {
	h := apitest.Start(b, apitest.Options{})
	tenantID, key := h.TenantWith("bench-ordered")
	ctx := context.Background()
	const users, perUser, workers = 1000, 2, 32
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}
	concurrently(b, users, workers, func(i int) error {
		return putJSON(hc, h.URL+fmt.Sprintf("/v1/users/b%04d", i), key, map[string]any{"email": fmt.Sprintf("b%04d@example.com", i)})
	})
	pool := testenv.Pool(b)
	sent := func(template string) int {
		var n int
		if err := pool.QueryRow(ctx, `
			SELECT count(*) FROM deliveries d JOIN notifications n ON n.tenant_id = d.tenant_id AND n.id = d.notification_id
			WHERE n.tenant_id = $1 AND n.template_id = $2 AND d.status IN ('sent', 'delivered')`, tenantID, template).Scan(&n); err != nil {
			b.Fatal(err)
		}
		return n
	}
	notifications := h.URL + "/v1/notifications"
	// run submits n notifications of a fresh template (user(i) for the i-th),
	// ordered or not, and waits until every one is sent; it returns the
	// throughput (sent per second from the first submission) and the CPU per
	// notification.
	chunk := 0
	run := func(name string, n int, user func(i int) string, ordered bool) (rate, cpu float64, template string) {
		chunk++
		template = fmt.Sprintf("bench_ord_%d_%d", chunk, time.Now().UnixNano()%1e6)
		h.Template(key, apitest.SimpleTemplate(template))
		var took time.Duration
		cpu = cpuPer(b, name, n, func() {
			start := time.Now()
			concurrently(b, n, workers, func(i int) error {
				body := map[string]any{"user_id": user(i), "template_id": template, "channels": []string{"email"},
					"data": map[string]any{"title": fmt.Sprintf("%s %d", name, i)}}
				if ordered {
					body["ordering_key"] = "user"
				}
				return postJSON(hc, notifications, key, body, http.StatusAccepted)
			})
			deadline := time.Now().Add(5 * time.Minute)
			for sent(template) < n {
				if time.Now().After(deadline) {
					b.Fatalf("%s: %d of %d sent after 5 minutes", name, sent(template), n)
				}
				time.Sleep(20 * time.Millisecond)
			}
			took = time.Since(start)
		})
		return float64(n) / took.Seconds(), cpu, template
	}
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		spread := func(i int) string { return fmt.Sprintf("b%04d", i%users) }
		const half = users * perUser / 2
		u1, uc1, uTpl := run("unordered, 1,000 users", half, spread, false)
		o1, oc1, oTpl := run("ordered, 1,000 users", half, spread, true)
		o2, oc2, _ := run("ordered, 1,000 users", half, spread, true)
		u2, uc2, _ := run("unordered, 1,000 users", half, spread, false)
		unordered, ordered := (u1+u2)/2, (o1+o2)/2
		ratio := ordered / unordered
		b.ReportMetric(ratio, "users-ratio")
		b.Logf("across 1,000 users: unordered %.0f/s, ordered %.0f/s (accept → sent): ratio %.2f (goal >= 0.8: %s)",
			unordered, ordered, ratio, map[bool]string{true: "PASS", false: "MISS"}[ratio >= 0.8])
		addedCPU := (oc1+oc2)/2 - (uc1+uc2)/2
		b.ReportMetric(addedCPU, "added-cpu-ms/notification")
		b.Logf("CPU per notification: unordered %.3f ms, ordered %.3f ms: added %.3f ms", (uc1+uc2)/2, (oc1+oc2)/2, addedCPU)

		const burst = 200
		one := func(int) string { return "b0000" }
		bu, _, _ := run("unordered, one user's burst", burst, one, false)
		bo, _, _ := run("ordered, one user's burst", burst, one, true)
		b.ReportMetric(bo/bu, "burst-ratio")
		b.Logf("one user's burst of %d: unordered %.0f/s, ordered %.0f/s: ratio %.2f", burst, bu, bo, bo/bu)

		uEv, uTotal := historyEvents(b, h, tenantID, uTpl, 20)
		oEv, oTotal := historyEvents(b, h, tenantID, oTpl, 20)
		b.ReportMetric(oTotal-uTotal, "added-history-events/notification")
		var added []string
		for typ, n := range oEv {
			if d := n - uEv[typ]; d > 0.01 || d < -0.01 {
				added = append(added, fmt.Sprintf("%s %+.2f", typ, d))
			}
		}
		sort.Strings(added)
		b.Logf("history events per notification: unordered %.1f, ordered %.1f (added: %s)", uTotal, oTotal, strings.Join(added, ", "))
	}
}

// historyEvents averages, over up to n notifications of template, the history
// events of their workflows by type, and their total.
func historyEvents(b *testing.B, h *apitest.Harness, tenantID, template string, n int) (map[string]float64, float64) {
	b.Helper()
	ctx := context.Background()
	rows, err := testenv.Pool(b).Query(ctx, `
		SELECT COALESCE(workflow_id, notification_workflow_id(tenant_id, id, campaign_id)), COALESCE(run_id, notification_run_id(id, campaign_id))
		FROM notifications WHERE tenant_id = $1 AND template_id = $2 LIMIT $3`,
		tenantID, template, n)
	if err != nil {
		b.Fatal(err)
	}
	type run struct{ wid, rid string }
	var runs []run
	for rows.Next() {
		var r run
		if err := rows.Scan(&r.wid, &r.rid); err != nil {
			b.Fatal(err)
		}
		runs = append(runs, r)
	}
	rows.Close()
	out := map[string]float64{}
	total := 0.0
	for _, r := range runs {
		it := h.Temporal.GetWorkflowHistory(ctx, r.wid, r.rid, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				b.Fatal(err)
			}
			out[strings.TrimPrefix(ev.GetEventType().String(), "EVENT_TYPE_")] += 1 / float64(len(runs))
			total += 1 / float64(len(runs))
		}
	}
	return out, total
}

// putJSON PUTs body and wants 200 or 201.
func putJSON(hc *http.Client, url, key string, body any) error {
	return sendJSON(hc, http.MethodPut, url, key, body, http.StatusOK, http.StatusCreated)
}
