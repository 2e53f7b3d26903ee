package api_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
)

// campaignFailure is a failed campaign's failure.reason ("" when absent).
func campaignFailure(r apitest.Response) string {
	f, _ := r.JSON["failure"].(map[string]any)
	s, _ := f["reason"].(string)
	return s
}

// TestCampaignCountsAgainstDailyQuota: campaign recipients count against the
// daily quota POST /v1/notifications counts against. A campaign whose audience
// does not fit what is left today is refused at once (429
// daily_quota_exceeded); the audience of one that starts is reserved whole, so
// the single notifications after it are refused when it used the quota up; and a
// scheduled campaign that no longer fits when it starts ends failed with the
// reason daily_quota_exceeded (nothing sent). Before, the quota limited POST
// /v1/notifications only: a tenant whose quota was spent could send campaigns
// to all its users as often as it liked.
func TestCampaignCountsAgainstDailyQuota(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	tenantID, key := h.TenantWith("quota", "promo")
	users := campaignUsers(t, h, tenantID, "q", 8)
	h.TenantLimits(key, store.TenantLimits{DailyQuota: 10})

	// A scheduled campaign of 3: fits now (0 of 10 used).
	sendAt := time.Now().Add(4 * time.Second).UTC().Format(time.RFC3339Nano)
	h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/campaigns", key, map[string]any{"campaign_id": "later", "template_id": "promo",
		"channels": []string{"in_app"}, "send_at": sendAt, "audience": map[string]any{"user_ids": users[:3]}})
	// 8 at once: reserved when it starts (8 of 10).
	h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/campaigns", key, map[string]any{"campaign_id": "now", "template_id": "promo",
		"channels": []string{"in_app"}, "audience": map[string]any{"all_users": true}})
	if d := awaitCampaign(h, key, "now", herald.CampaignCompleted, 60*time.Second); num(counts(t, d, "in_app"), "delivered") != 8 {
		t.Fatalf("campaign now: %s", d.Body)
	}
	// The scheduled one no longer fits when it starts: failed, nothing sent.
	later := awaitCampaign(h, key, "later", herald.CampaignFailed, 60*time.Second)
	if campaignFailure(later) != string(herald.CampaignQuotaExceeded) || num(counts(t, later, "in_app"), "delivered") != 0 {
		t.Fatalf("scheduled campaign over the quota: %s", later.Body)
	}
	// 3 more do not fit (8 of 10 used): refused at once, naming the audience.
	r := h.Do(http.MethodPost, "/v1/campaigns", key, map[string]any{"template_id": "promo", "channels": []string{"in_app"},
		"audience": map[string]any{"user_ids": users[:3]}})
	apitest.WantError(t, r, http.StatusTooManyRequests, "daily_quota_exceeded", "audience")
	if r.Header.Get("Retry-After") == "" {
		t.Fatalf("429 without Retry-After: %s", r.Body)
	}
	// Single notifications share the quota: 2 left, then 429.
	for i := range 2 {
		h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/notifications", key, map[string]any{"user_id": users[0], "template_id": "promo",
			"channels": []string{"in_app"}, "idempotency_key": "n" + strconv.Itoa(i)})
	}
	apitest.WantError(t, h.Do(http.MethodPost, "/v1/notifications", key, map[string]any{"user_id": users[0], "template_id": "promo",
		"channels": []string{"in_app"}, "idempotency_key": "n-over"}), http.StatusTooManyRequests, "daily_quota_exceeded", "")
	// The quota spent: a campaign of one is refused too.
	apitest.WantError(t, h.Do(http.MethodPost, "/v1/campaigns", key, map[string]any{"template_id": "promo", "channels": []string{"in_app"},
		"audience": map[string]any{"user_ids": users[:1]}}), http.StatusTooManyRequests, "daily_quota_exceeded", "audience")
}

