package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/dbx"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/internal/retention"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/testenv"
	"golang.org/x/sync/errgroup"
)

// TestBigDatabase is the big-database bench (docs/retention.md#measured): the
// accept path and GET /v1/notifications/{id} on a database holding
// HERALD_BENCH_BIGDB_N notifications (default 1,000,000) against the same
// database before they were loaded, and the cost of one maintenance run at
// that size. Run it alone, on a database of its own, with HERALD_BENCH_BIGDB=1.
//
//  1. Every partition of the retention (31 days back, a week ahead) is
//     created; HERALD_BENCH_BIGDB_ACCEPTS notifications (default 1000,
//     in-app + email, personalised, to 100 users that exist) go through the
//     API with 16 clients and a worker: accepts per second, then GET p50/p99
//     of their ids once delivered. These are the "empty" numbers, and their
//     rows (all tables, as the real accept path wrote them) are the sample.
//  2. The sample is replicated into N notifications with COPY (a generator
//     query's COPY … TO STDOUT piped into COPY … FROM STDIN): the columns are
//     read from the catalog, so whatever schema is migrated is loaded. Each
//     copy gets a real-looking id (a key hash and a UUIDv7 run id of its
//     time), a tenant (half to the bench tenant, half to 100 small ones), a
//     user (the bench tenant's users get ~150 notifications each, the small
//     tenants' ~30), and its time, spread evenly from the start of the day
//     before the retention's first to now; every time column moves with it.
//     Inbox items are loaded only for each user's newest 100 (the cap), due
//     sequences only for the last hour past the retention (what an hourly run
//     finds; older ones would have gone), the dedup ledger not at all (its
//     rows live for the dedup window). The notification tables' indexes,
//     keys and foreign keys (parents' and partitions', read from the catalog)
//     are dropped before the COPY and built again after it (bigKeys), and
//     the load fails unless every index and constraint definition is the
//     one before; HERALD_BENCH_BIGDB_KEEP_INDEXES=1 COPYs through them.
//  3. The same accepts and GETs again ("loaded"), GETs of old loaded ids too.
//  4. One maintenance run (the partitions step, the prune pass and the
//     compaction step, as the workflow runs them) at the real clock: it
//     drops the oldest day's partitions and rebuilds yesterday's indexes
//     packed (the other closed partitions' sorted builds are marked
//     compacted). Its time, WAL, the longest lock of each kind seen in pg_locks
//     (sampled every 20 ms) and the accepts that 4 clients made meanwhile.
//
// It fails if loaded accepts per second fall under 0.9 of the empty ones, or
// the GET p99 of recent ids rises over 1.5 of the empty one.
func TestBigDatabase(t *testing.T) {
	if os.Getenv("HERALD_BENCH_BIGDB") != "1" {
		t.Skip("set HERALD_BENCH_BIGDB=1 to run the big-database bench")
	}
	// It loads gigabytes and drops the oldest partitions at the real clock:
	// never on a database other tests (or people) use.
	var held int64
	if err := testenv.Pool(t).QueryRow(context.Background(), `SELECT count(*) FROM notifications`).Scan(&held); err != nil || held > 0 {
		t.Fatalf("TestBigDatabase needs a database of its own (HERALD_TEST_DATABASE_URL naming a fresh one): this one holds %d notifications (%v)", held, err)
	}
	n := testenv.EnvInt(t, "HERALD_BENCH_BIGDB_N", 1_000_000)
	accepts := testenv.EnvInt(t, "HERALD_BENCH_BIGDB_ACCEPTS", 1000)
	ctx := context.Background()
	h := apitest.Start(t, apitest.Options{})
	tenantID, key := h.TenantWith("bigdb", e2eTemplates...)
	pool := testenv.Pool(t)

	now := time.Now()
	day := store.PartitionedTables[0]
	from := day.Start(now.Add(-retention.Defaults.Notifications - retention.Day))
	var stats store.DDLStats
	for _, pt := range store.PartitionedTables {
		if _, err := h.Store.EnsurePartitions(ctx, pt, from, now.Sub(from)+store.PartitionAhead, &stats, nil); err != nil {
			t.Fatal(err)
		}
	}
	users := make([]string, 100)
	for i := range users {
		users[i] = fmt.Sprintf("bigdb-s-%04d", i)
		h.PutUser(key, users[i], map[string]any{"email": users[i] + "@example.com", "name": "Sample " + users[i], "locale": "en-GB"})
	}
	b := &bigBench{t: t, h: h, key: key, tenantID: tenantID, pool: pool, users: users}

	empty := b.phase("empty", accepts)
	sample := empty.ids

	t0 := time.Now()
	l := &bigLoader{t: t, pool: pool, n: n, big: tenantID, sample: sample, sampleUser: users[0], from: from, to: time.Now().Add(-time.Minute),
		cutoff: now.Add(-retention.Defaults.Notifications)}
	l.load(ctx)
	t.Logf("loaded %d notifications in %s", n, time.Since(t0).Round(time.Second))
	b.sizes(n)

	loaded := b.phase("loaded", accepts)
	old := b.oldIDs(ctx, 500, now.Add(-7*retention.Day))
	oldGet := b.gets(old)
	t.Logf("loaded, GET of %d ids of old loaded rows: p50 %s, p99 %s", len(old), oldGet.p(50), oldGet.p(99))
	b.skew(ctx, append(slices.Clone(empty.ids), loaded.ids...))
	b.lookups(ctx, old, "old")
	b.lookups(ctx, loaded.ids, "recent")

	b.maintenance(ctx)

	ar := loaded.perSec / empty.perSec
	gr := float64(loaded.get.p(99)) / float64(empty.get.p(99))
	t.Logf("RESULT n=%d: deliveries %.1f/s empty, %.1f/s loaded (ratio %.2f)", n, empty.deliveredPerSec, loaded.deliveredPerSec,
		loaded.deliveredPerSec/empty.deliveredPerSec)
	t.Logf("RESULT n=%d: accepts %.1f/s empty, %.1f/s loaded (ratio %.2f, floor 0.9); GET recent p50 %s/%s, p99 %s/%s (ratio %.2f, bound 1.5); GET old p50 %s p99 %s (ratio to empty p99 %.2f)",
		n, empty.perSec, loaded.perSec, ar, empty.get.p(50), loaded.get.p(50), empty.get.p(99), loaded.get.p(99), gr,
		oldGet.p(50), oldGet.p(99), float64(oldGet.p(99))/float64(empty.get.p(99)))
	if ar < 0.9 {
		t.Errorf("accepts on the loaded database: %.2f of the empty one's (floor 0.9)", ar)
	}
	if gr > 1.5 {
		t.Errorf("GET p99 on the loaded database: %.2f of the empty one's (bound 1.5)", gr)
	}
}

