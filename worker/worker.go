// Package worker builds the Temporal worker that runs Herald's workflows and
// activities, and prepares a namespace for them.
package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/herald-notify/herald/activities"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/workflows"
)

// New returns a worker for taskQueue with every Herald workflow and activity registered.
func New(c client.Client, taskQueue string, acts *activities.Activities, opts sdkworker.Options) sdkworker.Worker {
	w := sdkworker.New(c, taskQueue, opts)
	Register(w, acts)
	return w
}

// NewLanes returns one worker per priority lane (see herald.Lanes), each polling
// its lane's task queue with slots of its own, so a bulk backlog cannot take the
// slots critical notifications need. On Stop each waits up to stopTimeout for its
// running activities (a provider call in flight) before cancelling them.
func NewLanes(c client.Client, baseTaskQueue string, acts *activities.Activities, stopTimeout time.Duration) []sdkworker.Worker {
	out := make([]sdkworker.Worker, 0, len(herald.Lanes))
	for _, lane := range herald.Lanes {
		opts := LaneOptions(lane)
		opts.WorkerStopTimeout = stopTimeout
		out = append(out, New(c, workflows.LaneTaskQueue(baseTaskQueue, lane), acts, opts))
	}
	// Tenant webhooks on a lane of their own: slow endpoints wait in these
	// bounded slots, never in the notification lanes'.
	opts := WebhookLaneOptions()
	opts.WorkerStopTimeout = stopTimeout
	return append(out, New(c, workflows.WebhookTaskQueue(baseTaskQueue), acts, opts))
}

// WebhookLaneOptions sizes the webhook lane: a webhook attempt waits at most
// the HTTP timeout, so 50 slots send at least 5 attempts a second even when
// every endpoint hangs.
func WebhookLaneOptions() sdkworker.Options {
	return sdkworker.Options{MaxConcurrentActivityExecutionSize: 50, MaxConcurrentWorkflowTaskExecutionSize: 50}
}

// Run runs every worker until ctx is done, then stops them all (each draining its
// running activities up to its WorkerStopTimeout). A worker that fails to start or
// hits a fatal error (the namespace is gone, the credentials are refused) stops the
// others too, and its error is returned, so the process exits instead of idling
// with a dead lane.
func Run(ctx context.Context, workers []sdkworker.Worker) error {
	stop := make(chan any)
	var once sync.Once
	stopAll := func() { once.Do(func() { close(stop) }) }
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			stopAll()
		case <-done:
		}
	}()
	errs := make([]error, len(workers))
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.Run(stop); err != nil {
				errs[i] = fmt.Errorf("worker: %w", err)
				stopAll()
			}
		}()
	}
	wg.Wait()
	stopAll()
	return errors.Join(errs...)
}

// LaneOptions sizes a lane's worker: critical traffic gets generous slots and is
// polled eagerly; bulk is capped so it drains steadily without crowding the others.
func LaneOptions(lane herald.Lane) sdkworker.Options {
	switch lane {
	case herald.LaneCritical:
		return sdkworker.Options{MaxConcurrentActivityExecutionSize: 200, MaxConcurrentWorkflowTaskExecutionSize: 200,
			MaxConcurrentActivityTaskPollers: 4, MaxConcurrentWorkflowTaskPollers: 4}
	case herald.LaneBulk:
		return sdkworker.Options{MaxConcurrentActivityExecutionSize: 50, MaxConcurrentWorkflowTaskExecutionSize: 50,
			MaxConcurrentActivityTaskPollers: 4, MaxConcurrentWorkflowTaskPollers: 4}
	default:
		return sdkworker.Options{MaxConcurrentActivityExecutionSize: 200, MaxConcurrentWorkflowTaskExecutionSize: 200}
	}
}

// Register adds Herald's workflows and activities to any registry (a worker, a test
// environment or a replayer).
func Register(r interface {
	RegisterWorkflow(any)
	RegisterActivity(any)
}, acts *activities.Activities) {
	r.RegisterWorkflow(workflows.NotificationWorkflow)
	r.RegisterWorkflow(workflows.RedriveWorkflow)
	r.RegisterWorkflow(workflows.WebhookEndpointWorkflow)
	r.RegisterWorkflow(workflows.CampaignWorkflow)
	r.RegisterWorkflow(workflows.FlowWorkflow)
	r.RegisterWorkflow(workflows.DigestWorkflow)
	r.RegisterActivity(acts)
}

// EnsureSearchAttributes registers every search attribute in
// workflows.SearchAttributes (all Keyword) on the namespace, skipping those
// already there, so the Temporal UI can filter by tenant, user, status,
// notification and campaign. It returns the names it added (none when all were
// present), sorted. `herald migrate` and `herald dev` call it.
func EnsureSearchAttributes(ctx context.Context, c client.Client, namespace string) (added []string, err error) {
	ops := c.OperatorService()
	have, err := ops.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return nil, fmt.Errorf("list search attributes of namespace %s: %w", namespace, err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for _, key := range workflows.SearchAttributes {
		if _, ok := have.GetCustomAttributes()[key.GetName()]; !ok {
			missing[key.GetName()] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
			added = append(added, key.GetName())
		}
	}
	if len(missing) == 0 {
		return nil, nil
	}
	slices.Sort(added)
	if _, err := ops.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: namespace, SearchAttributes: missing,
	}); err != nil {
		return nil, fmt.Errorf("add search attributes %v to namespace %s: %w", added, namespace, err)
	}
	return added, nil
}
