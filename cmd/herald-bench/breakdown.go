package main

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"go.temporal.io/sdk/client"

	"github.com/herald-notify/herald/internal/dbx"
)

// Breakdown is where a POST /v1/notifications spent its time inside the API
// (self-host mode with -breakdown): the handler as a whole, the Temporal start it
// makes, and the DescribeWorkflowExecution a duplicate makes when the original has
// not been recorded in PostgreSQL yet. Measured with two time.Now calls around each;
// the overhead is far below the noise.
type Breakdown struct {
	Handler  Latency `json:"handler"`
	Start    Latency `json:"execute_workflow"`
	Describe Latency `json:"describe_workflow"`
	// Queries are the API's PostgreSQL queries (pool acquisition included), by the
	// start of their SQL.
	Queries map[string]Latency `json:"queries,omitempty"`
}

type timings struct {
	mu                        sync.Mutex
	handler, start, describes []time.Duration
	queries                   map[string][]time.Duration
}

func (t *timings) addQuery(sql string, d time.Duration) {
	label := sqlLabel(sql)
	t.mu.Lock()
	if t.queries == nil {
		t.queries = map[string][]time.Duration{}
	}
	t.queries[label] = append(t.queries[label], d)
	t.mu.Unlock()
}

// sqlLabel is a short name for a query: its first words, whitespace collapsed.
func sqlLabel(sql string) string {
	f := strings.Fields(sql)
	label := strings.Join(f, " ")
	if len(label) > 60 {
		label = label[:60] + "…"
	}
	return label
}

func (t *timings) add(dst *[]time.Duration, d time.Duration) {
	t.mu.Lock()
	*dst = append(*dst, d)
	t.mu.Unlock()
}

// recorder collects API-side timings for the current phase; nil-safe and off when
// -breakdown is not given.
type recorder struct {
	cur atomic.Pointer[timings]
}

func (r *recorder) begin() {
	if r != nil {
		r.cur.Store(&timings{})
	}
}

// end stops recording and returns what was recorded since begin.
func (r *recorder) end() *timings {
	if r == nil {
		return nil
	}
	t := r.cur.Swap(nil)
	if t == nil {
		return nil
	}
	t.mu.Lock() // a request still finishing may be appending
	defer t.mu.Unlock()
	return &timings{handler: t.handler, start: t.start, describes: t.describes, queries: t.queries}
}

// middleware times POST /v1/notifications handlers.
func (r *recorder) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost || req.URL.Path != "/v1/notifications" {
			next.ServeHTTP(w, req)
			return
		}
		t0 := time.Now()
		next.ServeHTTP(w, req)
		if t := r.cur.Load(); t != nil {
			t.add(&t.handler, time.Since(t0))
		}
	})
}

// timedClient is the API's Temporal client with its start and describe calls timed.
type timedClient struct {
	client.Client
	rec *recorder
}

func (c timedClient) ExecuteWorkflow(ctx context.Context, options client.StartWorkflowOptions, workflow any, args ...any) (client.WorkflowRun, error) {
	t0 := time.Now()
	run, err := c.Client.ExecuteWorkflow(ctx, options, workflow, args...)
	if t := c.rec.cur.Load(); t != nil {
		t.add(&t.start, time.Since(t0))
	}
	return run, err
}

func (c timedClient) DescribeWorkflow(ctx context.Context, workflowID, runID string) (*client.WorkflowExecutionDescription, error) {
	t0 := time.Now()
	resp, err := c.Client.DescribeWorkflow(ctx, workflowID, runID)
	if t := c.rec.cur.Load(); t != nil {
		t.add(&t.describes, time.Since(t0))
	}
	return resp, err
}

// timedDB is the API's database handle with every query timed (-breakdown). The
// worker keeps the plain pool; both share the same connections.
type timedDB struct {
	dbx.DB
	rec *recorder
}

func (d timedDB) record(sql string, t0 time.Time) {
	if t := d.rec.cur.Load(); t != nil {
		t.addQuery(sql, time.Since(t0))
	}
}

func (d timedDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	t0 := time.Now()
	defer d.record(sql, t0)
	return d.DB.Exec(ctx, sql, args...)
}

func (d timedDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	t0 := time.Now()
	defer d.record(sql, t0)
	return d.DB.Query(ctx, sql, args...) //nolint:sqlclosecheck // a wrapper: the caller closes the rows
}

func (d timedDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	t0 := time.Now()
	return timedRow{Row: d.DB.QueryRow(ctx, sql, args...), done: func() { d.record(sql, t0) }}
}

// timedRow records when its result has been read (pgxpool releases the
// connection then).
type timedRow struct {
	pgx.Row
	done func()
}

func (r timedRow) Scan(dest ...any) error {
	defer r.done()
	return r.Row.Scan(dest...)
}

// PoolStats is the self-host pgxpool's activity during a phase (API and worker
// share it, as in cmd/herald).
type PoolStats struct {
	MaxConns int32 `json:"max_conns"`
	Acquires int64 `json:"acquires"`
	// Waited counts acquisitions that found no idle connection and had to wait.
	Waited        int64   `json:"waited"`
	MeanAcquireMs float64 `json:"mean_acquire_ms"`
}

type poolSnap struct {
	ok               bool
	acquires, waited int64
	acquireDur       time.Duration
	maxConns         int32
}

func (b *bench) poolSnap() poolSnap {
	if b.pool == nil {
		return poolSnap{}
	}
	st := b.pool.Stat()
	return poolSnap{ok: true, acquires: st.AcquireCount(), waited: st.EmptyAcquireCount(), acquireDur: st.AcquireDuration(), maxConns: st.MaxConns()}
}
