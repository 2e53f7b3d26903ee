package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/herald-notify/herald/activities"
	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/dbx"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/retention"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/testenv"
	"github.com/herald-notify/herald/workflows"
)

// runMaintenance runs one maintenance workflow on the harness's task queue
// (what the Schedule starts) and returns its result.
func runMaintenance(t *testing.T, h *apitest.Harness) workflows.MaintenanceResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := h.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: testenv.UniqueName(t, "maintenance"), TaskQueue: h.TaskQueue},
		workflows.MaintenanceWorkflow, workflows.MaintenanceInput{})
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.MaintenanceResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatalf("maintenance run: %v", err)
	}
	return res
}

// A tenant's retention settings are bounded by the operator's: shorter is
// taken, longer is a 400 naming the field, and so is anything malformed; the
// operator's maxima are read-only.
func TestRetentionSettingsWithinOperatorBounds(t *testing.T) {
	op := retention.Defaults
	op.Notifications = 48 * time.Hour
	h := apitest.Start(t, apitest.Options{NoWorker: true, Retention: op})
	_, key := h.Tenant("shop")
	got := h.MustDo(http.StatusOK, http.MethodGet, "/v1/settings", key, nil)
	keep := got.JSON["retention"].(map[string]any)
	if keep["notifications"] != "48h0m0s" || keep["inbox_items"] != float64(100) || got.JSON["retention_max"].(map[string]any)["audit"] != "8760h0m0s" {
		t.Fatalf("settings: %s", got.Body)
	}
	for _, c := range []struct {
		retention map[string]any
		status    int
		code      string
		field     string
	}{
		{map[string]any{"notifications": "49h"}, 400, "invalid_field", "retention.notifications"},
		{map[string]any{"notifications": "0s"}, 400, "invalid_field", "retention.notifications"},
		{map[string]any{"notifications": "1.5s"}, 400, "invalid_field", "retention.notifications"},
		{map[string]any{"notifications": 3600}, 400, "invalid_type", "retention.notifications"},
		{map[string]any{"inbox_items": 101}, 400, "invalid_field", "retention.inbox_items"},
		{map[string]any{"inbox_items": 0}, 400, "invalid_field", "retention.inbox_items"},
		{map[string]any{"inbox_items": "10"}, 400, "invalid_type", "retention.inbox_items"},
		{map[string]any{"forever": "1h"}, 400, "unknown_field", "retention.forever"},
	} {
		apitest.WantError(t, h.Do(http.MethodPut, "/v1/settings", key, map[string]any{"retention": c.retention}), c.status, c.code, c.field)
	}
	apitest.WantError(t, h.Do(http.MethodPut, "/v1/settings", key, map[string]any{"retention_max": map[string]any{"audit": "9999h0m0s"}}),
		http.StatusForbidden, "operator_only", "retention_max")
	put := h.MustDo(http.StatusOK, http.MethodPut, "/v1/settings", key, map[string]any{"retention": map[string]any{"notifications": "90s", "inbox_items": 10}})
	if keep := put.JSON["retention"].(map[string]any); keep["notifications"] != "1m30s" || keep["inbox_items"] != float64(10) || keep["audit"] != "8760h0m0s" {
		t.Fatalf("after PUT: %s", put.Body)
	}
	// GET's document PUT back as it is changes nothing.
	back := h.MustDo(http.StatusOK, http.MethodGet, "/v1/settings", key, nil)
	delete(back.JSON, "api_rate_per_second")
	delete(back.JSON, "api_burst")
	delete(back.JSON, "daily_quota")
	again := h.MustDo(http.StatusOK, http.MethodPut, "/v1/settings", key, back.JSON)
	if again.JSON["retention"].(map[string]any)["notifications"] != "1m30s" {
		t.Fatalf("PUT of GET's document: %s", again.Body)
	}
}

