package workflows_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/testenv"
	"github.com/herald-notify/herald/workflows"
)

// The partitions step runs once, first; then a pass of several slices: each starts where the previous stopped, with the
// run's clock; the counts add up; a run continues as new after SlicesPerRun
// slices carrying its cursor, clock and counts; the compaction (with the run's
// clock) and the report come once, at the end.
func TestMaintenanceSlicesResumeAndContinueAsNew(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	started := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	var froms []contract.MaintenanceCursor
	env.RegisterActivityWithOptions(func(_ context.Context, in contract.MaintenancePruneInput) (contract.MaintenancePruneResult, error) {
		if !in.Now.Equal(started) {
			t.Errorf("slice clock %s, want the run's %s", in.Now, started)
		}
		froms = append(froms, in.From)
		n := len(froms)
		return contract.MaintenancePruneResult{Deleted: map[string]int64{"notifications": 10}, Tenants: 1,
			Next: contract.MaintenanceCursor{TenantID: string(rune('a' + n)), Step: n}, Done: n == 3}, nil
	}, activity.RegisterOptions{Name: contract.MaintenancePrune})
	partitionRuns := 0
	env.RegisterActivityWithOptions(func(_ context.Context, in contract.MaintenancePartitionsInput) (contract.MaintenancePartitionsResult, error) {
		partitionRuns++
		return contract.MaintenancePartitionsResult{Dropped: []string{"notifications_p20261101"}}, nil
	}, activity.RegisterOptions{Name: contract.MaintenancePartitions})
	env.RegisterActivityWithOptions(func(context.Context, contract.MaintenanceCompactInput) (contract.MaintenanceCompactResult, error) {
		t.Error("a compaction before the pass is over")
		return contract.MaintenanceCompactResult{}, nil
	}, activity.RegisterOptions{Name: contract.MaintenanceCompact})
	env.RegisterActivityWithOptions(func(context.Context, contract.MaintenanceReportInput) error {
		t.Error("a report before the pass is over")
		return nil
	}, activity.RegisterOptions{Name: contract.MaintenanceReport})
	env.ExecuteWorkflow(workflows.MaintenanceWorkflow, workflows.MaintenanceInput{StartedAt: started, SlicesPerRun: 2})
	var cont *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &cont) {
		t.Fatalf("want continue-as-new after 2 slices, got %v", err)
	}
	var next workflows.MaintenanceInput
	if err := converter.GetDefaultDataConverter().FromPayloads(cont.Input, &next); err != nil {
		t.Fatal(err)
	}
	if !next.StartedAt.Equal(started) || next.From.TenantID != "c" || next.Deleted["notifications"] != 20 || next.Slices != 2 ||
		!next.PartitionsDone || partitionRuns != 1 {
		t.Fatalf("continued with %+v", next)
	}

	env = s.NewTestWorkflowEnvironment()
	env.RegisterActivityWithOptions(func(_ context.Context, in contract.MaintenancePruneInput) (contract.MaintenancePruneResult, error) {
		if in.From.TenantID != "c" {
			t.Errorf("the continued run starts at %+v", in.From)
		}
		return contract.MaintenancePruneResult{Deleted: map[string]int64{"inbox": 5}, Tenants: 1, Done: true}, nil
	}, activity.RegisterOptions{Name: contract.MaintenancePrune})
	env.RegisterActivityWithOptions(func(_ context.Context, in contract.MaintenanceCompactInput) (contract.MaintenanceCompactResult, error) {
		if !in.Now.Equal(started) {
			t.Errorf("compaction clock %s, want the run's %s", in.Now, started)
		}
		return contract.MaintenanceCompactResult{Indexes: []string{"notifications_p20261202_pkey"}, BytesBefore: 3, BytesAfter: 2}, nil
	}, activity.RegisterOptions{Name: contract.MaintenanceCompact})
	report := captureReport(env)
	env.ExecuteWorkflow(workflows.MaintenanceWorkflow, next)
	var res workflows.MaintenanceResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Deleted["notifications"] != 20 || res.Deleted["inbox"] != 5 || res.Slices != 3 || res.Tenants != 3 ||
		!report().StartedAt.Equal(started) || report().Deleted["inbox"] != 5 || len(report().Partitions.Dropped) != 1 ||
		len(report().Compacted.Indexes) != 1 || res.Compacted.BytesAfter != 2 {
		t.Fatalf("result %+v, report %+v", res, report())
	}
}

// maintenanceManifestFile lists the recorded histories of the maintenance
// workflow (TestRecordMaintenanceHistory with HERALD_RECORD_HISTORIES=1).
var maintenanceManifestFile = filepath.Join("testdata", "maintenance_histories.json")