type bigBench struct {
	t        *testing.T
	h        *apitest.Harness
	key      string
	tenantID string
	pool     *pgxpool.Pool
	users    []string
	seq      int
	mu       sync.Mutex
}

// latencies are one kind of request's times.
type latencies []time.Duration

func (l latencies) p(q int) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*q/100)]
}

type bigPhase struct {
	ids                     []string
	perSec, deliveredPerSec float64
	get                     latencies
}

// request sends one request outside the harness's OpenAPI check (its cost
// would be in every time) and returns the status, the body and the time.
func (b *bigBench) request(method, path string, body any) (int, []byte, time.Duration) {
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, b.h.URL+path, rd)
	req.Header.Set("Authorization", "Bearer "+b.key)
	req.Header.Set("Content-Type", "application/json")
	t0 := time.Now()
	resp, err := b.h.HTTP.Do(req)
	if err != nil {
		return 0, []byte(err.Error()), time.Since(t0)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, raw, time.Since(t0)
}

// accept submits one personalised in-app + email notification to one of the
// users; it returns the id ("" on a failure) and the time it took.
func (b *bigBench) accept() (string, time.Duration, error) {
	b.mu.Lock()
	b.seq++
	i := b.seq
	b.mu.Unlock()
	status, raw, d := b.request(http.MethodPost, "/v1/notifications", map[string]any{
		"user_id": b.users[i%len(b.users)], "template_id": "order_shipped", "channels": []string{"in_app", "email"},
		"data": map[string]any{"order_id": fmt.Sprintf("o-%d", i), "name": fmt.Sprintf("Customer %d", i)}, "idempotency_key": freshKey("bigdb")})
	if status != http.StatusAccepted {
		return "", d, fmt.Errorf("accept: %d %s", status, raw)
	}
	var out struct {
		ID string `json:"notification_id"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return "", d, err
	}
	return out.ID, d, nil
}

// phase accepts count notifications with 16 clients in 3 rounds (after 48
// accepts to warm up, not counted), waits for every one to be delivered
// after each round, then GETs each id twice (one client). Its accepts per
// second are the median round's (the machine is shared: a round another
// job's burst slowed is not the database's), its deliveries per second
// count from a round's first accept to its last delivery.
func (b *bigBench) phase(name string, count int) bigPhase {
	t := b.t
	concurrently16(48, func(int) {
		if _, _, err := b.accept(); err != nil {
			t.Error(err)
		}
	})
	var p bigPhase
	var rounds, deliveries []float64
	for r := range 3 {
		m := count / 3
		start := time.Now()
		ids := make([]string, m)
		concurrently16(m, func(i int) {
			id, _, err := b.accept()
			if err != nil {
				t.Error(err)
			}
			ids[i] = id
		})
		took := time.Since(start)
		if t.Failed() {
			t.FailNow()
		}
		delivered := b.awaitDelivered(name, ids, start)
		rounds, deliveries = append(rounds, float64(m)/took.Seconds()), append(deliveries, float64(m)/delivered.Seconds())
		t.Logf("%s, round %d: %d accepts in %s (%.1f/s), all delivered after %s (%.1f/s)", name, r+1, m, took.Round(time.Millisecond),
			rounds[r], delivered.Round(time.Millisecond), deliveries[r])
		p.ids = append(p.ids, ids...)
	}
	slices.Sort(rounds)
	slices.Sort(deliveries)
	p.perSec, p.deliveredPerSec = rounds[1], deliveries[1]
	p.get = append(b.gets(p.ids), b.gets(p.ids)...)
	t.Logf("%s: accepts %.1f/s, deliveries %.1f/s (median rounds); GET of their ids (%d): p50 %s, p99 %s",
		name, p.perSec, p.deliveredPerSec, len(p.get), p.get.p(50), p.get.p(99))
	return p
}

// awaitDelivered waits until both channels of every id are done and returns
// the time since start.
func (b *bigBench) awaitDelivered(name string, ids []string, start time.Time) time.Duration {
	ctx := context.Background()
	deadline := time.Now().Add(15 * time.Minute)
	for {
		var done int
		if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE tenant_id = $1 AND notification_id = ANY($2)
			AND accepted_at > $3 AND status IN ('delivered', 'sent')`, b.tenantID, ids, start.Add(-time.Minute)).Scan(&done); err != nil {
			b.t.Fatal(err)
		}
		if done == 2*len(ids) {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("%s: %d of %d deliveries done after 15 minutes", name, done, 2*len(ids))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// concurrently16 calls f(0) to f(n-1), 16 at a time, and returns when all
// have returned (the benches' 16 clients).
func concurrently16(n int, f func(i int)) {
	var g errgroup.Group
	g.SetLimit(16)
	for i := range n {
		g.Go(func() error { f(i); return nil })
	}
	_ = g.Wait() // f returns no error
}

// gets GETs each id once, one at a time, and returns the times (a warm-up
// pass over the first 20 first).
func (b *bigBench) gets(ids []string) latencies {
	for _, id := range ids[:min(20, len(ids))] {
		b.request(http.MethodGet, "/v1/notifications/"+id, nil)
	}
	var out latencies
	for _, id := range ids {
		status, raw, d := b.request(http.MethodGet, "/v1/notifications/"+id, nil)
		if status != http.StatusOK {
			b.t.Fatalf("GET %s: %d %s", id, status, raw)
		}
		out = append(out, d)
	}
	return out
}

// oldIDs picks count loaded ids of the bench tenant accepted before before.
func (b *bigBench) oldIDs(ctx context.Context, count int, before time.Time) []string {
	rows, err := b.pool.Query(ctx, `SELECT id FROM notifications TABLESAMPLE SYSTEM (1)
		WHERE tenant_id = $1 AND accepted_at < $2 LIMIT $3`, b.tenantID, before, count)
	if err != nil {
		b.t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(out) == 0 {
		b.t.Fatalf("old ids: %d, %v", len(out), err)
	}
	for _, id := range out {
		if _, _, err := ids.ParseNotificationID(id); err != nil {
			b.t.Fatalf("loaded id %q: %v", id, err)
		}
	}
	return out
}

// skew checks what GetNotification's bound relies on, on ids the real accept
// path made: the time in each id's run id is within store.RunIDSkew of its
// accepted_at.
func (b *bigBench) skew(ctx context.Context, list []string) {
	rows, err := b.pool.Query(ctx, `SELECT id, accepted_at FROM notifications WHERE tenant_id = $1 AND id = ANY($2)`, b.tenantID, list)
	if err != nil {
		b.t.Fatal(err)
	}
	var worst time.Duration
	var n int
	for rows.Next() {
		var id string
		var at time.Time
		if err := rows.Scan(&id, &at); err != nil {
			b.t.Fatal(err)
		}
		_, run, _ := ids.ParseNotificationID(id)
		rt, ok := ids.RunIDTime(run)
		if !ok {
			b.t.Fatalf("%s: its run id is not a UUIDv7", id)
		}
		worst, n = max(worst, (rt.Sub(at)).Abs()), n+1
	}
	if rows.Err() != nil || n != len(list) {
		b.t.Fatalf("skew: %d of %d rows, %v", n, len(list), rows.Err())
	}
	b.t.Logf("run id time vs accepted_at over %d accepted notifications: at most %s apart (bound %s)", n, worst, store.RunIDSkew)
	if worst > store.RunIDSkew {
		b.t.Errorf("a run id's time is %s from its accepted_at, over store.RunIDSkew", worst)
	}
}

// lookups times the notification row's lookup by id in every partition (the
// query before the run id bounded it) and bounded as GetNotification does,
// each id twice, and logs both plans' partitions and buffers.
func (b *bigBench) lookups(ctx context.Context, list []string, what string) {
	const all = `SELECT * FROM notifications WHERE tenant_id = $1 AND id = $2`
	const bounded = all + ` AND accepted_at BETWEEN $3 AND $4`
	args := func(id string) []any {
		_, run, _ := ids.ParseNotificationID(id)
		at, _ := ids.RunIDTime(run)
		return []any{b.tenantID, id, at.Add(-store.RunIDSkew), at.Add(store.RunIDSkew)}
	}
	for _, q := range []struct{ name, sql string }{{"every partition", all}, {"bounded by the run id", bounded}} {
		var times latencies
		for range 2 {
			for _, id := range list {
				a := args(id)
				if q.sql == all {
					a = a[:2]
				}
				t0 := time.Now()
				var one int
				if err := dbx.WithNotificationIDs(b.pool).QueryRow(ctx, `SELECT 1 FROM (`+q.sql+`) x`, a...).Scan(&one); err != nil {
					b.t.Fatalf("%s %s: %v", q.name, id, err)
				}
				times = append(times, time.Since(t0))
			}
		}
		a := args(list[0])
		if q.sql == all {
			a = a[:2]
		}
		rows, err := dbx.WithNotificationIDs(b.pool).Query(ctx, `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) `+q.sql, a...)
		if err != nil {
			b.t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			b.t.Fatal(err)
		}
		scans, buffers := 0, ""
		for _, l := range lines {
			if strings.Contains(l, "Scan") && strings.Contains(l, " on notifications_p") && !strings.Contains(l, "Bitmap Heap Scan") {
				scans++
			}
			if buffers == "" && strings.Contains(l, "Buffers:") {
				buffers = strings.TrimSpace(l)
			}
		}
		b.t.Logf("lookup of %d %s ids, %s: p50 %s, p99 %s; plan: %d partitions scanned, %s", len(list), what, q.name, times.p(50), times.p(99), scans, buffers)
	}
}

// sizes logs the tables' sizes and the bytes per notification.
func (b *bigBench) sizes(n int) {
	ctx := context.Background()
	var parts []string
	var total int64
	for _, table := range bytesTables {
		var sz int64
		// pg_partition_tree lists nothing for a table that is not partitioned.
		if err := b.pool.QueryRow(ctx, `SELECT COALESCE((SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree($1)), pg_total_relation_size($1))`,
			table).Scan(&sz); err != nil {
			b.t.Fatal(err)
		}
		total += sz
		parts = append(parts, fmt.Sprintf("%s %.2f GB", table, float64(sz)/1e9))
	}
	var db int64
	if err := b.pool.QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&db); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("sizes: database %.2f GB, the notification tables %.2f GB (%d B per notification): %s", float64(db)/1e9, float64(total)/1e9,
		total/int64(n), strings.Join(parts, ", "))
}

// maintenance runs one maintenance run at the real clock while 4 clients
// accept, sampling pg_locks, and logs its cost.
func (b *bigBench) maintenance(ctx context.Context) {
	t := b.t
	a := b.h.Activities()
	b.markPackedButYesterday(ctx)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// The accepts meanwhile, and before it for comparison.
	var during latencies
	var failed int
	var dmu sync.Mutex
	acceptLoop := func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, d, err := b.accept()
			dmu.Lock()
			during = append(during, d)
			if err != nil {
				failed++
			}
			dmu.Unlock()
		}
	}
	before := latencies{}
	concurrently16(200, func(int) {
		_, d, err := b.accept()
		dmu.Lock()
		before = append(before, d)
		if err != nil {
			failed++
		}
		dmu.Unlock()
	})
	// Locks: every 20 ms, the relation locks stronger than an insert's, by
	// (pid, relation, mode, granted), first and last seen.
	type lockKey struct {
		pid      int
		rel      string
		mode     string
		granted  bool
		waitFrom string
	}
	seen := map[lockKey][2]time.Time{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			rows, err := b.pool.Query(ctx, `SELECT pid, COALESCE(relation::regclass::text, ''), mode, granted, COALESCE(waitstart::text, '')
				FROM pg_locks WHERE locktype = 'relation' AND pid <> pg_backend_pid()
				AND (NOT granted OR mode IN ('ShareUpdateExclusiveLock', 'ShareLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock'))`)
			if err != nil {
				continue
			}
			at := time.Now()
			for rows.Next() {
				var k lockKey
				if rows.Scan(&k.pid, &k.rel, &k.mode, &k.granted, &k.waitFrom) == nil {
					v, ok := seen[k]
					if !ok {
						v[0] = at
					}
					v[1] = at
					seen[k] = v
				}
			}
			rows.Close()
		}
	}()
	for range 4 {
		wg.Add(1)
		go acceptLoop()
	}
	time.Sleep(time.Second)
	var lsn0 string
	if err := b.pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn0); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	t0 := time.Now()
	parts, err := a.MaintenancePartitions(ctx, contract.MaintenancePartitionsInput{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	partsTook := time.Since(t0)
	deleted := map[string]int64{}
	nslices := 0
	for from := (contract.MaintenanceCursor{}); ; {
		res, err := a.MaintenancePrune(ctx, contract.MaintenancePruneInput{Now: now, From: from})
		if err != nil {
			t.Fatal(err)
		}
		nslices++
		for k, n := range res.Deleted {
			deleted[k] += n
		}
		if res.Done {
			break
		}
		from = res.Next
	}
	t1 := time.Now()
	compacted, err := a.MaintenanceCompact(ctx, contract.MaintenanceCompactInput{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	compactTook := time.Since(t1)
	took := time.Since(t0)
	var wal int64
	if err := b.pool.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint`, lsn0).Scan(&wal); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	longest := map[string]time.Duration{}
	what := map[string]string{}
	for k, v := range seen {
		kind := k.mode
		if !k.granted {
			kind = "waiting for " + k.mode
		}
		if d := v[1].Sub(v[0]); d >= longest[kind] {
			longest[kind], what[kind] = d, k.rel
		}
	}
	var locks []string
	for kind, d := range longest {
		locks = append(locks, fmt.Sprintf("%s %s (%s)", kind, d.Round(time.Millisecond), what[kind]))
	}
	slices.Sort(locks)
	t.Logf("maintenance run: %s (partitions %s: %d created, %d dropped %v, %d DDL statements, longest %s, %d lock retries; prune: %d slices, %v), WAL %.1f MB",
		took.Round(time.Millisecond), partsTook.Round(time.Millisecond), len(parts.Created), len(parts.Dropped), parts.Dropped, parts.Statements,
		parts.MaxWait.Round(time.Millisecond), parts.Retries, nslices, deleted, float64(wal)/1e6)
	t.Logf("maintenance run: its compaction step %s: %d indexes of yesterday's partitions rebuilt, %.1f MB → %.1f MB (%v)",
		compactTook.Round(time.Millisecond), len(compacted.Indexes), float64(compacted.BytesBefore)/1e6, float64(compacted.BytesAfter)/1e6, compacted.Indexes)
	t.Logf("maintenance run: longest lock seen held or waited for, by mode (sampled every 20 ms): %s", strings.Join(locks, "; "))
	t.Logf("maintenance run: 4 clients accepted %d notifications meanwhile (%d failed): p50 %s, p99 %s, max %s; 16 clients before: p50 %s, p99 %s, max %s",
		len(during), failed, during.p(50), during.p(99), during.p(100), before.p(50), before.p(99), before.p(100))
	if failed > 0 {
		t.Errorf("%d accepts failed around the maintenance run", failed)
	}
}

// markPackedButYesterday marks compacted the indexes of every closed
// partition but yesterday's day partitions: the load built them by a sort,
// as packed as a compaction leaves them. The run's compaction step then
// rebuilds what a daily run rebuilds, one day (a weekly table's closed week
// once a week; marked here).
func (b *bigBench) markPackedButYesterday(ctx context.Context) {
	t := b.t
	now := time.Now()
	for _, pt := range store.PartitionedTables {
		parts, err := b.h.Store.Partitions(ctx, pt)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range parts {
			if p.End.After(now.Add(-store.CompactAfter)) || pt.Unit == "day" && p.Start.Equal(pt.Start(now.Add(-24*time.Hour))) {
				continue
			}
			if _, err := b.pool.Exec(ctx, `
				DO $$ DECLARE i regclass; BEGIN
					FOR i IN SELECT indexrelid::regclass FROM pg_index WHERE indrelid = '`+p.Name+`'::regclass LOOP
						EXECUTE format('COMMENT ON INDEX %s IS %L', i, '`+store.CompactedComment+`');
					END LOOP;
				END $$`); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// freeDisk is the free bytes of the file system holding path.
func freeDisk(path string) uint64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0
	}
	return st.Bavail * uint64(st.Bsize)
}