// TestCampaignAudienceCap: the operator's cap on one campaign's audience
// refuses a larger audience at once (422 audience_too_large), and a campaign
// whose topic grew past the cap after it was accepted ends failed with that
// reason when it starts, sending nothing. A tenant cannot raise its own cap:
// PUT /v1/settings does not take it, and its key opens no operator route.
func TestCampaignAudienceCap(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	tenantID, key := h.TenantWith("cap", "promo")
	users := campaignUsers(t, h, tenantID, "c", 4)
	h.TenantLimits(key, store.TenantLimits{MaxAudienceSize: 2})

	apitest.WantError(t, h.Do(http.MethodPost, "/v1/campaigns", key, map[string]any{"template_id": "promo", "channels": []string{"in_app"},
		"audience": map[string]any{"user_ids": users[:3]}}), http.StatusUnprocessableEntity, "audience_too_large", "audience")
	apitest.WantError(t, h.Do(http.MethodPost, "/v1/campaigns", key, map[string]any{"template_id": "promo", "channels": []string{"in_app"},
		"audience": map[string]any{"all_users": true}}), http.StatusUnprocessableEntity, "audience_too_large", "audience")
	h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/campaigns", key, map[string]any{"campaign_id": "two", "template_id": "promo",
		"channels": []string{"in_app"}, "audience": map[string]any{"user_ids": users[:2]}})
	awaitCampaign(h, key, "two", herald.CampaignCompleted, 60*time.Second)

	// A topic of 2 when accepted, 4 when the campaign starts.
	h.MustDo(http.StatusOK, http.MethodPost, "/v1/topics/grows/subscribers", key, map[string]any{"user_ids": users[:2]})
	sendAt := time.Now().Add(3 * time.Second).UTC().Format(time.RFC3339Nano)
	h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/campaigns", key, map[string]any{"campaign_id": "grown", "template_id": "promo",
		"channels": []string{"in_app"}, "send_at": sendAt, "audience": map[string]any{"topic": "grows"}})
	h.MustDo(http.StatusOK, http.MethodPost, "/v1/topics/grows/subscribers", key, map[string]any{"user_ids": users[2:]})
	grown := awaitCampaign(h, key, "grown", herald.CampaignFailed, 60*time.Second)
	if campaignFailure(grown) != string(herald.CampaignAudienceTooLarge) || num(counts(t, grown, "in_app"), "delivered") != 0 {
		t.Fatalf("grown audience: %s", grown.Body)
	}

	// The tenant cannot raise its own limits.
	if r := h.Do(http.MethodPut, "/v1/settings", key, map[string]any{"max_audience_size": 1000}); r.Status < 400 {
		t.Fatalf("a tenant set its own audience cap: %d %s", r.Status, r.Body)
	}
	if r := h.Do(http.MethodPut, "/v1/operator/tenants/"+tenantID+"/limits", key, map[string]any{"max_audience_size": 1000}); r.Status != http.StatusUnauthorized {
		t.Fatalf("a tenant key on the operator API: %d %s", r.Status, r.Body)
	}
	l, err := h.Store.GetTenantLimits(context.Background(), tenantID)
	if err != nil || l.MaxAudienceSize != 2 {
		t.Fatalf("limits after the tenant's attempts: %+v %v", l, err)
	}
}

// TestConcurrentCampaignCap: the operator's cap on a tenant's unfinished
// campaigns refuses one more (429 too_many_campaigns) while the others are
// scheduled or running; a campaign whose workflow was terminated frees its
// slot (the create that hits the cap asks Temporal, and records it failed).
func TestConcurrentCampaignCap(t *testing.T) {
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	tenantID, key := h.TenantWith("concurrent", "promo")
	users := campaignUsers(t, h, tenantID, "k", 2)
	h.TenantLimits(key, store.TenantLimits{MaxConcurrentCampaigns: 2})
	create := func(id string) apitest.Response {
		return h.Do(http.MethodPost, "/v1/campaigns", key, map[string]any{"campaign_id": id, "template_id": "promo",
			"channels": []string{"in_app"}, "audience": map[string]any{"user_ids": users}})
	}
	for _, id := range []string{"a", "b"} {
		if r := create(id); r.Status != http.StatusAccepted {
			t.Fatalf("campaign %s: %d %s", id, r.Status, r.Body)
		}
	}
	apitest.WantError(t, create("c"), http.StatusTooManyRequests, "too_many_campaigns", "")
	// The same key again is no new campaign: answered, not refused.
	if r := create("a"); r.Status != http.StatusOK {
		t.Fatalf("campaign a again: %d %s", r.Status, r.Body)
	}
	// Another tenant has slots of its own.
	otherID, other := h.TenantWith("other", "promo")
	campaignUsers(t, h, otherID, "o", 1)
	h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/campaigns", other, map[string]any{"template_id": "promo",
		"channels": []string{"in_app"}, "audience": map[string]any{"all_users": true}})

	terminateCampaign(t, h, tenantID, "a")
	h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/campaigns", key, map[string]any{"campaign_id": "c", "template_id": "promo",
		"channels": []string{"in_app"}, "audience": map[string]any{"user_ids": users}})
	a := h.MustDo(http.StatusOK, http.MethodGet, "/v1/campaigns/a", key, nil)
	if a.Str("status") != herald.CampaignFailed || campaignFailure(a) != string(herald.CampaignWorkflowEnded) {
		t.Fatalf("terminated campaign: %s", a.Body)
	}
}

