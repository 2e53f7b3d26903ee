package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/retention"
	"github.com/herald-notify/herald/internal/store"
)

// Maintenance: the activities of workflows.MaintenanceWorkflow
// (docs/retention.md). A prune pass walks the tenants in id order and, for
// each, every step of maintenanceSteps: bounded DELETE batches of rows past
// the tenant's retention (its own settings under the operator's policy,
// Activities.Retention). A slice stops after its time budget and hands back
// its cursor, which it also heartbeats, so a retried slice resumes where the
// failed one was.

// MaintenanceBatch is how many rows one DELETE takes (and how many users one
// inbox batch locks): small enough that a batch holds its row locks for
// milliseconds, so a delivery updating one of those rows waits no longer.
const MaintenanceBatch = 500

// maintenanceTenantPage is how many tenants a slice reads at once.
const maintenanceTenantPage = 100

// capClaimWindow is how long a cap claim counts (caps are per rolling 24 h),
// with an hour to spare.
const capClaimWindow = 25 * time.Hour

// maintenanceStep is one kind of rows a pass prunes per tenant.
type maintenanceStep struct {
	name string
	// kind is the store.Prune kind; "" for the inbox steps.
	kind store.PruneKind
	// keep is how long the tenant keeps the kind: rows older than now - keep
	// go (nil for the inbox cap, which counts items, not time).
	keep func(retention.Policy) time.Duration
	// partitioned: the kind is held in time partitions. The operator's
	// cut-off drops whole partitions (MaintenancePartitions), so rows are
	// deleted one by one only for a tenant whose own keep is shorter.
	partitioned bool
	// held: the kind's partitions (store.PartitionedTables[held]) can be
	// kept past the operator's cut-off, while a notification in them has not
	// ended. For a tenant on the operator's retention the step deletes rows
	// one by one only in those: before the table's DroppedBefore the cut-off,
	// where the partitions step, which runs first, left nothing else (where no
	// partition is kept, the statement's time bound prunes every partition
	// away: one cheap statement per tenant and run).
	held *store.PartitionedTable
}

// cutoff is the step's cut-off for a tenant keeping p.
func (s maintenanceStep) cutoff(now time.Time, p retention.Policy) time.Time {
	return now.Add(-s.keep(p))
}

// How long each kind is kept, by the policy's field (or a fixed window).
var (
	keepNotifications = func(p retention.Policy) time.Duration { return p.Notifications }
	keepInboxAge      = func(p retention.Policy) time.Duration { return p.InboxAge }
	keepUntilNow      = func(retention.Policy) time.Duration { return 0 }
	keepCapClaims     = func(retention.Policy) time.Duration { return capClaimWindow }
)

var maintenanceSteps = []maintenanceStep{
	{name: string(store.PruneNotifications), kind: store.PruneNotifications, keep: keepNotifications, partitioned: true, held: &store.PartitionedTables[0]},
	{name: string(store.PruneReceipts), kind: store.PruneReceipts, keep: keepNotifications},
	{name: string(store.PruneOldDeadLetters), kind: store.PruneOldDeadLetters, keep: keepNotifications},
	{name: string(store.PruneSequences), kind: store.PruneSequences, keep: keepNotifications},
	{name: string(store.PruneLedger), kind: store.PruneLedger, keep: keepUntilNow},
	{name: string(store.PruneCapLedger), kind: store.PruneCapLedger, keep: keepCapClaims},
	{name: string(store.PruneSandbox), kind: store.PruneSandbox, keep: func(p retention.Policy) time.Duration { return p.Sandbox }},
	{name: string(store.PruneWebhookAttempts), kind: store.PruneWebhookAttempts, keep: func(p retention.Policy) time.Duration { return p.Webhooks }},
	{name: string(store.PruneWebhookMessages), kind: store.PruneWebhookMessages, keep: func(p retention.Policy) time.Duration { return p.Webhooks }},
	{name: string(store.PruneDeadLetters), kind: store.PruneDeadLetters, keep: func(p retention.Policy) time.Duration { return p.DeadLetters }},
	{name: string(store.PruneAudit), kind: store.PruneAudit, keep: func(p retention.Policy) time.Duration { return p.Audit }, partitioned: true},
	{name: string(store.PruneCampaigns), kind: store.PruneCampaigns, keep: func(p retention.Policy) time.Duration { return p.Campaigns }},
	{name: string(store.PruneOrderHandoffs), kind: store.PruneOrderHandoffs, keep: keepNotifications},
	{name: string(store.PruneOrderLanes), kind: store.PruneOrderLanes, keep: keepNotifications},
	{name: string(store.PruneInboxEvents), kind: store.PruneInboxEvents, keep: keepInboxAge, partitioned: true},
	{name: MaintenanceInboxAge, keep: keepInboxAge},
	{name: MaintenanceInboxCap},
}

