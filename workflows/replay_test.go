package workflows_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/herald-notify/herald/workflows"
)

// manifestFile lists the recorded histories of the live notification workflow
// (written by TestRecordHistories). The workflow derives its notification id from
// its workflow and run IDs, so each replay uses the original ones.
var manifestFile = filepath.Join("testdata", "histories.json")

type recordedHistory struct {
	Scenario   string `json:"scenario"`
	File       string `json:"file"`
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
}

// liveScenarios are the paths docs/versioning.md promises keep replaying.
var liveScenarios = []string{"in_app", "all_channels", "scheduled_cancelled", "scheduled", "quiet_hours", "dead_letter"}

func loadHistories(t *testing.T) []recordedHistory {
	t.Helper()
	raw, err := os.ReadFile(manifestFile)
	if err != nil {
		t.Fatal(err)
	}
	var hs []recordedHistory
	if err := json.Unmarshal(raw, &hs); err != nil {
		t.Fatalf("%s: %v", manifestFile, err)
	}
	have := map[string]bool{}
	for _, h := range hs {
		have[h.Scenario] = true
	}
	for _, s := range liveScenarios {
		if !have[s] {
			t.Errorf("no recorded history for scenario %q", s)
		}
	}
	return hs
}

func replay(t *testing.T, h recordedHistory, register func(worker.WorkflowReplayer)) error {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", h.File))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hist, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	if err != nil {
		t.Fatalf("parse %s: %v", h.File, err)
	}
	r := worker.NewWorkflowReplayer()
	register(r)
	return r.ReplayWorkflowHistoryWithOptions(nil, hist, worker.ReplayWorkflowHistoryOptions{
		OriginalExecution: workflow.Execution{ID: h.WorkflowID, RunID: h.RunID},
	})
}

// TestReplayRecordedHistories fails on a change that would break determinism for
// workflows already running; see docs/versioning.md for what to do then.
func TestReplayRecordedHistories(t *testing.T) {
	for _, h := range loadHistories(t) {
		t.Run(h.Scenario, func(t *testing.T) {
			if err := replay(t, h, func(r worker.WorkflowReplayer) { r.RegisterWorkflow(workflows.NotificationWorkflow) }); err != nil {
				t.Fatalf("replay %s: %v", h.File, err)
			}
		})
	}
}

// TestReplayDetectsAChangedWorkflow shows the replay test can fail: a workflow
// that starts with a timer the recorded runs never had is rejected on every history.
func TestReplayDetectsAChangedWorkflow(t *testing.T) {
	changed := func(ctx workflow.Context, in workflows.NotificationInput) (workflows.NotificationResult, error) {
		if err := workflow.Sleep(ctx, time.Second); err != nil {
			return workflows.NotificationResult{}, err
		}
		return workflows.NotificationWorkflow(ctx, in)
	}
	for _, h := range loadHistories(t) {
		err := replay(t, h, func(r worker.WorkflowReplayer) {
			r.RegisterWorkflowWithOptions(changed, workflow.RegisterOptions{Name: "NotificationWorkflow"})
		})
		if err == nil {
			t.Errorf("%s: a non-deterministic change replayed without error", h.Scenario)
		}
	}
}