// terminateCampaign terminates a campaign's workflow, as an operator (or
// Temporal, at its history limits) would.
func terminateCampaign(t *testing.T, h *apitest.Harness, tenantID, id string) {
	t.Helper()
	cp, err := h.Store.GetCampaign(context.Background(), tenantID, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Temporal.TerminateWorkflow(context.Background(), cp.WorkflowID, "", "test: terminated"); err != nil {
		t.Fatal(err)
	}
}

// TestTerminatedCampaignShowsFailed: a campaign whose workflow was terminated
// (by an operator, or by Temporal when its history grew past the limits) shows
// failed with the reason workflow_ended, in the list and on its own, not
// running for ever; it is never
// started again by its key, and takes no control.
func TestTerminatedCampaignShowsFailed(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	tenantID, key := h.TenantWith("terminated", "promo")
	users := campaignUsers(t, h, tenantID, "t", 5)
	h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/campaigns", key, map[string]any{"campaign_id": "slow", "template_id": "promo",
		"channels": []string{"in_app"}, "rate_per_second": 1, "audience": map[string]any{"user_ids": users}})
	awaitCampaign(h, key, "slow", herald.CampaignRunning, 30*time.Second)
	terminateCampaign(t, h, tenantID, "slow")
	// The list shows it failed too (within the reconcile interval).
	h.Eventually(30*time.Second, "the list shows the campaign failed", func() bool {
		items, _ := h.MustDo(http.StatusOK, http.MethodGet, "/v1/campaigns", key, nil).JSON["items"].([]any)
		return len(items) == 1 && items[0].(map[string]any)["status"] == herald.CampaignFailed
	})
	got := awaitCampaign(h, key, "slow", herald.CampaignFailed, 30*time.Second)
	f, _ := got.JSON["failure"].(map[string]any)
	if campaignFailure(got) != string(herald.CampaignWorkflowEnded) || !strings.Contains(f["message"].(string), "terminated") || got.JSON["finished_at"] == nil {
		t.Fatalf("terminated campaign: %s", got.Body)
	}
	again := h.MustDo(http.StatusOK, http.MethodPost, "/v1/campaigns", key, map[string]any{"campaign_id": "slow", "template_id": "promo",
		"channels": []string{"in_app"}, "audience": map[string]any{"user_ids": users}})
	if again.Str("status") != herald.CampaignFailed {
		t.Fatalf("the same key again: %s", again.Body)
	}
	apitest.WantError(t, h.Do(http.MethodPost, "/v1/campaigns/slow/pause", key, nil), http.StatusConflict, "campaign_finished", "")
}

// TestCampaignDataBounded: a campaign's data is bounded as a single
// notification's is (64 KiB of JSON), refused with 400 naming data. Before, up
// to the 3 MiB body was taken and copied into every batch's input: ~1.5 MB of
// data terminated the workflow after a few dozen batches (history size) while
// the campaign said running. Data just under the bound is delivered, read by
// each batch from the campaign's row.
func TestCampaignDataBounded(t *testing.T) {
	h := apitest.Start(t, apitest.Options{CampaignPageSize: 2})
	tenantID, key := h.TenantWith("data", "promo")
	users := campaignUsers(t, h, tenantID, "d", 5)
	big := strings.Repeat("x", 1_500_000)
	apitest.WantError(t, h.Do(http.MethodPost, "/v1/campaigns", key, map[string]any{"template_id": "promo", "channels": []string{"in_app"},
		"data": map[string]any{"body": big}, "audience": map[string]any{"user_ids": users}}), http.StatusBadRequest, "data_too_large", "data")
	justUnder := strings.Repeat("y", contract.MaxCampaignDataBytes-100)
	h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/campaigns", key, map[string]any{"campaign_id": "under", "template_id": "promo",
		"channels": []string{"in_app"}, "data": map[string]any{"title": "t", "body": justUnder}, "audience": map[string]any{"user_ids": users}})
	done := awaitCampaign(h, key, "under", herald.CampaignCompleted, 60*time.Second)
	if num(counts(t, done, "in_app"), "delivered") != 5 {
		t.Fatalf("campaign: %s", done.Body)
	}
	inbox := h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/"+users[4]+"/inbox", key, nil)
	if it := inbox.JSON["items"].([]any)[0].(map[string]any); it["body"] != justUnder {
		t.Fatalf("the inbox item's body is not the campaign's data (%d bytes)", len(it["body"].(string)))
	}
	// No batch's input carries the data: the workflow's history stays small.
	cp, err := h.Store.GetCampaign(context.Background(), tenantID, "under")
	if err != nil {
		t.Fatal(err)
	}
	size := historyBytes(t, h, cp.WorkflowID)
	if size > contract.MaxCampaignDataBytes {
		t.Fatalf("the campaign workflow's history is %d bytes for 3 batches: the data (%d bytes) is copied into it", size, len(justUnder))
	}
	t.Logf("history of 3 batches with %d bytes of data: %d bytes", len(justUnder), size)
}

// historyBytes is the size of a workflow's history (every run's events of its
// latest run, as Temporal stores them).
func historyBytes(t *testing.T, h *apitest.Harness, workflowID string) int {
	t.Helper()
	it := h.Temporal.GetWorkflowHistory(context.Background(), workflowID, "", false, 0)
	n := 0
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		n += proto.Size(ev)
	}
	return n
}
