package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/flows"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/internal/templates"
	"github.com/herald-notify/herald/internal/testenv"
	"github.com/herald-notify/herald/workflows"
)

// flowEnv drives flow runs on the real stack (API harness, worker, PostgreSQL,
// Temporal) through workflows.Client, as the API's trigger does.
type flowEnv struct {
	t        *testing.T
	h        *apitest.Harness
	client   *workflows.Client
	pool     *pgxpool.Pool
	tenantID string
	key      string
}

func newFlowEnv(t *testing.T, opts apitest.Options) *flowEnv {
	t.Helper()
	h := apitest.Start(t, opts)
	tenantID, key := h.TenantWith("flows", "alert")
	h.Template(key, templates.Template{ID: "comment_digest", Category: "comments",
		InApp: &templates.InAppContent{Title: "Comments", Body: `{{.digest.count}} new comments`},
		Email: &templates.EmailContent{Subject: "{{.digest.count}} new comments", Text: `{{range .digest.items}}{{.text}} {{end}}`}})
	return &flowEnv{t: t, h: h, client: workflows.NewClient(h.Temporal, h.TaskQueue), pool: testenv.Pool(t), tenantID: tenantID, key: key}
}

// trigger starts one event of def for user, as POST /v1/notifications with a
// flow_id does, and returns the event's notification id.
func (e *flowEnv) trigger(flowID string, def flows.Definition, user string, data map[string]any) string {
	e.t.Helper()
	k := ids.IdempotencyKeyHash(fmt.Sprintf("%s-%s-%d-%p", flowID, user, time.Now().UnixNano(), &data))
	in := workflows.FlowInput{TenantID: e.tenantID, UserID: user, FlowID: flowID, FlowVersion: 1, Flow: def,
		Data: templates.Data(data), DedupWindow: 2 * time.Second, BodyHash: k[:]}
	var run workflows.StartedRun
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		run, err = e.client.StartFlow(ctx, ids.NotificationWorkflowID(e.tenantID, k), herald.LaneNormal, in)
		cancel()
		if err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		e.t.Errorf("start flow: %v", err)
		return ""
	}
	return ids.NotificationID(k, run.RunID)
}

func (e *flowEnv) count(query string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", query, err)
	}
	return n
}

// digests lists the closed digests of the tenant that sent something, with
// their event counts.
func (e *flowEnv) sentDigests() map[string]int {
	e.t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT id, count FROM digests WHERE tenant_id = $1 AND status = $2`, e.tenantID, herald.DigestSent)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			e.t.Fatal(err)
		}
		out[id] = n
	}
	return out
}

// inboxBodies lists a user's inbox item bodies.
func (e *flowEnv) inboxBodies(user string) []string {
	e.t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT body FROM inbox WHERE tenant_id = $1 AND user_id = $2 ORDER BY created_at`, e.tenantID, user)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var b string
		if err := rows.Scan(&b); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// joined counts the tenant's events in digest rows (claimed or waiting).
func (e *flowEnv) joined(user string) int {
	return e.count(`SELECT count(*) FROM digest_events e JOIN flow_runs r ON r.tenant_id = e.tenant_id AND r.notification_id = e.notification_id
		WHERE e.tenant_id = $1 AND r.user_id = $2`, e.tenantID, user)
}

func digestFlow(window string, channels ...herald.Channel) flows.Definition {
	var def flows.Definition
	raw := fmt.Sprintf(`{"category":"comments","steps":[{"type":"digest","window":%q,"key":"{{.thread_id}}"},
		{"type":"send","template_id":"comment_digest","channels":[]}]}`, window)
	if err := json.Unmarshal([]byte(raw), &def); err != nil {
		panic(err)
	}
	def.Steps[1].Channels = channels
	return def
}