// Retention end to end with a short clock: a tenant keeps its notifications,
// inbox, sandbox messages and audit log for seconds; after one maintenance
// run what is older is gone (the API answers 404 for it) and what is newer is
// kept, as is everything of a tenant without short settings; the tenant's
// audit log says what went; the run is recorded.
func TestRetentionEndToEnd(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	_, key := h.TenantWith("short", e2eTemplates...)
	_, otherKey := h.TenantWith("long", e2eTemplates...)
	for _, k := range []string{key, otherKey} {
		createUser(h, k, "ada")
	}
	h.MustDo(http.StatusOK, http.MethodPut, "/v1/settings", key, map[string]any{"retention": map[string]any{
		"notifications": "4s", "inbox_age": "4s", "sandbox": "4s", "audit": "4s", "webhooks": "4s", "dead_letters": "4s", "campaigns": "4s"}})
	send := func(k string, ttl int) string {
		id := h.Accept(k, map[string]any{"user_id": "ada", "template_id": "order_shipped", "channels": []string{"in_app", "email"},
			"data": map[string]any{"order_id": "o1"}, "idempotency_key": freshKey("ret"), "dedup_ttl_sec": ttl})
		h.AwaitChannel(k, id, herald.ChannelEmail, herald.DeliverySent, "", 30*time.Second)
		h.AwaitChannel(k, id, herald.ChannelInApp, herald.DeliveryDelivered, "", 30*time.Second)
		return id
	}
	old, otherOld := send(key, 3600), send(otherKey, 3600)
	time.Sleep(5 * time.Second)
	fresh := send(key, 1)
	time.Sleep(1500 * time.Millisecond) // fresh's dedup window (1 s) is over: its ledger row goes
	if d, err := h.Store.GetNotification(context.Background(), tenantOfKey(t, h, key), fresh); err != nil || d.Dedup == nil {
		t.Fatalf("fresh's ledger row before the run: %+v %v", d.Dedup, err)
	}

	res := runMaintenance(t, h)
	if res.Deleted["notifications"] < 1 || res.Deleted["inbox"] < 1 || res.Deleted["audit_log"] < 1 || res.Deleted["sandbox_messages"] < 1 || res.Deleted["dedup_ledger"] < 1 {
		t.Fatalf("the run deleted %v", res.Deleted)
	}
	apitest.WantError(t, h.Do(http.MethodGet, "/v1/notifications/"+old, key, nil), http.StatusNotFound, "not_found", "")
	h.MustDo(http.StatusOK, http.MethodGet, "/v1/notifications/"+fresh, key, nil)
	h.MustDo(http.StatusOK, http.MethodGet, "/v1/notifications/"+otherOld, otherKey, nil)
	inboxIDs := func(k string) []string {
		var ids []string
		for _, it := range supportItems(t, h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/ada/inbox", k, nil)) {
			ids = append(ids, it["notification_id"].(string))
		}
		return ids
	}
	if got := inboxIDs(key); !slices.Equal(got, []string{fresh}) {
		t.Fatalf("short tenant's inbox %v, want only %s", got, fresh)
	}
	if got := inboxIDs(otherKey); !slices.Equal(got, []string{otherOld}) {
		t.Fatalf("long tenant's inbox %v", got)
	}
	for id, want := range map[string]int{old: 0, fresh: 1} {
		if got := supportItems(t, h.MustDo(http.StatusOK, http.MethodGet, "/v1/sandbox/messages?notification_id="+id, key, nil)); len(got) != want {
			t.Errorf("sandbox messages of %s: %d, want %d", id, len(got), want)
		}
	}
	if got := supportItems(t, h.MustDo(http.StatusOK, http.MethodGet, "/v1/sandbox/messages?notification_id="+otherOld, otherKey, nil)); len(got) != 1 {
		t.Errorf("long tenant's sandbox message pruned")
	}
	// The settings change is past the audit retention; the prune's own entry is there.
	log := supportItems(t, h.MustDo(http.StatusOK, http.MethodGet, "/v1/audit-log", key, nil))
	if len(log) != 1 || log[0]["action"] != activities.AuditRetentionPruned || log[0]["api_key_id"] != activities.AuditMaintenanceKeyID {
		t.Fatalf("audit log after the run: %v", log)
	}
	if pruned := supportItems(t, h.MustDo(http.StatusOK, http.MethodGet, "/v1/audit-log?action="+activities.AuditRetentionPruned, key, nil)); len(pruned) != 1 {
		t.Fatalf("audit log filtered by %s: %v", activities.AuditRetentionPruned, pruned)
	}
	if d, _ := h.Store.GetNotification(context.Background(), tenantOfKey(t, h, key), fresh); d.Dedup != nil {
		t.Fatalf("fresh's ledger row outlived its window: %+v", d.Dedup)
	}
	if otherLog := supportItems(t, h.MustDo(http.StatusOK, http.MethodGet, "/v1/audit-log?action=settings.put", otherKey, nil)); len(otherLog) != 0 {
		t.Logf("long tenant's audit log: %v", otherLog)
	}
	runs, err := h.Store.LatestMaintenanceRuns(context.Background(), 5)
	if err != nil || len(runs) == 0 {
		t.Fatalf("no maintenance run recorded: %v", err)
	}
}

