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
	namespacepb "go.temporal.io/api/namespace/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/herald-notify/herald/activities"
	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/workflows"
)

// DefaultCacheSize is how many workflow runs a worker process keeps in memory
// between their workflow tasks (HERALD_WORKER_CACHE_SIZE; the Temporal SDK's
// default is 10,000). A kept run costs the worker about 70 KB of RSS (its
// goroutine's stack, the SDK's state machines, the run's own state), so open
// digests — one run each, waiting for their window — would hold the worker's
// memory in proportion to their number: 10,000 users with a daily digest open
// are 10,000 runs. A run not kept is replayed from its history at its next
// task (docs/digests.md#what-a-digest-costs).
const DefaultCacheSize = 1000

// SetCacheSize bounds the workflow runs this process keeps in memory between
// their tasks: the SDK's sticky cache, one per process, shared by every lane.
// It applies to workers created after the call (the cache is made with the
// first one); n < 1 leaves the size as it is.
func SetCacheSize(n int) {
	if n >= 1 {
		sdkworker.SetStickyWorkflowCacheSize(n)
	}
}

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
	r.RegisterWorkflow(workflows.MaintenanceWorkflow)
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

// EnsureMaintenanceSchedule creates the maintenance Schedule
// (workflows.MaintenanceScheduleID) or brings an existing one up to date: a
// MaintenanceWorkflow every `every` on taskQueue, one run at a time (overlap
// policy skip: a run still going when the next is due makes the Schedule skip
// that one). Every worker process calls it at start, and `herald migrate`
// does; calling it again changes nothing. It says whether it created the
// Schedule.
func EnsureMaintenanceSchedule(ctx context.Context, c client.Client, taskQueue string, every time.Duration) (created bool, err error) {
	return ensureMaintenanceSchedule(ctx, c, workflows.MaintenanceScheduleID, taskQueue, every)
}

// ensureMaintenanceSchedule is EnsureMaintenanceSchedule for the Schedule id
// (a test's own, so that worker processes of other tests, which ensure the
// real one at start, cannot race it).
func ensureMaintenanceSchedule(ctx context.Context, c client.Client, id, taskQueue string, every time.Duration) (created bool, err error) {
	if every <= 0 {
		every = time.Hour
	}
	spec := client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: every}}}
	action := &client.ScheduleWorkflowAction{ID: contract.MaintenanceWorkflowID, Workflow: workflows.MaintenanceWorkflow,
		Args: []any{workflows.MaintenanceInput{}}, TaskQueue: taskQueue,
		WorkflowExecutionTimeout: 24 * time.Hour}
	_, err = c.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID: id, Spec: spec, Action: action,
		Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP, CatchupWindow: every,
		Memo: map[string]any{"what": "Herald maintenance: retention, partitions (docs/retention.md)"},
	})
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		return false, fmt.Errorf("create the maintenance schedule: %w", err)
	}
	h := c.ScheduleClient().GetHandle(ctx, id)
	err = h.Update(ctx, client.ScheduleUpdateOptions{DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
		s := in.Description.Schedule
		s.Spec, s.Action = &spec, action
		if s.Policy == nil {
			s.Policy = &client.SchedulePolicies{}
		}
		s.Policy.Overlap = enumspb.SCHEDULE_OVERLAP_POLICY_SKIP
		s.Policy.CatchupWindow = every
		return &client.ScheduleUpdate{Schedule: &s}, nil
	}})
	if err != nil {
		return false, fmt.Errorf("update the maintenance schedule: %w", err)
	}
	return false, nil
}

// SetNamespaceRetention sets the namespace's workflow retention (how long
// Temporal keeps a closed workflow's history) to d, and returns what it was.
// `herald migrate` and `herald dev` set it to the notification history's
// retention, so Temporal keeps a notification's history as long as Herald
// keeps its rows. Temporal refuses less than a day: d is raised to a day.
func SetNamespaceRetention(ctx context.Context, c client.Client, namespace string, d time.Duration) (before, after time.Duration, err error) {
	d = max(d, 24*time.Hour)
	desc, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
	if err != nil {
		return 0, 0, fmt.Errorf("describe namespace %s: %w", namespace, err)
	}
	if r := desc.GetConfig().GetWorkflowExecutionRetentionTtl(); r != nil {
		before = r.AsDuration()
	}
	if before == d {
		return before, d, nil
	}
	if _, err := c.WorkflowService().UpdateNamespace(ctx, &workflowservice.UpdateNamespaceRequest{Namespace: namespace,
		// Only the retention is set: the server leaves every unset field as it is.
		Config: &namespacepb.NamespaceConfig{WorkflowExecutionRetentionTtl: durationpb.New(d)},
	}); err != nil {
		return before, before, fmt.Errorf("set the retention of namespace %s: %w", namespace, err)
	}
	return before, d, nil
}