// TestFlowDigestThousandConcurrentEventsOneDigest: 1,000 events for one user
// and key submitted concurrently within about a second → exactly one digest
// of count 1,000, sent once per channel (one inbox item, one email).
func TestFlowDigestThousandConcurrentEventsOneDigest(t *testing.T) {
	e := newFlowEnv(t, apitest.Options{})
	e.h.PutUser(e.key, "ada", map[string]any{"email": "ada@example.com"})
	def := digestFlow("25s", herald.ChannelInApp, herald.ChannelEmail)
	const n = 1000
	start := time.Now()
	var wg sync.WaitGroup
	var accepted atomic.Int64
	sem := make(chan struct{}, 64)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if id := e.trigger("comments", def, "ada", map[string]any{"thread_id": "t1", "text": fmt.Sprintf("c%d", i)}); id != "" {
				accepted.Add(1)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d events accepted in %s", accepted.Load(), time.Since(start))
	if accepted.Load() != n {
		t.Fatalf("accepted %d of %d", accepted.Load(), n)
	}
	e.h.Eventually(60*time.Second, "every event in the digest", func() bool { return e.joined("ada") == n })
	open, err := e.h.Store.OpenDigests(context.Background(), e.tenantID, "ada")
	if err != nil || len(open) != 1 || open[0].Count != n || open[0].Key != "t1" || open[0].FlowID != "comments" {
		t.Fatalf("open digests = %+v, %v; want one of %d", open, err, n)
	}
	if err := e.client.FlushDigest(context.Background(), e.tenantID, "comments", "ada", "t1"); err != nil {
		t.Fatal(err)
	}
	e.h.Eventually(30*time.Second, "the digest's in-app item", func() bool { return len(e.inboxBodies("ada")) >= 1 })
	e.h.Eventually(30*time.Second, "the digest's email", func() bool {
		return e.count(`SELECT count(*) FROM sandbox_messages WHERE tenant_id = $1 AND channel = 'email'`, e.tenantID) >= 1
	})
	time.Sleep(time.Second) // anything sent twice would show by now
	got := e.sentDigests()
	if len(got) != 1 {
		t.Fatalf("digests sent: %v, want exactly one", got)
	}
	for _, c := range got {
		if c != n {
			t.Fatalf("digest count %d, want %d", c, n)
		}
	}
	if b := e.inboxBodies("ada"); len(b) != 1 || b[0] != fmt.Sprintf("%d new comments", n) {
		t.Fatalf("inbox = %q, want one item of %d comments", b, n)
	}
	if c := e.count(`SELECT COALESCE(sum(calls), 0)::int FROM sandbox_messages WHERE tenant_id = $1 AND channel = 'email'`, e.tenantID); c != 1 {
		t.Fatalf("email sent %d times, want 1", c)
	}
	if open, _ := e.h.Store.OpenDigests(context.Background(), e.tenantID, "ada"); len(open) != 0 {
		t.Fatalf("digests still open after the flush: %+v", open)
	}
}

// TestFlowDigestTenKeysNeverMixed: 10 keys × 100 events → exactly 10 digests of
// 100, each holding only its own key's events.
func TestFlowDigestTenKeysNeverMixed(t *testing.T) {
	e := newFlowEnv(t, apitest.Options{})
	e.h.PutUser(e.key, "bob", map[string]any{})
	def := digestFlow("12s", herald.ChannelInApp)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for k := 0; k < 10; k++ {
		for i := 0; i < 100; i++ {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				e.trigger("threads", def, "bob", map[string]any{"thread_id": fmt.Sprintf("k%d", k), "text": "x"})
			}()
		}
	}
	wg.Wait()
	e.h.Eventually(60*time.Second, "every event claimed", func() bool {
		return e.count(`SELECT count(*) FROM digest_events WHERE tenant_id = $1 AND digest_id IS NOT NULL`, e.tenantID) == 1000
	})
	mixed := e.count(`SELECT count(*) FROM (SELECT digest_id FROM digest_events WHERE tenant_id = $1 GROUP BY digest_id
		HAVING count(DISTINCT data->>'thread_id') > 1) m`, e.tenantID)
	if mixed != 0 {
		t.Fatalf("%d digests mix keys", mixed)
	}
	got := e.sentDigests()
	perKey := e.count(`SELECT count(DISTINCT digest_key) FROM digest_events WHERE tenant_id = $1`, e.tenantID)
	t.Logf("digests %v over %d keys", got, perKey)
	if perKey != 10 {
		t.Fatalf("%d digest keys, want 10", perKey)
	}
	if len(got) != 10 {
		t.Fatalf("%d digests sent, want 10 (one per key): %v", len(got), got)
	}
	e.h.Eventually(30*time.Second, "ten inbox items", func() bool { return len(e.inboxBodies("bob")) == 10 })
	for _, b := range e.inboxBodies("bob") {
		if b != "100 new comments" {
			t.Fatalf("inbox item %q, want 100 new comments", b)
		}
	}
}

var _ = contract.DigestWorkflow