// The inbox keeps exactly the tenant's newest N per user while deliveries
// race through the API, and a cap lowered later is applied by the next run.
func TestInboxCapUnderConcurrentDeliveries(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	tenantID, key := h.TenantWith("capped", e2eTemplates...)
	createUser(h, key, "ada")
	h.MustDo(http.StatusOK, http.MethodPut, "/v1/settings", key, map[string]any{"retention": map[string]any{"inbox_items": 10}})
	const n = 30
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i] = h.Accept(key, map[string]any{"user_id": "ada", "template_id": "order_shipped", "channels": []string{"in_app"},
				"data": map[string]any{"order_id": fmt.Sprint(i)}, "idempotency_key": freshKey("cap")})
		}()
	}
	wg.Wait()
	// The feed's order is the due sequence (docs/inbox-order.md): the API
	// numbers each notification before its 202.
	type acc struct {
		id  string
		seq int64
	}
	var all []acc
	for _, id := range ids {
		h.AwaitChannel(key, id, herald.ChannelInApp, herald.DeliveryDelivered, "", 60*time.Second)
		seq, _ := h.MustDo(http.StatusOK, http.MethodGet, "/v1/notifications/"+id, key, nil).JSON["sequence"].(float64)
		if seq == 0 {
			t.Fatalf("%s has no due sequence", id)
		}
		all = append(all, acc{id, int64(seq)})
	}
	slices.SortFunc(all, func(a, b acc) int { return int(b.seq - a.seq) })
	newest := func(k int) []string {
		var out []string
		for _, a := range all[:k] {
			out = append(out, a.id)
		}
		return out
	}
	kept := func() []string {
		var out []string
		for _, it := range supportItems(t, h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/ada/inbox?limit=100", key, nil)) {
			out = append(out, it["notification_id"].(string))
		}
		return out
	}
	if got := kept(); !slices.Equal(got, newest(10)) {
		t.Fatalf("inbox %v, want the newest 10 %v", got, newest(10))
	}
	counts, _, _ := h.Store.GetInboxCounts(context.Background(), tenantID, "ada")
	recount, _ := h.Store.RecountInbox(context.Background(), tenantID, "ada")
	if counts != recount || counts.Total != 10 {
		t.Fatalf("counters %+v, recount %+v", counts, recount)
	}
	h.MustDo(http.StatusOK, http.MethodPut, "/v1/settings", key, map[string]any{"retention": map[string]any{"inbox_items": 4}})
	runMaintenance(t, h)
	if got := kept(); !slices.Equal(got, newest(4)) {
		t.Fatalf("after the cap went down to 4: %v, want %v", got, newest(4))
	}
}

