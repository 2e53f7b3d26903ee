package contract

import "time"

// The maintenance workflow (workflows.MaintenanceWorkflow, docs/retention.md)
// and its activities.
const (
	// MaintenancePrune deletes expired rows tenant by tenant for a bounded
	// time, heartbeating its position.
	MaintenancePrune = "MaintenancePrune"
	// MaintenancePartitions creates the partitioned tables' partitions
	// ahead and detaches and drops those past the operator's retention.
	MaintenancePartitions = "MaintenancePartitions"
	// MaintenanceCompact rebuilds packed the indexes of the partitions
	// inserts have moved on from.
	MaintenanceCompact = "MaintenanceCompact"
	// MaintenanceReport records a finished run (metrics, maintenance_runs).
	MaintenanceReport = "MaintenanceReport"
)

// MaintenanceWorkflowID is the maintenance workflow's ID (and its
// Schedule's): one run at a time.
const MaintenanceWorkflowID = "herald-maintenance"

// MaintenanceCursor is where a prune pass is: the tenant being worked on, the
// step (index into the activity's step list) and, within an inbox cap walk,
// the last user done. The zero cursor is the start.
type MaintenanceCursor struct {
	TenantID string
	Step     int
	User     string
}

// MaintenancePruneInput is one bounded slice of a prune pass.
type MaintenancePruneInput struct {
	// Now is the run's clock: every cut-off is Now minus a retention.
	Now time.Time
	// From is where the previous slice stopped.
	From MaintenanceCursor
	// Budget bounds the slice's time (0: DefaultMaintenanceBudget).
	Budget time.Duration
}

// DefaultMaintenanceBudget is how long one MaintenancePrune slice runs before
// handing back its cursor.
const DefaultMaintenanceBudget = 20 * time.Second

// MaintenancePruneResult is what a slice deleted and where it stopped.
type MaintenancePruneResult struct {
	// Deleted counts rows by kind (store.PruneKind, "inbox" for inbox items).
	Deleted map[string]int64
	// Next is where the next slice starts; Done says the pass is over.
	Next MaintenanceCursor
	Done bool
	// Tenants counts the tenants the slice finished.
	Tenants int
}

// MaintenanceReportInput is a finished run.
type MaintenanceReportInput struct {
	WorkflowID string
	RunID      string
	StartedAt  time.Time
	Deleted    map[string]int64
	Tenants    int
	Slices     int
	Partitions MaintenancePartitionsResult
	Compacted  MaintenanceCompactResult
}

// MaintenancePartitionsInput is the run's clock.
type MaintenancePartitionsInput struct {
	Now time.Time
}

// MaintenancePartitionsResult is what the partition step did.
type MaintenancePartitionsResult struct {
	// Created and Dropped list partitions by name; Held those past the
	// operator's retention kept for a notification not ended, or ended
	// within the retention (store.DropPartitions).
	Created []string
	Dropped []string
	Held    []string
	// Statements is how many DDL statements ran, Retries how many attempts
	// timed out on their lock, MaxWait the longest attempt.
	Statements int
	Retries    int
	MaxWait    time.Duration
}

// MaintenanceCompactInput is the run's clock: the partitions that ended
// store.CompactAfter before Now are compacted.
type MaintenanceCompactInput struct {
	Now time.Time
}

// MaintenanceCompactResult is what the compaction step rebuilt: the
// indexes by name, their bytes before and after, and the time the
// rebuilds took. What it left to the next run: everything while another
// session was compacting (Busy), the indexes whose rebuild timed out on a
// lock (Deferred), those past the run's budget (Unfinished). Failed is the
// step's error when its attempts ran out (set by the workflow: a failed
// compaction does not fail the run).
type MaintenanceCompactResult struct {
	Indexes     []string
	BytesBefore int64
	BytesAfter  int64
	Took        time.Duration
	Busy        bool
	Deferred    []string
	Unfinished  bool
	Failed      string
}