// The inbox steps' names (the Deleted keys of their items).
const (
	MaintenanceInboxAge = "inbox_age"
	MaintenanceInboxCap = "inbox_cap"
)

// MaintenancePrune runs one slice of a prune pass (see above).
func (a *Activities) MaintenancePrune(ctx context.Context, in contract.MaintenancePruneInput) (contract.MaintenancePruneResult, error) {
	budget := in.Budget
	if budget <= 0 {
		budget = contract.DefaultMaintenanceBudget
	}
	from := in.From
	if activity.IsActivity(ctx) && activity.HasHeartbeatDetails(ctx) {
		var hb contract.MaintenanceCursor
		if err := activity.GetHeartbeatDetails(ctx, &hb); err == nil {
			from = hb
		}
	}
	op := a.retentionPolicy()
	// An operator cap lowered since the last run leaves inboxes above it that
	// no write may touch again: this run walks every tenant's (the run that
	// records the new cap ends that). No recorded cap (the first run, or the
	// first after the upgrade that added it to the report) may hide a cap
	// lowered in the same deploy: that run walks too, once.
	lastCap, recorded, err := a.Store.LastMaintenanceInboxCap(ctx)
	if err != nil {
		return contract.MaintenancePruneResult{}, err
	}
	capLowered := !recorded || lastCap > op.InboxItems
	res := contract.MaintenancePruneResult{Deleted: map[string]int64{}}
	deadline := time.Now().Add(budget)
	cur := from
	finished := false // a tenant was finished by this slice
	for {
		// The tenants from cur.TenantID on (inclusive: it may be half done).
		page, err := a.Store.TenantRetentions(ctx, cur.TenantID, maintenanceTenantPage)
		if err != nil {
			return res, err
		}
		for _, t := range page {
			if t.TenantID != cur.TenantID {
				cur = contract.MaintenanceCursor{TenantID: t.TenantID}
				// A slice past its budget starts no other tenant (every
				// slice still makes progress: its first tenant's first
				// batch runs whatever the budget).
				if finished && time.Now().After(deadline) {
					res.Next = cur
					return res, nil
				}
			}
			if cur.Step >= len(maintenanceSteps) {
				continue // finished by an earlier slice
			}
			done, err := a.pruneTenant(ctx, t, op, capLowered, in.Now, &cur, deadline, res.Deleted)
			if err != nil {
				return res, err
			}
			if !done {
				res.Next = cur
				return res, nil
			}
			finished = true
			res.Tenants++
		}
		if len(page) < maintenanceTenantPage {
			res.Done = true
			return res, nil
		}
	}
}

