package main

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
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
}

type timings struct {
	mu                        sync.Mutex
	handler, start, describes []time.Duration
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

func (r *recorder) end() *Breakdown {
	if r == nil {
		return nil
	}
	t := r.cur.Swap(nil)
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return &Breakdown{Handler: summarize(t.handler), Start: summarize(t.start), Describe: summarize(t.describes)}
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

func (c timedClient) DescribeWorkflowExecution(ctx context.Context, workflowID, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	t0 := time.Now()
	resp, err := c.Client.DescribeWorkflowExecution(ctx, workflowID, runID)
	if t := c.rec.cur.Load(); t != nil {
		t.add(&t.describes, time.Since(t0))
	}
	return resp, err
}
