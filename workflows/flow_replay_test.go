package workflows_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/flows"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/workflows"
)

// flowManifestFile lists the recorded histories of the flow interpreter and
// the digest workflow (written by TestRecordFlowHistories).
var flowManifestFile = filepath.Join("testdata", "flow_histories.json")

// flowScenarios are the paths the flow replay test promises keep replaying.
var flowScenarios = []string{"flow_escalation_timeout", "flow_throttled", "flow_digested_cancelled", "flow_digest_continuation", "digest_window"}

// TestRecordFlowHistories records, on the real stack: an escalation whose
// in-app item is not seen (wait times out, email sent), a throttled event, a
// digested event cancelled before the close, the digest's continuation run and
// the digest workflow itself:
//
//	make test ARGS='-run TestRecordFlowHistories ./workflows/' HERALD_RECORD_HISTORIES=1
func TestRecordFlowHistories(t *testing.T) {
	if os.Getenv(recordEnv) != "1" {
		t.Skip("set " + recordEnv + "=1 to record the replay histories")
	}
	e := newFlowEnv(t, apitest.Options{})
	e.dedup = time.Second
	e.h.PutUser(e.key, "rec", map[string]any{"email": "rec@example.com"})
	ctx := context.Background()
	var manifest []recordedHistory
	save := func(scenario, workflowID, runID string) {
		t.Helper()
		if err := e.h.Temporal.GetWorkflow(ctx, workflowID, runID).Get(ctx, nil); err != nil {
			t.Fatalf("%s: %v", scenario, err)
		}
		file := scenario + ".json"
		if err := os.WriteFile(filepath.Join("testdata", file), exportHistory(t, e.h.Temporal, workflowID, runID), 0o644); err != nil {
			t.Fatal(err)
		}
		manifest = append(manifest, recordedHistory{Scenario: scenario, File: file, WorkflowID: workflowID, RunID: runID})
	}
	saveEvent := func(scenario, id string) {
		t.Helper()
		key, runID, err := ids.ParseNotificationID(id)
		if err != nil {
			t.Fatal(err)
		}
		save(scenario, ids.NotificationWorkflowID(e.tenantID, key), runID)
	}

	esc := escalationFlow(t)
	esc.Steps[1].Timeout = flows.Duration(1500 * time.Millisecond)
	saveEvent("flow_escalation_timeout", e.trigger("escalate", esc, "rec", map[string]any{"title": "t", "body": "b"}))

	var throttle = throttleFlow(t, 1)
	e.trigger("alerts", throttle, "rec", map[string]any{"title": "t", "body": "b"})
	time.Sleep(500 * time.Millisecond)
	saveEvent("flow_throttled", e.trigger("alerts", throttle, "rec", map[string]any{"title": "t", "body": "b"}))

	def := digestFlow("3s", herald.ChannelInApp)
	e.dedup = 5 * time.Second
	cancelled := e.trigger("digest", def, "rec", map[string]any{"thread_id": "r", "text": "one"})
	e.trigger("digest", def, "rec", map[string]any{"thread_id": "r", "text": "two"})
	e.h.Eventually(20*time.Second, "two events joined", func() bool { return e.joined("rec") == 2 })
	e.h.MustDo(200, "DELETE", "/v1/notifications/"+cancelled, e.key, nil)
	saveEvent("flow_digested_cancelled", cancelled)
	var sendID string
	e.h.Eventually(20*time.Second, "the digest's continuation", func() bool {
		run, err := e.h.Store.FlowRunOf(ctx, e.tenantID, cancelled)
		if err != nil || run.Digest == nil {
			return false
		}
		return e.pool.QueryRow(ctx, `SELECT notification_id FROM flow_runs WHERE tenant_id = $1 AND digest_id IS NOT NULL`, e.tenantID).Scan(&sendID) == nil
	})
	saveEvent("flow_digest_continuation", sendID)
	dw := workflows.DigestWorkflowID(e.tenantID, "digest", "rec", "r")
	save("digest_window", dw, "")
	manifest[len(manifest)-1].RunID = e.h.Temporal.GetWorkflow(ctx, dw, "").GetRunID()

	raw, _ := json.MarshalIndent(manifest, "", "  ")
	if err := os.WriteFile(flowManifestFile, append(raw, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReplayFlowHistories replays the recorded flow and digest histories on
// today's code: a change that alters the commands a recorded run produced
// fails here (docs/versioning.md says what to do then).
func TestReplayFlowHistories(t *testing.T) {
	raw, err := os.ReadFile(flowManifestFile)
	if err != nil {
		t.Fatal(err)
	}
	var hs []recordedHistory
	if err := json.Unmarshal(raw, &hs); err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, h := range hs {
		have[h.Scenario] = true
		t.Run(h.Scenario, func(t *testing.T) {
			if err := replay(t, h, func(r worker.WorkflowReplayer) {
				r.RegisterWorkflow(workflows.FlowWorkflow)
				r.RegisterWorkflow(workflows.DigestWorkflow)
				r.RegisterWorkflow(workflows.NotificationWorkflow)
			}); err != nil {
				t.Fatalf("replay %s: %v", h.File, err)
			}
		})
	}
	for _, s := range flowScenarios {
		if !have[s] {
			t.Errorf("no recorded history for scenario %q", s)
		}
	}
}

// TestReplayFlowHistoriesDetectAChange shows the flow replay can fail: an
// interpreter or digest that starts with a timer the recorded runs never had
// is rejected on every history.
func TestReplayFlowHistoriesDetectAChange(t *testing.T) {
	raw, err := os.ReadFile(flowManifestFile)
	if err != nil {
		t.Fatal(err)
	}
	var hs []recordedHistory
	if err := json.Unmarshal(raw, &hs); err != nil {
		t.Fatal(err)
	}
	flow := func(ctx workflow.Context, in workflows.FlowInput) (workflows.FlowResult, error) {
		if err := workflow.Sleep(ctx, time.Second); err != nil {
			return workflows.FlowResult{}, err
		}
		return workflows.FlowWorkflow(ctx, in)
	}
	digest := func(ctx workflow.Context, in workflows.DigestInput) (workflows.DigestResult, error) {
		if err := workflow.Sleep(ctx, time.Second); err != nil {
			return workflows.DigestResult{}, err
		}
		return workflows.DigestWorkflow(ctx, in)
	}
	for _, h := range hs {
		err := replay(t, h, func(r worker.WorkflowReplayer) {
			r.RegisterWorkflowWithOptions(flow, workflow.RegisterOptions{Name: "FlowWorkflow"})
			r.RegisterWorkflowWithOptions(digest, workflow.RegisterOptions{Name: "DigestWorkflow"})
		})
		if err == nil {
			t.Errorf("%s: a non-deterministic change replayed without error", h.Scenario)
		}
	}
}