// A partition past the operator's retention is detached and dropped while
// accepts go on: no accept fails, and no accept waits more than a bound over
// the slowest accept before the drop (the lock waits are measured and
// logged). The dropped partitions' rows are gone; the other partitions and
// the new notifications are untouched.
func TestPartitionDroppedWhileAcceptsContinue(t *testing.T) {
	keep := retention.Defaults
	keep.Notifications = 3 * retention.Day
	h := apitest.Start(t, apitest.Options{Retention: keep})
	tenantID, key := h.TenantWith("partitions", e2eTemplates...)
	createUser(h, key, "ada")
	ctx := context.Background()
	old := time.Now().Add(-5 * retention.Day)
	// The day may be gone already (an earlier run of the test on this database).
	for _, pt := range store.PartitionedTables[:3] {
		if _, err := h.Store.EnsurePartitions(ctx, pt, old, 0, &store.DDLStats{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 200 {
		if err := h.Store.InsertNotification(ctx, store.Notification{TenantID: tenantID, ID: fmt.Sprintf("n_old%03d", i), UserID: "ada",
			TemplateID: "order_shipped", Channels: []herald.Channel{herald.ChannelInApp, herald.ChannelEmail}, WorkflowID: "wf", RunID: "r",
			DedupKeyHash: "k", Status: herald.NotificationDelivered, AcceptedAt: old}); err != nil {
			t.Fatal(err)
		}
	}
	// They ended when they were accepted (a partition holding a notification
	// that ended within the retention is kept).
	if _, err := testenv.Pool(t).Exec(ctx, `UPDATE notifications SET updated_at = accepted_at WHERE tenant_id = $1`, tenantID); err != nil {
		t.Fatal(err)
	}
	var res contract.MaintenancePartitionsResult
	var err error
	m := acceptsMeanwhile(t, h, key, func() {
		res, err = h.Activities().MaintenancePartitions(ctx, contract.MaintenancePartitionsInput{Now: time.Now()})
	})
	if err != nil {
		t.Fatalf("partitions step: %v", err)
	}
	oldDay := store.PartitionedTables[0].PartitionName(store.PartitionedTables[0].Start(old))
	if !slices.Contains(res.Dropped, oldDay) {
		t.Fatalf("dropped %v, want %s among them", res.Dropped, oldDay)
	}
	t.Logf("dropped %d partitions in %s (%d DDL statements, %d lock retries, longest statement %s); %s",
		len(res.Dropped), m.took.Round(time.Millisecond), res.Statements, res.Retries, res.MaxWait.Round(time.Millisecond), m)
	m.check(t, "the drop")
	if _, err := h.Store.GetNotification(ctx, tenantID, "n_old000"); err == nil {
		t.Fatal("a notification of a dropped partition is still there")
	}
}

// meanwhile is what accepts through the API did before and during a
// maintenance statement (acceptsMeanwhile).
type meanwhile struct {
	took             time.Duration // the statement's
	before, during   time.Duration // the slowest accept
	nBefore, nDuring int
	failures         []string
}

func (m meanwhile) String() string {
	return fmt.Sprintf("accepts: %d before, slowest %s; %d during, slowest %s", m.nBefore, m.before.Round(time.Millisecond),
		m.nDuring, m.during.Round(time.Millisecond))
}

// check fails the test unless accepts ran during what, none failed, and
// none took more than the slowest before it + 1 s.
func (m meanwhile) check(t *testing.T, what string) {
	t.Helper()
	if len(m.failures) > 0 {
		t.Fatalf("%d accepts failed during %s, first: %s", len(m.failures), what, m.failures[0])
	}
	if m.nDuring == 0 {
		t.Fatalf("no accept ran during %s", what)
	}
	if bound := m.before + time.Second; m.during > bound {
		t.Fatalf("an accept took %s during %s, over the bound %s (the slowest before it + 1 s)", m.during, what, bound)
	}
}

// acceptsMeanwhile runs step while 4 clients accept in-app notifications
// through the API (after 1.5 s of them, the floor) and reports what they
// took.
func acceptsMeanwhile(t *testing.T, h *apitest.Harness, key string, step func()) meanwhile {
	t.Helper()
	type sample struct {
		start time.Time
		took  time.Duration
	}
	var mu sync.Mutex
	var samples []sample
	var m meanwhile
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				t0 := time.Now()
				r := h.Submit(key, map[string]any{"user_id": "ada", "template_id": "order_shipped", "channels": []string{"in_app"},
					"data": map[string]any{"order_id": "o"}, "idempotency_key": freshKey("meanwhile")})
				mu.Lock()
				samples = append(samples, sample{t0, time.Since(t0)})
				if r.Status != http.StatusAccepted {
					m.failures = append(m.failures, fmt.Sprintf("%d %s", r.Status, r.Body))
				}
				mu.Unlock()
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	start := time.Now()
	step()
	end := time.Now()
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	m.took = end.Sub(start)
	for _, s := range samples {
		switch {
		case s.start.Before(start):
			m.before, m.nBefore = max(m.before, s.took), m.nBefore+1
		case s.start.Before(end):
			m.during, m.nDuring = max(m.during, s.took), m.nDuring+1
		}
	}
	return m
}

// A closed partition's indexes are rebuilt packed (the maintenance
// workflow's compaction step) while accepts go on through the API and the
// day's notifications are read by id: no accept or read fails, no accept
// waits more than the bound over the slowest before, and the day's indexes
// end compacted. Its notifications are open (queued), so no other test's
// maintenance drops the day meanwhile.
func TestPartitionCompactedWhileAcceptsAndReadsContinue(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	tenantID, key := h.TenantWith("compact", e2eTemplates...)
	createUser(h, key, "ada")
	ctx := context.Background()
	pool := testenv.Pool(t)
	day := store.PartitionedTables[0].Start(time.Now().Add(-6 * retention.Day))
	for _, pt := range store.PartitionedTables[:2] {
		if _, err := h.Store.EnsurePartitions(ctx, pt, day, 0, &store.DDLStats{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, table := range []string{"notifications", "deliveries"} {
			if _, err := pool.Exec(context.Background(), `DELETE FROM `+table+` WHERE tenant_id = $1`, tenantID); err != nil {
				t.Error(err)
			}
		}
	})
	const n = 30000
	if _, err := pool.Exec(ctx, `
		INSERT INTO notifications (tenant_id, id, user_id, template_id, status, accepted_at)
		SELECT $1, decode(md5(random()::text) || md5(random()::text), 'hex'), 'ada', 'order_shipped', 'queued', $2::timestamptz + i * interval '1 s'
		FROM generate_series(1, $3::int) i`, tenantID, day, n); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO deliveries (tenant_id, notification_id, channel, status, accepted_at)
		SELECT tenant_id, id, 'in_app', 'queued', accepted_at FROM notifications WHERE tenant_id = $1`, tenantID); err != nil {
		t.Fatal(err)
	}
	var ids []string
	if err := pool.QueryRow(ctx, `SELECT array_agg(id) FROM (SELECT id FROM notifications WHERE tenant_id = $1 LIMIT 200) x`, tenantID).Scan(&ids); err != nil {
		t.Fatal(err)
	}
	// Another package's run may have compacted the day while it was empty:
	// unmarked, the day is rebuilt with its rows.
	testenv.UncommentIndexes(t, pool, store.PartitionedTables[0].PartitionName(day), store.PartitionedTables[1].PartitionName(day))
	// The day's notifications read by id all along.
	stopReads := make(chan struct{})
	readErr := make(chan error, 1)
	go func() {
		defer close(readErr)
		for i := 0; ; i++ {
			select {
			case <-stopReads:
				return
			default:
			}
			if _, err := h.Store.GetNotification(ctx, tenantID, ids[i%len(ids)]); err != nil {
				readErr <- err
				return
			}
		}
	}()
	var res contract.MaintenanceCompactResult
	var err error
	m := acceptsMeanwhile(t, h, key, func() {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			res, err = h.Activities().MaintenanceCompact(ctx, contract.MaintenanceCompactInput{Now: time.Now()})
			// Another package's run compacting (the same days): wait for it.
			if err != nil || !res.Busy || time.Now().After(deadline) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	close(stopReads)
	if err != nil {
		t.Fatalf("compaction step: %v", err)
	}
	if err := <-readErr; err != nil {
		t.Fatalf("a read of the day's notifications failed during the compaction: %v", err)
	}
	t.Logf("compacted %d indexes in %s (%.2f MB → %.2f MB); %s", len(res.Indexes), m.took.Round(time.Millisecond),
		float64(res.BytesBefore)/1e6, float64(res.BytesAfter)/1e6, m)
	m.check(t, "the compaction")
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE i.indrelid IN ($1::regclass, $2::regclass) AND COALESCE(obj_description(c.oid, 'pg_class'), '') <> $3`,
		store.PartitionedTables[0].PartitionName(day), store.PartitionedTables[1].PartitionName(day), store.CompactedComment).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d indexes of the day not compacted", left)
	}
}

// A notification whose send_at is further ahead than the notification
// history's retention sits in a partition past the cut-off before it is due:
// the partitions step keeps that day (notifications, deliveries, attempts)
// while it holds a notification not ended or ended within the retention, the
// prune pass deletes the day's other rows, and the day goes once what it kept
// has ended a retention ago.
func TestPartitionKeptWhileANotificationIsNotEnded(t *testing.T) {
	keep := retention.Defaults
	keep.Notifications = 3 * retention.Day
	h := apitest.Start(t, apitest.Options{Retention: keep, NoWorker: true})
	tenantID, _ := h.TenantWith("held", e2eTemplates...)
	ctx := context.Background()
	pool := testenv.Pool(t)
	// A day of its own, past the retention, that no other test of the
	// package writes to.
	day := store.PartitionedTables[0].Start(time.Now().Add(-9 * retention.Day))
	accepted := day.Add(2 * time.Hour)
	// Another day past the retention, where only an open dead letter keeps
	// a notification that failed at once.
	deadDay := store.PartitionedTables[0].Start(time.Now().Add(-8 * retention.Day))
	// Accepted half an hour before the cut-off and ended at once: past the
	// retention, in a day that is not past it yet. It goes with its day, not
	// row by row.
	recent := time.Now().Add(-keep.Notifications - 30*time.Minute)
	for _, pt := range store.PartitionedTables[:3] {
		for _, d := range []time.Time{day, deadDay, recent} {
			if _, err := h.Store.EnsurePartitions(ctx, pt, pt.Start(d), 0, &store.DDLStats{}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	insertAt := func(accepted time.Time, id string, status herald.NotificationStatus, ended time.Time, attemptAt time.Time) {
		t.Helper()
		if err := h.Store.InsertNotification(ctx, store.Notification{TenantID: tenantID, ID: id, UserID: "ada", TemplateID: "order_shipped",
			Channels: []herald.Channel{herald.ChannelEmail}, WorkflowID: "wf", RunID: "r", DedupKeyHash: "k", Status: status, AcceptedAt: accepted}); err != nil {
			t.Fatal(err)
		}
		if _, err := dbx.WithNotificationIDs(pool).Exec(ctx, `UPDATE notifications SET updated_at = $3 WHERE tenant_id = $1 AND id = $2`, tenantID, id, ended); err != nil {
			t.Fatal(err)
		}
		if !attemptAt.IsZero() {
			if _, err := dbx.WithNotificationIDs(pool).Exec(ctx, `INSERT INTO delivery_attempts (tenant_id, notification_id, channel, attempt, provider, outcome, at)
				VALUES ($1, $2, 'email', 1, 'sandbox', 'accepted', $3)`, tenantID, id, attemptAt); err != nil {
				t.Fatal(err)
			}
		}
	}
	insert := func(id string, status herald.NotificationStatus, ended time.Time, attemptAt time.Time) {
		t.Helper()
		insertAt(accepted, id, status, ended, attemptAt)
	}
	t.Cleanup(func() {
		for _, table := range []string{"notifications", "deliveries", "delivery_attempts", "dead_letters"} {
			if _, err := pool.Exec(context.Background(), `DELETE FROM `+table+` WHERE tenant_id = $1`, tenantID); err != nil {
				t.Error(err)
			}
		}
	})
	// Scheduled far ahead: not due yet, its delivery row is the guard.
	insert("n_ahead", herald.NotificationScheduled, accepted, time.Time{})
	// Accepted the same day and retried for days: ended yesterday, within
	// the retention; its attempt is in that day's attempts partition.
	insert("n_late", herald.NotificationDelivered, time.Now().Add(-retention.Day), day.Add(3*time.Hour))
	// Ended the day it was accepted: past the retention.
	insert("n_done", herald.NotificationDelivered, accepted.Add(time.Minute), day.Add(4*time.Hour))
	// Failed at once, its dead letter open: kept with its attempt.
	deadAccepted := deadDay.Add(2 * time.Hour)
	insertAt(deadAccepted, "n_dead", herald.NotificationFailed, deadAccepted.Add(time.Minute), deadAccepted.Add(time.Minute))
	if _, err := h.Store.PutDeadLetter(ctx, store.DeadLetter{TenantID: tenantID, NotificationID: "n_dead", Channel: herald.ChannelEmail,
		TemplateID: "order_shipped", Attempts: 1, LastError: "provider refused", Payload: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	insertAt(recent, "n_recent", herald.NotificationDelivered, recent.Add(time.Minute), time.Time{})
	deadNames := []string{store.PartitionedTables[0].PartitionName(deadDay), store.PartitionedTables[2].PartitionName(deadDay)}

	names := make([]string, 3)
	for i, pt := range store.PartitionedTables[:3] {
		names[i] = pt.PartitionName(day)
	}
	res, err := h.Activities().MaintenancePartitions(ctx, contract.MaintenancePartitionsInput{Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range append(names, deadNames...) {
		if slices.Contains(res.Dropped, name) || !slices.Contains(res.Held, name) {
			t.Fatalf("partition %s: dropped %v, held %v; want it held", name, res.Dropped, res.Held)
		}
	}
	for _, id := range []string{"n_ahead", "n_late"} {
		n, err := h.Store.GetNotification(ctx, tenantID, id)
		if err != nil || len(n.Deliveries) != 1 {
			t.Fatalf("%s after the partitions step: %+v, %v", id, n, err)
		}
	}
	// The prune pass deletes what the kept day holds past the retention:
	// this tenant's slices only (a batch a slice; a slice past its budget
	// starts no other tenant), so the 3-day retention deletes no row of the
	// tenants other tests (other packages, the same database) write to.
	pruneTenantSlices(t, h, tenantID)
	if _, err := h.Store.GetNotification(ctx, tenantID, "n_done"); err == nil {
		t.Fatal("n_done, ended past the retention, is still there after the prune pass")
	}
	var attempts int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM delivery_attempts WHERE tenant_id = $1`, tenantID).Scan(&attempts); err != nil || attempts != 2 {
		t.Fatalf("attempts left: %d (want n_late's and n_dead's), %v", attempts, err)
	}
	for _, id := range []string{"n_ahead", "n_late", "n_dead", "n_recent"} {
		if _, err := h.Store.GetNotification(ctx, tenantID, id); err != nil {
			t.Fatalf("%s after the prune pass: %v", id, err)
		}
	}
	// It ends now: kept a retention more.
	if err := h.Store.SetNotificationStatus(ctx, tenantID, "n_ahead", herald.NotificationDelivered); err != nil {
		t.Fatal(err)
	}
	if res, err = h.Activities().MaintenancePartitions(ctx, contract.MaintenancePartitionsInput{Now: time.Now()}); err != nil || !slices.Contains(res.Held, names[0]) {
		t.Fatalf("after n_ahead ended: held %v, %v", res.Held, err)
	}
	// A retention later: both ended 4 days ago (the clock is not moved on:
	// the step would drop the partitions the other tests write to today).
	if _, err := pool.Exec(ctx, `UPDATE notifications SET updated_at = now() - interval '4 days' WHERE tenant_id = $1`, tenantID); err != nil {
		t.Fatal(err)
	}
	if res, err = h.Activities().MaintenancePartitions(ctx, contract.MaintenancePartitionsInput{Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	// Gone (by this run, or by another test's run at the same moment: the
	// partitions are the database's, not the test's).
	for i, pt := range store.PartitionedTables[:3] {
		have, err := h.Store.Partitions(ctx, pt)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(have, func(p store.Partition) bool { return p.Name == names[i] }) {
			t.Fatalf("a retention after its notifications ended, %s is not dropped: dropped %v, held %v", names[i], res.Dropped, res.Held)
		}
	}
	for _, name := range deadNames {
		if !slices.Contains(res.Held, name) {
			t.Fatalf("%s, whose notification's dead letter is open, is not held: dropped %v, held %v", name, res.Dropped, res.Held)
		}
	}
}

// An operator cap lowered since the last maintenance run is applied to
// inboxes no write touches again: the next run walks every tenant's, though
// the tenant's own cap (the operator's) is not below the operator's.
func TestLoweredOperatorInboxCapIsAppliedByTheNextRun(t *testing.T) {
	op := retention.Defaults
	op.InboxItems = 20
	h := apitest.Start(t, apitest.Options{Retention: op, NoWorker: true})
	tenantID, key := h.TenantWith("opcap", e2eTemplates...)
	createUser(h, key, "ada")
	ctx := context.Background()
	pool := testenv.Pool(t)
	// Written under the operator's former cap, 100.
	before := store.New(pool)
	before.SetInboxCap(100)
	now := time.Now().UTC()
	var items []store.NewInboxItem
	for i := range 30 {
		items = append(items, store.NewInboxItem{TenantID: tenantID, UserID: "ada", NotificationID: fmt.Sprintf("n_%03d", i), Title: "t", Body: "b",
			CreatedAt: now.Add(time.Duration(i) * time.Second)})
	}
	if _, err := before.InsertInboxItems(ctx, items); err != nil {
		t.Fatal(err)
	}
	// The run before recorded the former cap.
	var runID int64
	if err := pool.QueryRow(ctx, `INSERT INTO maintenance_runs (workflow_id, run_id, started_at, report) VALUES ('opcap-test', 'r', now(), '{"inbox_items": 100}')
		RETURNING id`).Scan(&runID); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), `DELETE FROM maintenance_runs WHERE id >= $1 AND workflow_id = 'opcap-test'`, runID)
	})
	// This tenant's slices only: a slice a batch long, stopped once it moves
	// past the tenant (the walk is the last step).
	pruneTenantSlices(t, h, tenantID)
	counts, err := h.Store.RecountInbox(ctx, tenantID, "ada")
	if err != nil || counts.Total != 20 {
		t.Fatalf("after the run ada's inbox holds %d items (want the operator's new cap, 20), %v", counts.Total, err)
	}
	if stored, _, _ := h.Store.GetInboxCounts(ctx, tenantID, "ada"); stored != counts {
		t.Fatalf("counters %+v, recount %+v", stored, counts)
	}
	// The run records the cap it applied: the next one does not walk again.
	if err := h.Activities().MaintenanceReport(ctx, contract.MaintenanceReportInput{WorkflowID: "opcap-test", RunID: "r2", StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	var ownID int64
	var ownCap *int
	if err := pool.QueryRow(ctx, `SELECT id, (report->>'inbox_items')::int FROM maintenance_runs WHERE workflow_id = 'opcap-test' AND run_id = 'r2' AND id > $1`,
		runID).Scan(&ownID, &ownCap); err != nil || ownCap == nil || *ownCap != 20 {
		t.Fatalf("this run's report records cap %v, %v; want 20", ownCap, err)
	}
	// The next run reads it, unless a report written since (another test's,
	// on the same database) is newer.
	last, recorded, err := h.Store.LastMaintenanceInboxCap(ctx)
	if err != nil || !recorded {
		t.Fatalf("last recorded cap: recorded %v, %v", recorded, err)
	}
	var newer int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM maintenance_runs WHERE id > $1 AND report ? 'inbox_items'`, ownID).Scan(&newer); err != nil {
		t.Fatal(err)
	}
	if newer == 0 && last != 20 {
		t.Fatalf("last recorded cap %d; want this run's, 20", last)
	}
}

// A dead letter whose notification is gone (its day dropped once the dead
// letter was older than the dead-letter retention, before maintenance deleted
// the dead letter) cannot be redriven: the redrive answers 410
// notification_expired naming the notification, the bulk redrive lists it
// under expired instead of starting it, and a redrive workflow that reaches it
// anyway fails without claiming it (NotificationExpired, not retried).
func TestRedriveOfAnExpiredNotificationIsGone(t *testing.T) {
	t.Parallel()
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	tenantID, key := h.Tenant("redrive-expired")
	ctx := context.Background()
	id := deadLetter(t, h, tenantID, 1)
	d, err := h.Store.GetDeadLetter(ctx, tenantID, id)
	if err != nil {
		t.Fatal(err)
	}
	// Its partition dropped: the notification and its deliveries are gone.
	pool := testenv.Pool(t)
	for _, table := range []string{"notifications", "deliveries"} {
		col := "notification_id"
		if table == "notifications" {
			col = "id"
		}
		if _, err := dbx.WithNotificationIDs(pool).Exec(ctx, `DELETE FROM `+table+` WHERE tenant_id = $1 AND `+col+` = $2`, tenantID, d.NotificationID); err != nil {
			t.Fatal(err)
		}
	}
	r := h.Do(http.MethodPost, fmt.Sprintf("/v1/dead-letters/%d/redrive", id), key, nil)
	apitest.WantError(t, r, http.StatusGone, "notification_expired", "")
	if msg, _ := r.JSON["error"].(map[string]any)["message"].(string); !strings.Contains(msg, d.NotificationID) {
		t.Fatalf("message %q does not name the notification", msg)
	}
	r = h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/dead-letters/redrive", key, map[string]any{})
	if started, _ := r.JSON["started"].([]any); len(started) != 0 {
		t.Fatalf("bulk redrive started %v", started)
	}
	if expired, _ := r.JSON["expired"].([]any); len(expired) != 1 || expired[0] != float64(id) {
		t.Fatalf("bulk redrive's expired: %v, want [%d]", r.JSON["expired"], id)
	}
	_, err = h.Activities().BeginRedrive(ctx, contract.BeginRedriveInput{TenantID: tenantID, DeadLetterID: id})
	if !contract.NotificationExpired.Is(err) || !contract.IsNonRetryable(err) {
		t.Fatalf("BeginRedrive of an expired notification's dead letter: %v, want a non-retryable NotificationExpired", err)
	}
	if d, err := h.Store.GetDeadLetter(ctx, tenantID, id); err != nil || d.Status != store.DeadLetterOpen {
		t.Fatalf("the dead letter after the refused redrive: %+v, %v; want it open", d, err)
	}
}

// pruneTenantSlices runs the maintenance prune pass over tenantID's slices
// only, a batch a slice, stopping once it moves past the tenant: the prune of
// a test's own rows, which leaves the tenants other tests (other packages, the
// same database) write to alone.
func pruneTenantSlices(t *testing.T, h *apitest.Harness, tenantID string) {
	t.Helper()
	from := contract.MaintenanceCursor{TenantID: tenantID}
	for {
		res, err := h.Activities().MaintenancePrune(context.Background(), contract.MaintenancePruneInput{Now: time.Now(), From: from, Budget: time.Nanosecond})
		if err != nil {
			t.Fatal(err)
		}
		if res.Done || res.Next.TenantID != tenantID {
			return
		}
		from = res.Next
	}
}
