package workflows_test

import (
	"os"
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/herald-notify/herald/workflows"
)

// recordedHistories are histories of real runs of the notification workflow,
// exported with `temporal workflow show -w ID -o json`. The workflow derives its
// notification id from its workflow and run IDs, so each replay uses the original ones.
var recordedHistories = []struct {
	file, workflowID, runID string
}{
	{
		file:       "testdata/notification_in_app_v1.json",
		workflowID: "notification/t_74e08cee9a0ef6ff/fde62ba72df450c4dcc67353ec509869",
		runID:      "01a22e7c-5b4b-760d-accb-b1177d1bd5b4",
	},
	{
		// Template "welcome" on all four channels: preferences, render per channel,
		// email + SMS through the sandbox provider, push suppressed (no device).
		file:       "testdata/notification_templated_v2.json",
		workflowID: "notification/t_f127cf3976ae6c30/bfd6484bd83459ae982b8b8b45c09f36",
		runID:      "01a22ed4-9c35-7236-af7d-ececf6cd2568",
	},
	{
		// send_at 30 s ahead, cancelled through the cancel update while scheduled.
		file:       "testdata/notification_scheduled_cancelled_v2.json",
		workflowID: "notification/t_f127cf3976ae6c30/5072560af18c36d3b6f01783a6cc00c2",
		runID:      "01a22ed4-9c53-76b5-b683-0493531fff7b",
	},
	{
		// The same template with database work as local activities (markers).
		file:       "testdata/notification_local_v3.json",
		workflowID: "notification/t_99f6fca86316b639/55a7973b89a117b475911038b27a2333",
		runID:      "01a22ee1-e018-7346-9ebc-f6dd03a155a5",
	},
}

// TestReplayRecordedHistories fails on a change that would break determinism for
// workflows already running; gate such changes with workflow.GetVersion.
func TestReplayRecordedHistories(t *testing.T) {
	for _, h := range recordedHistories {
		t.Run(h.file, func(t *testing.T) {
			f, err := os.Open(h.file)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			hist, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
			if err != nil {
				t.Fatalf("parse %s: %v", h.file, err)
			}
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflow(workflows.NotificationWorkflow)
			if err := r.ReplayWorkflowHistoryWithOptions(nil, hist, worker.ReplayWorkflowHistoryOptions{
				OriginalExecution: workflow.Execution{ID: h.workflowID, RunID: h.runID},
			}); err != nil {
				t.Fatalf("replay %s: %v", h.file, err)
			}
		})
	}
}
