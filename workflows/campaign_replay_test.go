package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/workflows"
)

// campaignManifestFile lists the recorded histories of the campaign workflow
// (written by TestRecordCampaignHistories with HERALD_RECORD_HISTORIES=1).
var campaignManifestFile = filepath.Join("testdata", "campaign_histories.json")

// TestRecordCampaignHistories records a campaign's history: 120 recipients in
// batches of 20, two at a time, paced (rate_per_second 40), paused and resumed
// mid-way, then completed.
func TestRecordCampaignHistories(t *testing.T) {
	if os.Getenv(recordEnv) != "1" {
		t.Skip("set " + recordEnv + "=1 to record the replay histories")
	}
	h := apitest.Start(t, apitest.Options{CampaignPageSize: 20, CampaignWindow: 2})
	tenantID, key := h.TenantWith("record-campaign", "promo")
	users := make([]store.User, 120)
	ids := make([]string, len(users))
	for i := range users {
		ids[i] = fmt.Sprintf("r%03d", i)
		email := ids[i] + "@example.com"
		users[i] = store.User{UserID: ids[i], Email: &email}
	}
	if err := h.Store.InsertUsers(context.Background(), tenantID, users); err != nil {
		t.Fatal(err)
	}
	h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/campaigns", key, map[string]any{"campaign_id": "recorded", "template_id": "promo",
		"channels": []string{"in_app", "email"}, "rate_per_second": 40, "audience": map[string]any{"user_ids": ids}})
	get := func() apitest.Response {
		return h.MustDo(http.StatusOK, http.MethodGet, "/v1/campaigns/recorded", key, nil)
	}
	h.Eventually(30*time.Second, "40 processed", func() bool { return get().JSON["recipients_processed"].(float64) >= 40 })
	h.MustDo(http.StatusOK, http.MethodPost, "/v1/campaigns/recorded/pause", key, nil)
	time.Sleep(time.Second)
	h.MustDo(http.StatusOK, http.MethodPost, "/v1/campaigns/recorded/resume", key, nil)
	h.Eventually(60*time.Second, "completed", func() bool { return get().Str("status") == "completed" })
	cp, err := h.Store.GetCampaign(context.Background(), tenantID, "recorded")
	if err != nil {
		t.Fatal(err)
	}
	run := h.Temporal.GetWorkflow(context.Background(), cp.WorkflowID, "")
	if err := run.Get(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	file := "campaign_pause_resume.json"
	if err := os.WriteFile(filepath.Join("testdata", file), exportHistory(t, h.Temporal, cp.WorkflowID, run.GetRunID()), 0o644); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.MarshalIndent([]recordedHistory{{Scenario: "pause_resume", File: file, WorkflowID: cp.WorkflowID, RunID: run.GetRunID()}}, "", "  ")
	if err := os.WriteFile(campaignManifestFile, append(raw, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

func loadCampaignHistories(t *testing.T) []recordedHistory {
	t.Helper()
	raw, err := os.ReadFile(campaignManifestFile)
	if err != nil {
		t.Fatal(err)
	}
	var hs []recordedHistory
	if err := json.Unmarshal(raw, &hs); err != nil || len(hs) == 0 {
		t.Fatalf("%s: %v (%d histories)", campaignManifestFile, err, len(hs))
	}
	return hs
}

// TestReplayCampaignHistories fails on a change to CampaignWorkflow that would
// break determinism for campaigns already running.
func TestReplayCampaignHistories(t *testing.T) {
	for _, h := range loadCampaignHistories(t) {
		if err := replay(t, h, func(r worker.WorkflowReplayer) { r.RegisterWorkflow(workflows.CampaignWorkflow) }); err != nil {
			t.Fatalf("replay %s: %v", h.File, err)
		}
	}
}

// TestReplayDetectsAChangedCampaign: a campaign workflow that starts with a
// timer the recorded run never had is rejected.
func TestReplayDetectsAChangedCampaign(t *testing.T) {
	changed := func(ctx workflow.Context, in workflows.CampaignInput) (workflows.CampaignWorkflowResult, error) {
		if err := workflow.Sleep(ctx, time.Second); err != nil {
			return workflows.CampaignWorkflowResult{}, err
		}
		return workflows.CampaignWorkflow(ctx, in)
	}
	for _, h := range loadCampaignHistories(t) {
		if err := replay(t, h, func(r worker.WorkflowReplayer) {
			r.RegisterWorkflowWithOptions(changed, workflow.RegisterOptions{Name: "CampaignWorkflow"})
		}); err == nil {
			t.Errorf("%s: a non-deterministic change replayed without error", h.Scenario)
		}
	}
}