// pruneTenant prunes one tenant from cur's step on until it is done (true)
// or the deadline passes (false, cur where it stopped). deleted accumulates.
func (a *Activities) pruneTenant(ctx context.Context, t store.TenantRetention, op retention.Policy, capLowered bool, now time.Time,
	cur *contract.MaintenanceCursor, deadline time.Time, deleted map[string]int64) (bool, error) {
	p := t.Retention.Policy(op)
	mine := map[string]int64{}
	defer func() {
		for k, n := range mine {
			deleted[k] += n
			a.Metrics.MaintenanceDeleted(k, n)
		}
		a.auditPrune(ctx, t.TenantID, mine)
	}()
	worked := false
	for ; cur.Step < len(maintenanceSteps); cur.Step, cur.User = cur.Step+1, "" {
		step := maintenanceSteps[cur.Step]
		var cutoff time.Time
		if step.keep != nil {
			cutoff = step.cutoff(now, p)
		}
		if step.partitioned && step.keep(p) >= step.keep(op) {
			if step.held == nil {
				continue // the operator's retention: whole partitions go
			}
			cutoff = step.held.DroppedBefore(step.cutoff(now, op))
		}
		for {
			// Every slice makes progress: the deadline is checked after a
			// batch, never before the first.
			if worked && time.Now().After(deadline) {
				return false, nil
			}
			worked = true
			if activity.IsActivity(ctx) {
				activity.RecordHeartbeat(ctx, *cur)
			}
			var n int64
			var more bool
			var err error
			switch step.name {
			case MaintenanceInboxAge:
				n, more, err = a.Store.PruneInboxAge(ctx, t.TenantID, cutoff, MaintenanceBatch)
			case MaintenanceInboxCap:
				// The insert path keeps every inbox within its cap; a walk is
				// needed only where the tenant's own cap is below the
				// operator's (it may have been lowered since), or the
				// operator's was lowered since the last run.
				if p.InboxItems >= op.InboxItems && !capLowered {
					break
				}
				n, cur.User, more, err = a.Store.PruneInboxCaps(ctx, t.TenantID, cur.User, MaintenanceBatch, MaintenanceBatch)
			default:
				n, err = a.Store.Prune(ctx, step.kind, t.TenantID, cutoff, MaintenanceBatch)
				more = n == MaintenanceBatch
			}
			if err != nil {
				return false, err
			}
			key := step.name
			if key == MaintenanceInboxAge || key == MaintenanceInboxCap {
				key = "inbox"
			}
			if n > 0 {
				mine[key] += n
			}
			if !more {
				break
			}
		}
	}
	return true, nil
}

// The audit entries maintenance writes: defined in internal/retention, where
// the API's audit-log filter reads the action too.
const (
	AuditMaintenanceKeyID = retention.AuditKeyID
	AuditRetentionPruned  = retention.AuditPruned
)

// auditPrune writes the tenant's audit entry for what a slice deleted of its
// rows (nothing deleted: no entry). A failure is logged, not returned: the
// rows are gone either way, and the run's report keeps the counts.
func (a *Activities) auditPrune(ctx context.Context, tenantID string, deleted map[string]int64) {
	if len(deleted) == 0 {
		return
	}
	raw, err := json.Marshal(map[string]any{"deleted": deleted})
	if err == nil {
		var id int64
		id, err = a.Store.BeginAudit(ctx, tenantID, store.AuditEntry{APIKeyID: AuditMaintenanceKeyID, Action: AuditRetentionPruned, Details: raw})
		if err == nil {
			err = a.Store.FinishAudit(ctx, tenantID, id, 200, true)
		}
	}
	if err != nil && !errors.Is(err, context.Canceled) && activity.IsActivity(ctx) {
		activity.GetLogger(ctx).Warn("audit of a retention prune not written", "tenant", tenantID, "error", err)
	}
}

// MaintenancePartitions keeps every partitioned table's partitions
// (store.PartitionedTables): created from the one holding now to
// store.PartitionAhead ahead, and those wholly past the operator's retention
// detached concurrently and dropped. Every DDL statement runs with
// store.DDLLockTimeout and is retried on a lock timeout; each attempt's time
// is recorded (herald_maintenance_lock_wait_seconds).
func (a *Activities) MaintenancePartitions(ctx context.Context, in contract.MaintenancePartitionsInput) (contract.MaintenancePartitionsResult, error) {
	op := a.retentionPolicy()
	var res contract.MaintenancePartitionsResult
	var stats store.DDLStats
	for _, t := range store.PartitionedTables {
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx, t.Table)
		}
		observe := func(d time.Duration) { a.Metrics.MaintenanceLockWait(t.Table, d) }
		created, err := a.Store.EnsurePartitions(ctx, t, in.Now, store.PartitionAhead, &stats, observe)
		res.Created = append(res.Created, created...)
		for range created {
			a.Metrics.MaintenancePartition(t.Table, "created")
		}
		if err != nil {
			return res, err
		}
		dropped, held, err := a.Store.DropPartitions(ctx, t, in.Now.Add(-t.Keep(op)), in.Now.Add(-op.DeadLetters), &stats, observe)
		res.Dropped = append(res.Dropped, dropped...)
		res.Held = append(res.Held, held...)
		for range dropped {
			a.Metrics.MaintenancePartition(t.Table, "dropped")
		}
		if err != nil {
			return res, err
		}
	}
	res.Statements, res.Retries, res.MaxWait = stats.Statements, stats.Retries, stats.MaxWait
	return res, nil
}

