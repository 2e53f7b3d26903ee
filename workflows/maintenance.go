package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/herald-notify/herald/activities/contract"
)

// MaintenanceWorkflow is one run of Herald's maintenance (docs/retention.md):
// the partitions step (contract.MaintenancePartitions: partitions created
// ahead, expired ones detached and dropped), then a prune pass over every tenant (contract.MaintenancePrune slices, each
// bounded in time and resumable from its cursor), then the closed partitions'
// indexes rebuilt packed (contract.MaintenanceCompact, after the pass so they
// are rebuilt without the rows it deleted), then the run's report
// (contract.MaintenanceReport). The maintenance Schedule
// (MaintenanceScheduleID) starts it every HERALD_MAINTENANCE_EVERY with the
// workflow ID contract.MaintenanceWorkflowID and overlap policy skip, so one
// run at a time. A long pass continues as new every maintenanceSlicesPerRun
// slices with its cursor and counts, so its history stays short.
func MaintenanceWorkflow(ctx workflow.Context, in MaintenanceInput) (MaintenanceResult, error) {
	m := &maintenance{in: in}
	m.setup(ctx)
	return m.run(ctx)
}

// MaintenanceScheduleID is the maintenance Schedule's ID (worker.EnsureMaintenanceSchedule).
const MaintenanceScheduleID = "herald-maintenance"

// MaintenanceInput carries a continued run's state; a Schedule starts it zero.
type MaintenanceInput struct {
	// StartedAt is the run's clock (the first run's start): every cut-off is
	// taken from it, so a continued run deletes what the first would have.
	StartedAt time.Time
	// From is where the pass goes on.
	From contract.MaintenanceCursor
	// Deleted, Tenants and Slices are the counts so far.
	Deleted map[string]int64
	Tenants int
	Slices  int
	// Partitions is what the partitions step did (PartitionsDone: it ran).
	Partitions     contract.MaintenancePartitionsResult
	PartitionsDone bool
	// Budget bounds each slice (0: contract.DefaultMaintenanceBudget);
	// SlicesPerRun bounds a run's slices before it continues as new (0:
	// maintenanceSlicesPerRun).
	Budget       time.Duration
	SlicesPerRun int
}

// MaintenanceResult is a finished run's counts.
type MaintenanceResult struct {
	Deleted    map[string]int64
	Tenants    int
	Slices     int
	Partitions contract.MaintenancePartitionsResult
	Compacted  contract.MaintenanceCompactResult
}

// maintenanceSlicesPerRun bounds a run's slices before it continues as new
// (each slice is three history events).
const maintenanceSlicesPerRun = 100

type maintenance struct {
	in    MaintenanceInput
	dbCtx workflow.Context
	// compactCtx runs the compaction: a day's index rebuilds at the seed's
	// volume take minutes each, heartbeating all along.
	compactCtx workflow.Context
}

// maintenanceCompactTimeout bounds one compaction attempt: its budget
// (store.CompactBudget) bounds when it starts a rebuild, this the last
// rebuild it started (a retry goes on from the first index not marked).
const maintenanceCompactTimeout = 3 * time.Hour

func (m *maintenance) setup(ctx workflow.Context) {
	if m.in.StartedAt.IsZero() {
		m.in.StartedAt = workflow.Now(ctx)
	}
	if m.in.Deleted == nil {
		m.in.Deleted = map[string]int64{}
	}
	budget := m.in.Budget
	if budget <= 0 {
		budget = contract.DefaultMaintenanceBudget
	}
	// A slice heartbeats before every batch; a worker that dies mid-slice is
	// noticed within the heartbeat timeout and the retry resumes from the
	// last heartbeat.
	m.dbCtx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: budget + 2*time.Minute,
		HeartbeatTimeout:    time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: time.Minute, MaximumAttempts: 20},
	})
	m.compactCtx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: maintenanceCompactTimeout,
		HeartbeatTimeout:    time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: time.Minute, MaximumAttempts: 3},
	})
}

func (m *maintenance) run(ctx workflow.Context) (MaintenanceResult, error) {
	if !m.in.PartitionsDone {
		if err := workflow.ExecuteActivity(m.dbCtx, contract.MaintenancePartitions, contract.MaintenancePartitionsInput{Now: m.in.StartedAt}).
			Get(ctx, &m.in.Partitions); err != nil {
			return MaintenanceResult{}, err
		}
		m.in.PartitionsDone = true
	}
	perRun := m.in.SlicesPerRun
	if perRun <= 0 {
		perRun = maintenanceSlicesPerRun
	}
	for n := 0; ; n++ {
		if n == perRun {
			return MaintenanceResult{}, workflow.NewContinueAsNewError(ctx, MaintenanceWorkflow, m.in)
		}
		var res contract.MaintenancePruneResult
		if err := workflow.ExecuteActivity(m.dbCtx, contract.MaintenancePrune, contract.MaintenancePruneInput{
			Now: m.in.StartedAt, From: m.in.From, Budget: m.in.Budget,
		}).Get(ctx, &res); err != nil {
			return MaintenanceResult{}, err
		}
		m.in.Slices++
		m.in.Tenants += res.Tenants
		addCounts(m.in.Deleted, res.Deleted)
		if res.Done {
			break
		}
		m.in.From = res.Next
	}
	// A compaction that keeps failing leaves the indexes as they are (the
	// next run tries again): it does not cost the run its report.
	var compacted contract.MaintenanceCompactResult
	if err := workflow.ExecuteActivity(m.compactCtx, contract.MaintenanceCompact, contract.MaintenanceCompactInput{Now: m.in.StartedAt}).
		Get(ctx, &compacted); err != nil {
		if temporal.IsCanceledError(err) {
			return MaintenanceResult{}, err
		}
		workflow.GetLogger(ctx).Warn("the compaction step failed; the next run tries again", "error", err)
		compacted = contract.MaintenanceCompactResult{Failed: err.Error()}
	}
	info := workflow.GetInfo(ctx)
	if err := workflow.ExecuteActivity(m.dbCtx, contract.MaintenanceReport, contract.MaintenanceReportInput{
		WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID, StartedAt: m.in.StartedAt,
		Deleted: m.in.Deleted, Tenants: m.in.Tenants, Slices: m.in.Slices, Partitions: m.in.Partitions, Compacted: compacted,
	}).Get(ctx, nil); err != nil {
		return MaintenanceResult{}, err
	}
	return MaintenanceResult{Deleted: m.in.Deleted, Tenants: m.in.Tenants, Slices: m.in.Slices, Partitions: m.in.Partitions,
		Compacted: compacted}, nil
}

// addCounts adds src's counts into dst (sums: the order does not matter).
//
//workflowcheck:ignore
func addCounts(dst, src map[string]int64) {
	for k, n := range src {
		dst[k] += n
	}
}