// TestRecordMaintenanceHistory records a maintenance run over the test
// database's tenants, 30 ms slices, so the
// history holds several slices and the report.
func TestRecordMaintenanceHistory(t *testing.T) {
	if os.Getenv(recordEnv) != "1" {
		t.Skip("set " + recordEnv + "=1 to record the replay histories")
	}
	h := apitest.Start(t, apitest.Options{})
	h.Tenant("record-maintenance")
	id := testenv.UniqueName(t, "maintenance")
	ctx := context.Background()
	run, err := h.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: h.TaskQueue},
		workflows.MaintenanceWorkflow, workflows.MaintenanceInput{Budget: 30 * time.Millisecond, SlicesPerRun: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	file := "maintenance_run.json"
	if err := os.WriteFile(filepath.Join("testdata", file), exportHistory(t, h.Temporal, id, run.GetRunID()), 0o644); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.MarshalIndent([]recordedHistory{{Scenario: "run", File: file, WorkflowID: id, RunID: run.GetRunID()}}, "", "  ")
	if err := os.WriteFile(maintenanceManifestFile, append(raw, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReplayMaintenanceHistory fails on a change to MaintenanceWorkflow that
// would break determinism for a run in progress.
func TestReplayMaintenanceHistory(t *testing.T) {
	raw, err := os.ReadFile(maintenanceManifestFile)
	if err != nil {
		t.Fatal(err)
	}
	var hs []recordedHistory
	if err := json.Unmarshal(raw, &hs); err != nil || len(hs) == 0 {
		t.Fatalf("%s: %v", maintenanceManifestFile, err)
	}
	changed := func(ctx workflow.Context, in workflows.MaintenanceInput) (workflows.MaintenanceResult, error) {
		if err := workflow.Sleep(ctx, time.Second); err != nil {
			return workflows.MaintenanceResult{}, err
		}
		return workflows.MaintenanceWorkflow(ctx, in)
	}
	for _, h := range hs {
		if err := replay(t, h, func(r worker.WorkflowReplayer) { r.RegisterWorkflow(workflows.MaintenanceWorkflow) }); err != nil {
			t.Fatalf("replay %s: %v", h.File, err)
		}
		if err := replay(t, h, func(r worker.WorkflowReplayer) {
			r.RegisterWorkflowWithOptions(changed, workflow.RegisterOptions{Name: "MaintenanceWorkflow"})
		}); err == nil {
			t.Errorf("%s: a non-deterministic change replayed without error", h.Scenario)
		}
	}
}

// A compaction that keeps failing does not fail the run: the report comes,
// with the step's error.
func TestMaintenanceReportsAFailedCompaction(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterActivityWithOptions(func(context.Context, contract.MaintenancePartitionsInput) (contract.MaintenancePartitionsResult, error) {
		return contract.MaintenancePartitionsResult{}, nil
	}, activity.RegisterOptions{Name: contract.MaintenancePartitions})
	env.RegisterActivityWithOptions(func(context.Context, contract.MaintenancePruneInput) (contract.MaintenancePruneResult, error) {
		return contract.MaintenancePruneResult{Deleted: map[string]int64{"inbox": 1}, Done: true}, nil
	}, activity.RegisterOptions{Name: contract.MaintenancePrune})
	attempts := 0
	env.RegisterActivityWithOptions(func(context.Context, contract.MaintenanceCompactInput) (contract.MaintenanceCompactResult, error) {
		attempts++
		return contract.MaintenanceCompactResult{}, errors.New("reindex: disk full")
	}, activity.RegisterOptions{Name: contract.MaintenanceCompact})
	report := captureReport(env)
	env.ExecuteWorkflow(workflows.MaintenanceWorkflow, workflows.MaintenanceInput{StartedAt: time.Date(2026, 12, 4, 2, 0, 0, 0, time.UTC)})
	var res workflows.MaintenanceResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatalf("the run failed with its compaction: %v", err)
	}
	if attempts != 3 || !strings.Contains(report().Compacted.Failed, "disk full") || res.Deleted["inbox"] != 1 {
		t.Fatalf("attempts %d, report %+v, result %+v", attempts, report(), res)
	}
}

// captureReport registers a MaintenanceReport that keeps its input: the
// returned func reads the last one.
func captureReport(env *testsuite.TestWorkflowEnvironment) func() contract.MaintenanceReportInput {
	var report contract.MaintenanceReportInput
	env.RegisterActivityWithOptions(func(_ context.Context, in contract.MaintenanceReportInput) error {
		report = in
		return nil
	}, activity.RegisterOptions{Name: contract.MaintenanceReport})
	return func() contract.MaintenanceReportInput { return report }
}
