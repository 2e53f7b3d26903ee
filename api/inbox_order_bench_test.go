package api_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/retention"
	"github.com/herald-notify/herald/internal/testenv"
)

// BenchmarkDueSequenceCost is what the per-user due sequence adds to a
// notification, accept → inbox: the same in-app burst (n notifications, 16
// clients, each POST then the next) through two Heralds on the same services,
// one with the due sequence (the default: the accept path numbers each
// notification before its 202, the run checks it, the inbox row copies it)
// and one without (apitest.Options.NoDueSequence: the floor). Rounds alternate
// floor and due so both see the same machine; each reports the median over the
// rounds of notifications per second from the first POST to the last inbox
// row, and due/floor, the throughput ratio (1.0: free). Two shapes: 50 users
// (one counter lock each, no waiting) and one user (every numbering takes the
// same lock). Against the test services:
//
//	go test -run '^$' -bench BenchmarkDueSequenceCost -benchtime 1x -timeout 20m ./api/
func BenchmarkDueSequenceCost(b *testing.B) {
	const n, clients, rounds = 400, 16, 3
	// One user's burst must fit in the inbox: the default cap (100 items) would
	// prune the burst while it is counted.
	policy := retention.Defaults
	policy.InboxItems = 2 * n
	floor := apitest.Start(b, apitest.Options{NoDueSequence: true, Retention: policy})
	due := apitest.Start(b, apitest.Options{Retention: policy})
	for _, users := range []int{50, 1} {
		b.Run(fmt.Sprintf("users=%d", users), func(b *testing.B) {
			for range b.N {
				var floorRates, dueRates []float64
				for r := range rounds {
					floorRates = append(floorRates, inboxBurst(b, floor, fmt.Sprintf("floor-%d-%d", users, r), users, n, clients))
					dueRates = append(dueRates, inboxBurst(b, due, fmt.Sprintf("due-%d-%d", users, r), users, n, clients))
				}
				f, d := median(floorRates), median(dueRates)
				b.ReportMetric(f, "floor_per_s")
				b.ReportMetric(d, "due_per_s")
				b.ReportMetric(d/f, "due/floor")
			}
		})
	}
}

// inboxBurst sends n in-app notifications to users users of a new tenant from
// clients concurrent clients and returns notifications per second from the
// first POST to the moment the n-th inbox row exists.
func inboxBurst(b *testing.B, h *apitest.Harness, name string, users, n, clients int) float64 {
	b.Helper()
	tenantID, key := h.TenantWith(name, e2eTemplates...)
	for u := range users {
		createUser(h, key, fmt.Sprintf("u%03d", u))
	}
	pool := testenv.Pool(b)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				r := h.Submit(key, map[string]any{"user_id": fmt.Sprintf("u%03d", int(i)%users), "template_id": "hi", "channels": []string{"in_app"},
					"data": map[string]any{"title": fmt.Sprintf("n%d", i), "body": "b"}, "idempotency_key": fmt.Sprintf("%s-%d", name, i)})
				if r.Status != http.StatusAccepted {
					b.Errorf("submit %d: %d %s", i, r.Status, r.Body)
					return
				}
			}
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var rows int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM inbox WHERE tenant_id = $1`, tenantID).Scan(&rows); err != nil {
			b.Fatal(err)
		}
		if rows == n {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: %d of %d inbox rows after 5 minutes", name, rows, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return float64(n) / time.Since(start).Seconds()
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
