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
	enumspb "go.temporal.io/api/enums/v1"

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
	// dedup is each event's dedup window (how long its run stays open).
	dedup time.Duration
}

func newFlowEnv(t *testing.T, opts apitest.Options) *flowEnv {
	t.Helper()
	h := apitest.Start(t, opts)
	tenantID, key := h.TenantWith("flows", "alert")
	h.Template(key, templates.Template{ID: "comment_digest", Category: "comments",
		InApp: &templates.InAppContent{Title: "Comments", Body: `{{.digest.count}} new comments`},
		Email: &templates.EmailContent{Subject: "{{.digest.count}} new comments", Text: `{{range .digest.items}}{{.text}} {{end}}`}})
	return &flowEnv{t: t, h: h, client: workflows.NewClient(h.Temporal, h.TaskQueue), pool: testenv.Pool(t), tenantID: tenantID, key: key,
		dedup: 15 * time.Second}
}

// trigger starts one event of def for user, as POST /v1/notifications with a
// flow_id does, and returns the event's notification id.
func (e *flowEnv) trigger(flowID string, def flows.Definition, user string, data map[string]any) string {
	e.t.Helper()
	k := ids.IdempotencyKeyHash(fmt.Sprintf("%s-%s-%d-%p", flowID, user, time.Now().UnixNano(), &data))
	in := workflows.FlowInput{TenantID: e.tenantID, UserID: user, FlowID: flowID, FlowVersion: 1, Flow: def,
		Data: templates.Data(data), DedupWindow: e.dedup, BodyHash: k[:]}
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

// putFlow saves a flow through the API (PUT /v1/flows/{flow_id}).
func (e *flowEnv) putFlow(flowID string, def flows.Definition) {
	e.t.Helper()
	e.h.MustDo(201, "PUT", "/v1/flows/"+flowID, e.key, def)
}

// triggerAPI sends one event through the API (POST /v1/notifications with a
// flow_id) and returns its notification id.
func (e *flowEnv) triggerAPI(flowID, user string, data map[string]any) string {
	e.t.Helper()
	return e.h.MustDo(202, "POST", "/v1/notifications", e.key, map[string]any{"user_id": user, "flow_id": flowID, "data": data,
		"idempotency_key": fmt.Sprintf("%s-%s-%d", flowID, user, apiTriggers.Add(1)), "dedup_ttl_sec": 15}).Str("notification_id")
}

// apiTriggers numbers triggerAPI's idempotency keys: unique however many
// goroutines post in the same nanosecond (a shared key with other data is a 422).
var apiTriggers atomic.Int64

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

// digestKnows waits until the digest of (flowID, user, key) has been
// signalled every event row of its key. An event's row is written before its
// run signals the digest, and a close claims the rows up to the highest seq
// it was signalled (MaxSeq; a row whose signal comes later opens the next
// window): a flush sent once the rows are all there but before the last
// signal arrives would send that event in the next digest. (Known, the count
// of signals, is no proof: an activity retry signals a seq twice.)
func (e *flowEnv) digestKnows(flowID, user, key string) {
	e.t.Helper()
	id := workflows.DigestWorkflowID(e.tenantID, flowID, user, key)
	e.h.Eventually(60*time.Second, "the digest "+id+" signalled its every row", func() bool {
		v, err := e.h.Temporal.QueryWorkflow(context.Background(), id, "", workflows.QueryDigest)
		if err != nil {
			return false
		}
		var st workflows.DigestState
		newest := e.count(`SELECT COALESCE(max(seq), 0) FROM digest_events WHERE tenant_id = $1 AND digest_key = $2`, e.tenantID, id)
		return v.Get(&st) == nil && newest > 0 && st.MaxSeq >= int64(newest)
	})
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

// TestFlowDigestConcurrentRunsOneDigest: events for one user and key, each
// with a run of its own (the path of a flow whose digest is not its first
// step), started concurrently → exactly one digest of all of them, sent once
// per channel (one inbox item, one email). The API's path for digest-first
// flows takes the 1,000 (TestFlowDigestFastPathThroughTheAPI); 300
// runs here keep the same race (64 starts in flight) within CI's time on two
// CPUs.
func TestFlowDigestConcurrentRunsOneDigest(t *testing.T) {
	e := newFlowEnv(t, apitest.Options{})
	e.h.PutUser(e.key, "ada", map[string]any{"email": "ada@example.com"})
	// A window longer than the test: the flush closes it once every event has
	// joined, however slowly this machine runs the events' flows.
	def := digestFlow("10m", herald.ChannelInApp, herald.ChannelEmail)
	const n = 300
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
	e.digestKnows("comments", "ada", "t1")
	open, _, err := e.h.Store.OpenDigests(context.Background(), e.tenantID, "ada", nil, 50)
	if err != nil || len(open) != 1 || open[0].Count != n || open[0].Key != "t1" || open[0].FlowID != "comments" {
		t.Fatalf("open digests = %+v, %v; want one of %d", open, err, n)
	}
	if err := e.client.FlushDigest(context.Background(), e.tenantID, "comments", "ada", "t1"); err != nil {
		t.Fatal(err)
	}
	e.h.Eventually(120*time.Second, "the digest's in-app item", func() bool { return len(e.inboxBodies("ada")) >= 1 })
	e.h.Eventually(120*time.Second, "the digest's email", func() bool {
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
	if open, _, _ := e.h.Store.OpenDigests(context.Background(), e.tenantID, "ada", nil, 50); len(open) != 0 {
		t.Fatalf("digests still open after the flush: %+v", open)
	}
	// What the digest cost in Temporal: its history (every run of it).
	wid := workflows.DigestWorkflowID(e.tenantID, "comments", "ada", "t1")
	events, runs := 0, 0
	for runID := e.h.Temporal.GetWorkflow(context.Background(), wid, "").GetRunID(); runID != ""; runs++ {
		it := e.h.Temporal.GetWorkflowHistory(context.Background(), wid, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		var first string
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			events++
			if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
				first = a.GetContinuedExecutionRunId()
			}
		}
		runID = first
	}
	t.Logf("the digest of %d events: %d history events over %d run(s)", n, events, runs)
}

// TestFlowDigestTenKeysNeverMixed: 10 keys × 100 events, posted concurrently
// through the API → exactly 10 digests of 100, each holding only its own
// key's events.
func TestFlowDigestTenKeysNeverMixed(t *testing.T) {
	e := newFlowEnv(t, apitest.Options{})
	e.h.PutUser(e.key, "bob", map[string]any{})
	e.putFlow("threads", digestFlow("10m", herald.ChannelInApp)) // flushed once every event has joined
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for k := 0; k < 10; k++ {
		for i := 0; i < 100; i++ {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				e.triggerAPI("threads", "bob", map[string]any{"thread_id": fmt.Sprintf("k%d", k), "text": "x"})
			}()
		}
	}
	wg.Wait()
	e.h.Eventually(120*time.Second, "every event joined", func() bool { return e.joined("bob") == 1000 })
	for k := 0; k < 10; k++ {
		e.digestKnows("threads", "bob", fmt.Sprintf("k%d", k))
	}
	for k := 0; k < 10; k++ {
		if err := e.client.FlushDigest(context.Background(), e.tenantID, "threads", "bob", fmt.Sprintf("k%d", k)); err != nil {
			t.Fatal(err)
		}
	}
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

// TestFlowDigestEventsAcrossTheClose: a tight loop of events while 1-second
// windows close → every accepted event is in exactly one digest (the claimed
// rows add up to the accepted ids, each id once).
func TestFlowDigestEventsAcrossTheClose(t *testing.T) {
	e := newFlowEnv(t, apitest.Options{})
	e.h.PutUser(e.key, "cy", map[string]any{})
	def := digestFlow("1s", herald.ChannelInApp)
	var accepted []string
	deadline := time.Now().Add(3500 * time.Millisecond)
	for time.Now().Before(deadline) {
		if id := e.trigger("loop", def, "cy", map[string]any{"thread_id": "t", "text": "x"}); id != "" {
			accepted = append(accepted, id)
		}
	}
	e.h.Eventually(60*time.Second, "every event claimed", func() bool {
		return e.count(`SELECT count(*) FROM digest_events WHERE tenant_id = $1 AND digest_id IS NOT NULL`, e.tenantID) == len(accepted)
	})
	claimed := e.count(`SELECT count(DISTINCT notification_id) FROM digest_events WHERE tenant_id = $1 AND digest_id IS NOT NULL
		AND notification_id = ANY($2)`, e.tenantID, accepted)
	got := e.sentDigests()
	sum := 0
	for _, n := range got {
		sum += n
	}
	t.Logf("%d events in %d digests %v", len(accepted), len(got), got)
	if claimed != len(accepted) || sum != len(accepted) {
		t.Fatalf("accepted %d, claimed %d distinct, digests add up to %d", len(accepted), claimed, sum)
	}
	if len(got) < 2 {
		t.Fatalf("the loop spanned %d window(s); want at least two closes", len(got))
	}
	e.h.Eventually(30*time.Second, "one inbox item per digest", func() bool { return len(e.inboxBodies("cy")) == len(got) })
}

// TestFlowThrottle: 20 triggers through the API, limit 5 per hour → 5 sent,
// 15 throttled, visible in each event's status and steps.
func TestFlowThrottle(t *testing.T) {
	e := newFlowEnv(t, apitest.Options{})
	e.h.PutUser(e.key, "dee", map[string]any{})
	e.putFlow("alerts", throttleFlow(t, 5))
	var wg sync.WaitGroup
	idsCh := make(chan string, 20)
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			idsCh <- e.triggerAPI("alerts", "dee", map[string]any{"title": "t", "body": fmt.Sprintf("b%d", i)})
		}()
	}
	wg.Wait()
	close(idsCh)
	statuses := map[herald.NotificationStatus]int{}
	for id := range idsCh {
		var st herald.NotificationStatus
		e.h.Eventually(30*time.Second, "a final status", func() bool {
			n, err := e.h.Store.GetNotification(context.Background(), e.tenantID, id)
			st = n.Status
			return err == nil && (st == herald.NotificationThrottled || st == herald.NotificationDelivered)
		})
		statuses[st]++
		run, err := e.h.Store.FlowRunOf(context.Background(), e.tenantID, id)
		if err != nil || len(run.Steps) == 0 || run.Steps[0].Type != "throttle" {
			t.Fatalf("flow run of %s: %+v %v", id, run, err)
		}
		want := map[herald.NotificationStatus]herald.StepOutcome{herald.NotificationThrottled: herald.StepThrottled, herald.NotificationDelivered: herald.StepAllowed}[st]
		if run.Steps[0].Outcome != want {
			t.Fatalf("%s: status %s but throttle step %s", id, st, run.Steps[0].Outcome)
		}
	}
	if statuses[herald.NotificationDelivered] != 5 || statuses[herald.NotificationThrottled] != 15 {
		t.Fatalf("statuses %v, want 5 delivered and 15 throttled", statuses)
	}
	if n := len(e.inboxBodies("dee")); n != 5 {
		t.Fatalf("%d inbox items, want 5", n)
	}
}

func throttleFlow(t *testing.T, limit int) flows.Definition {
	var def flows.Definition
	if err := json.Unmarshal([]byte(fmt.Sprintf(`{"category":"alerts","steps":[{"type":"throttle","limit":%d,"window":"1h"},
		{"type":"send","template_id":"alert","channels":["in_app"]}]}`, limit)), &def); err != nil {
		t.Fatal(err)
	}
	return def
}

func escalationFlow(t *testing.T) flows.Definition {
	var def flows.Definition
	if err := json.Unmarshal([]byte(`{"category":"alerts","steps":[
		{"type":"send","id":"inapp","template_id":"alert","channels":["in_app"]},
		{"type":"wait","for":"seen","step":"inapp","timeout":"3s"},
		{"type":"send","id":"mail","template_id":"alert","channels":["email"]}]}`), &def); err != nil {
		t.Fatal(err)
	}
	return def
}

// TestFlowEscalation, through the API (PUT /v1/flows, POST /v1/notifications
// with flow_id): in-app now; marking it seen within the wait (through the
// inbox API, whose mark path wakes the run) → no email; not seen → an email
// after the timeout.
func TestFlowEscalation(t *testing.T) {
	e := newFlowEnv(t, apitest.Options{})
	e.h.PutUser(e.key, "eve", map[string]any{"email": "eve@example.com"})
	e.putFlow("escalate", escalationFlow(t))

	seenID := e.triggerAPI("escalate", "eve", map[string]any{"title": "t", "body": "b"})
	var item string
	e.h.Eventually(20*time.Second, "the in-app item", func() bool {
		run, err := e.h.Store.FlowRunOf(context.Background(), e.tenantID, seenID)
		if err != nil || len(run.Steps) < 2 {
			return false
		}
		item = run.Steps[0].NotificationID
		return item != "" && run.Steps[1].Type == "wait"
	})
	start := time.Now()
	e.h.MustDo(200, "POST", "/v1/users/eve/inbox/"+item+"/seen", e.key, nil)
	e.h.Eventually(10*time.Second, "the wait ends seen", func() bool {
		run, _ := e.h.Store.FlowRunOf(context.Background(), e.tenantID, seenID)
		return len(run.Steps) == 2 && run.Steps[1].Outcome == herald.StepSeen
	})
	if time.Since(start) > 2500*time.Millisecond {
		t.Fatalf("the seen mark woke the run after %s; the timeout is 3s", time.Since(start))
	}

	unseenID := e.triggerAPI("escalate", "eve", map[string]any{"title": "t2", "body": "b2"})
	e.h.Eventually(30*time.Second, "the escalation email", func() bool {
		run, _ := e.h.Store.FlowRunOf(context.Background(), e.tenantID, unseenID)
		return len(run.Steps) == 3 && run.Steps[1].Outcome == herald.StepTimedOut && run.Steps[2].NotificationID != "" &&
			run.Steps[2].FinishedAt != nil
	})
	time.Sleep(500 * time.Millisecond)
	if n := e.count(`SELECT count(*) FROM sandbox_messages WHERE tenant_id = $1 AND channel = 'email'`, e.tenantID); n != 1 {
		t.Fatalf("%d emails, want 1 (the unseen one only)", n)
	}
	run, _ := e.h.Store.FlowRunOf(context.Background(), e.tenantID, seenID)
	if len(run.Steps) != 2 {
		t.Fatalf("the seen run went on: %+v", run.Steps)
	}
}

// TestFlowCancelBeforeClose: DELETE /v1/notifications/{id} of a digested event
// before its digest closes takes it out (the digest counts the rest); after
// the close, a cancel is refused.
func TestFlowCancelBeforeClose(t *testing.T) {
	e := newFlowEnv(t, apitest.Options{})
	e.h.PutUser(e.key, "fay", map[string]any{})
	def := digestFlow("4s", herald.ChannelInApp)
	var evs []string
	for i := 0; i < 3; i++ {
		evs = append(evs, e.trigger("cancel", def, "fay", map[string]any{"thread_id": "t", "text": "x"}))
	}
	e.h.Eventually(20*time.Second, "three events joined", func() bool { return e.joined("fay") == 3 })
	e.h.MustDo(200, "DELETE", "/v1/notifications/"+evs[0], e.key, nil)
	e.h.Eventually(20*time.Second, "the digest sent", func() bool { return len(e.inboxBodies("fay")) == 1 })
	if b := e.inboxBodies("fay"); b[0] != "2 new comments" {
		t.Fatalf("digest %q, want 2 new comments", b[0])
	}
	r := e.h.Do("DELETE", "/v1/notifications/"+evs[1], e.key, nil)
	if r.Status != 409 {
		t.Fatalf("cancel after the close: %d %s, want 409", r.Status, r.Body)
	}
	run, err := e.h.Store.FlowRunOf(context.Background(), e.tenantID, evs[0])
	if err != nil || run.Digest == nil || run.Digest.Status != string(herald.NotificationCancelled) {
		t.Fatalf("cancelled event's run: %+v %v", run, err)
	}
	run, err = e.h.Store.FlowRunOf(context.Background(), e.tenantID, evs[1])
	if err != nil || run.Digest == nil || run.Digest.Status != herald.DigestSent || run.Digest.DigestID == "" {
		t.Fatalf("digested event's run: %+v %v", run, err)
	}
	e.h.Eventually(10*time.Second, "the digest's own notification", func() bool {
		run, _ := e.h.Store.FlowRunOf(context.Background(), e.tenantID, evs[1])
		return run.Digest != nil && run.Digest.NotificationID != ""
	})
}

// TestFlowCancelDigestedEventAfterItsRunClosed: an event's run ends with its
// dedup window, its digest may stay open longer; DELETE still takes it out.
func TestFlowCancelDigestedEventAfterItsRunClosed(t *testing.T) {
	e := newFlowEnv(t, apitest.Options{})
	e.dedup = time.Second
	e.h.PutUser(e.key, "gus", map[string]any{})
	def := digestFlow("10m", herald.ChannelInApp)
	first := e.trigger("late", def, "gus", map[string]any{"thread_id": "t", "text": "x"})
	e.trigger("late", def, "gus", map[string]any{"thread_id": "t", "text": "y"})
	e.h.Eventually(20*time.Second, "two events joined", func() bool { return e.joined("gus") == 2 })
	k, runID, err := ids.ParseNotificationID(first)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.h.Temporal.GetWorkflow(context.Background(), ids.NotificationWorkflowID(e.tenantID, k), runID).Get(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	r := e.h.MustDo(200, "DELETE", "/v1/notifications/"+first, e.key, nil)
	if r.Str("status") != string(herald.NotificationCancelled) {
		t.Fatalf("cancel answered %s", r.Body)
	}
	if err := e.client.FlushDigest(context.Background(), e.tenantID, "late", "gus", "t"); err != nil {
		t.Fatal(err)
	}
	e.h.Eventually(30*time.Second, "the digest sent", func() bool { return len(e.inboxBodies("gus")) == 1 })
	if b := e.inboxBodies("gus"); b[0] != "1 new comments" {
		t.Fatalf("digest %q, want the one event left", b[0])
	}
}

// TestFlowDigestFastPathThroughTheAPI: the digest races through the
// API, where a digest-first flow's events have no run of their own (a row, then
// a signal coalesced with the key's concurrent events): 1,000 concurrent events
// of one key → one digest of 1,000, one inbox item; then 16 clients in a tight
// loop across 1-second windows → every accepted id in exactly one digest.
func TestFlowDigestFastPathThroughTheAPI(t *testing.T) {
	e := newFlowEnv(t, apitest.Options{})
	e.h.PutUser(e.key, "fay", map[string]any{})
	e.putFlow("burst", digestFlow("1h", herald.ChannelInApp))
	const n = 1000
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			e.triggerAPI("burst", "fay", map[string]any{"thread_id": "b", "text": fmt.Sprintf("c%d", i)})
		}()
	}
	wg.Wait()
	if got := e.joined("fay"); got != n {
		t.Fatalf("%d events in digest rows after %d 202s; want every one (a 202 comes after its row)", got, n)
	}
	if err := e.client.FlushDigest(context.Background(), e.tenantID, "burst", "fay", "b"); err != nil {
		t.Fatal(err)
	}
	e.h.Eventually(60*time.Second, "the burst's digest sent", func() bool { return len(e.inboxBodies("fay")) == 1 })
	if got := e.sentDigests(); len(got) != 1 {
		t.Fatalf("digests sent: %v, want one", got)
	}
	for _, c := range e.sentDigests() {
		if c != n {
			t.Fatalf("the burst's digest holds %d, want %d", c, n)
		}
	}

	e.putFlow("loop", digestFlow("1s", herald.ChannelInApp))
	var mu sync.Mutex
	var accepted []string
	deadline := time.Now().Add(3500 * time.Millisecond)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				id := e.triggerAPI("loop", "fay", map[string]any{"thread_id": "l", "text": "x"})
				mu.Lock()
				accepted = append(accepted, id)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	inLoop := func() int {
		return e.count(`SELECT count(*) FROM digest_events WHERE tenant_id = $1 AND digest_id IS NOT NULL AND notification_id = ANY($2)`,
			e.tenantID, accepted)
	}
	e.h.Eventually(60*time.Second, "every looped event claimed", func() bool { return inLoop() == len(accepted) })
	distinct := e.count(`SELECT count(DISTINCT notification_id) FROM digest_events WHERE tenant_id = $1 AND digest_id IS NOT NULL
		AND notification_id = ANY($2)`, e.tenantID, accepted)
	got := e.sentDigests()
	sum := 0
	for _, c := range got {
		sum += c
	}
	t.Logf("%d looped events in %d digests (with the burst's): %v", len(accepted), len(got)-1, got)
	if distinct != len(accepted) || sum != len(accepted)+n {
		t.Fatalf("accepted %d, claimed %d distinct, digests add up to %d (the burst's %d included)", len(accepted), distinct, sum, n)
	}
	if len(got) < 3 {
		t.Fatalf("the loop spanned %d window(s); want at least two closes", len(got)-1)
	}
}
