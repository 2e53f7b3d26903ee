package activities_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/flows"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/templates"
	"github.com/herald-notify/herald/internal/testenv"
	"github.com/herald-notify/herald/workflows"
)

// TestDigestsSurviveWorkerKills SIGKILLs a real `herald worker` process four
// times while 200 users' digests (1-second fixed windows, three events each,
// sent in-app) are open and closing, restarting it each time. No event is
// lost: every accepted event is claimed by exactly one digest and the sent
// digests add up to the events. None is sent twice: each closed digest has
// exactly one continuation run (the send's workflow ID derives from the digest
// id) and one inbox item, whose count matches the digest's.
func TestDigestsSurviveWorkerKills(t *testing.T) {
	bin, f, h := crashHarness(t, apitest.Options{})
	tenantID, key := h.Tenant("digest-crash")
	h.Template(key, templates.Template{ID: "digest", Category: "comments",
		InApp: &templates.InAppContent{Title: "Comments", Body: `{{.digest.count}} new comments`}})
	const users, perUser = 200, 3
	rows := make([]store.User, users)
	for i := range rows {
		rows[i] = store.User{UserID: fmt.Sprintf("u%03d", i)}
	}
	if err := h.Store.InsertUsers(context.Background(), tenantID, rows); err != nil {
		t.Fatal(err)
	}
	var def flows.Definition
	if err := json.Unmarshal([]byte(`{"category":"comments","steps":[{"type":"digest","window":"1s"},
		{"type":"send","template_id":"digest","channels":["in_app"]}]}`), &def); err != nil {
		t.Fatal(err)
	}
	w := startWorkerProcess(t, bin, h, f, "HERALD_WORKER_STOP_TIMEOUT=0")
	client := workflows.NewClient(h.Temporal, h.TaskQueue)

	// The events go in while the worker is killed and restarted every 1.5 s.
	stopKilling := make(chan struct{})
	killed := make(chan int)
	go func() {
		n := 0
		defer func() { killed <- n }()
		for n < 4 {
			select {
			case <-stopKilling:
				return
			case <-time.After(1500 * time.Millisecond):
			}
			w.kill()
			n++
			time.Sleep(300 * time.Millisecond)
			w.start()
		}
	}()
	var accepted []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for round := 0; round < perUser; round++ {
		for u := 0; u < users; u++ {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				k := ids.IdempotencyKeyHash(fmt.Sprintf("crash-%d-%d", u, round))
				in := workflows.FlowInput{TenantID: tenantID, UserID: fmt.Sprintf("u%03d", u), FlowID: "comments", FlowVersion: 1, Flow: def,
					Data: templates.Data{"n": round}, DedupWindow: time.Second, BodyHash: k[:]}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				run, err := client.StartFlow(ctx, ids.NotificationWorkflowID(tenantID, k), herald.LaneNormal, in)
				if err != nil {
					t.Errorf("start: %v", err)
					return
				}
				mu.Lock()
				accepted = append(accepted, ids.NotificationID(k, run.RunID))
				mu.Unlock()
			}()
		}
		time.Sleep(700 * time.Millisecond) // the next round lands across some windows' close
	}
	wg.Wait()
	n := <-killed
	close(stopKilling)
	t.Logf("%d events accepted, %d kills", len(accepted), n)
	if n < 3 {
		t.Fatalf("only %d kills happened", n)
	}

	pool := testenv.Pool(t)
	count := func(q string, args ...any) int {
		var v int
		if err := pool.QueryRow(context.Background(), q, args...).Scan(&v); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return v
	}
	// Locally the claims end within a minute; a loaded CI machine (two
	// packages' tests at once) took over two, so the wait is generous and a
	// timeout says how far they got.
	for deadline := time.Now().Add(240 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		claimed := count(`SELECT count(*) FROM digest_events WHERE tenant_id = $1 AND digest_id IS NOT NULL AND notification_id = ANY($2)`,
			tenantID, accepted)
		if claimed == len(accepted) {
			break
		}
		if time.Now().After(deadline) {
			written := count(`SELECT count(*) FROM digest_events WHERE tenant_id = $1 AND notification_id = ANY($2)`, tenantID, accepted)
			t.Fatalf("after 4 min, %d of %d events claimed by a digest (%d rows written)", claimed, len(accepted), written)
		}
	}
	sent := count(`SELECT count(*) FROM digests WHERE tenant_id = $1 AND status = $2`, tenantID, herald.DigestSent)
	h.Eventually(60*time.Second, "one inbox item per sent digest", func() bool {
		return count(`SELECT count(*) FROM inbox WHERE tenant_id = $1`, tenantID) >= sent
	})
	time.Sleep(2 * time.Second) // a second send would show by now
	if sum := count(`SELECT COALESCE(sum(count), 0)::int FROM digests WHERE tenant_id = $1 AND status = $2`, tenantID, herald.DigestSent); sum != len(accepted) {
		t.Fatalf("sent digests hold %d events, %d accepted", sum, len(accepted))
	}
	if twice := count(`SELECT count(*) FROM (SELECT digest_id FROM flow_runs WHERE tenant_id = $1 AND digest_id IS NOT NULL
		GROUP BY digest_id HAVING count(*) > 1) d`, tenantID); twice != 0 {
		t.Fatalf("%d digests continued twice", twice)
	}
	if runs := count(`SELECT count(*) FROM flow_runs WHERE tenant_id = $1 AND digest_id IS NOT NULL`, tenantID); runs != sent {
		t.Fatalf("%d continuation runs for %d sent digests", runs, sent)
	}
	items := 0
	total := 0
	r, err := pool.Query(context.Background(), `SELECT body FROM inbox WHERE tenant_id = $1`, tenantID)
	if err != nil {
		t.Fatal(err)
	}
	for r.Next() {
		var body string
		if err := r.Scan(&body); err != nil {
			t.Fatal(err)
		}
		v, err := strconv.Atoi(strings.TrimSuffix(body, " new comments"))
		if err != nil {
			t.Fatalf("inbox body %q", body)
		}
		items++
		total += v
	}
	r.Close()
	t.Logf("%d digests sent, %d inbox items holding %d events", sent, items, total)
	if items != sent || total != len(accepted) {
		t.Fatalf("%d inbox items holding %d events; want %d items holding %d", items, total, sent, len(accepted))
	}
}