// MaintenanceCompact rebuilds packed every index of the partitioned tables'
// partitions that ended store.CompactAfter before the run's clock and were
// not compacted yet (store.CompactPartitions). A rebuild of a day at the
// seed's volume runs for minutes: the activity heartbeats all along, and a
// retry starts with the index it was working on (those done are marked).
// While another session compacts, it leaves the work to the next run (Busy);
// an index whose rebuild timed out on a lock too (Deferred), and those past
// the run's budget (Unfinished).
func (a *Activities) MaintenanceCompact(ctx context.Context, in contract.MaintenanceCompactInput) (contract.MaintenanceCompactResult, error) {
	var res contract.MaintenanceCompactResult
	var stats store.DDLStats
	var current progress
	if activity.IsActivity(ctx) {
		defer keepHeartbeating(ctx, &current)()
	}
	done, err := a.Store.CompactPartitions(ctx, in.Now.Add(-store.CompactAfter), store.CompactLimits{}, &stats, a.Metrics.MaintenanceLockWait,
		func(table, index string) { current.set(map[string]string{"table": table, "index": index}) })
	for _, c := range done.Indexes {
		if c.Deferred {
			res.Deferred = append(res.Deferred, c.Name)
			continue
		}
		res.Indexes = append(res.Indexes, c.Name)
		res.BytesBefore += c.Before
		res.BytesAfter += c.After
		res.Took += c.Took
		a.Metrics.MaintenancePartition(c.Table, "index_compacted")
	}
	res.Unfinished = done.Unfinished
	if errors.Is(err, store.ErrCompactionBusy) {
		res.Busy = true
		return res, nil
	}
	if err != nil {
		return res, err
	}
	return res, nil
}

// MaintenanceReport records a finished run: its report in maintenance_runs and
// the run metrics.
func (a *Activities) MaintenanceReport(ctx context.Context, in contract.MaintenanceReportInput) error {
	raw, err := json.Marshal(map[string]any{"deleted": in.Deleted, "tenants": in.Tenants, "slices": in.Slices,
		"inbox_items": a.retentionPolicy().InboxItems,
		"partitions": map[string]any{"created": in.Partitions.Created, "dropped": in.Partitions.Dropped, "held": in.Partitions.Held,
			"statements": in.Partitions.Statements, "lock_retries": in.Partitions.Retries,
			"max_wait_ms": in.Partitions.MaxWait.Milliseconds()},
		"compacted": map[string]any{"indexes": in.Compacted.Indexes, "bytes_before": in.Compacted.BytesBefore,
			"bytes_after": in.Compacted.BytesAfter, "took_ms": in.Compacted.Took.Milliseconds(), "busy": in.Compacted.Busy,
			"deferred": in.Compacted.Deferred, "unfinished": in.Compacted.Unfinished, "failed": in.Compacted.Failed}})
	if err != nil {
		return err
	}
	if err := a.Store.RecordMaintenanceRun(ctx, store.MaintenanceRun{WorkflowID: in.WorkflowID, RunID: in.RunID,
		StartedAt: in.StartedAt, Report: raw}); err != nil {
		return fmt.Errorf("record the maintenance run: %w", err)
	}
	a.Metrics.MaintenanceRun(time.Since(in.StartedAt))
	return nil
}

// retentionPolicy is the operator's policy (retention.Defaults when unset).
func (a *Activities) retentionPolicy() retention.Policy {
	if a.Retention == (retention.Policy{}) {
		return retention.Defaults
	}
	return a.Retention
}
