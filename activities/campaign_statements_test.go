package activities_test

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"

	"go.temporal.io/sdk/testsuite"

	"github.com/herald-notify/herald/activities"
	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/ratelimit"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/testenv"
	"github.com/herald-notify/herald/internal/webhooks"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/registry"
	"github.com/herald-notify/herald/providers/resolver"
	"github.com/herald-notify/herald/providers/sandbox"
)

// maxStatementsPerRecipient bounds the statements Herald itself runs per
// recipient and channel of a personalized campaign batch (the sandbox's own
// recording, the provider call, not counted): the guard's reads and writes are
// made per chunk, not per recipient.
const maxStatementsPerRecipient = 0.1

// TestCampaignStatementsPerRecipient counts the database statements one
// 500-recipient campaign batch runs per channel (email, SMS, push, each its own
// campaign with per-recipient data), through a statement-counting dbx.DB under
// every store the activities use (the store, the provider store, the sandbox
// recorder, the rate limiter, the webhook queue). It fails when Herald's own
// statements per recipient exceed maxStatementsPerRecipient; the sandbox's
// recording (one statement per SMS and per push device, one per email batch)
// is reported apart.
func TestCampaignStatementsPerRecipient(t *testing.T) {
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	tenantID, key := h.Tenant("statements")
	h.Template(key, personalizedTemplate("personal"))
	const n = 500
	list, _ := personalizedAudience(t, h, tenantID, key, "s", n)

	cdb := newCountingDB(testenv.Pool(t))
	st, prov := store.New(cdb), providers.NewStore(cdb, nil)
	acts := &activities.Activities{Store: st, Providers: prov,
		Senders: resolver.New(prov, resolver.Process{SandboxFallback: true, Registry: registry.New()}, sandbox.NewPGRecorder(cdb)),
		Limiter: ratelimit.New(cdb), Webhooks: &webhooks.Emitter{Store: st}}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(acts)

	for _, ch := range []string{"email", "sms", "push"} {
		id := "statements-" + ch
		h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/campaigns", key, map[string]any{"campaign_id": id, "template_id": "personal",
			"channels": []string{ch}, "data": map[string]any{"offer": "spring"}, "audience": map[string]any{"list_id": list}})
		cp, err := h.Store.GetCampaign(context.Background(), tenantID, id)
		if err != nil {
			t.Fatal(err)
		}
		spec := campaignSpec(t, cp)
		cdb.reset()
		val, err := env.ExecuteActivity(contract.CampaignBatch, contract.CampaignBatchInput{Campaign: spec, Limit: n})
		if err != nil {
			t.Fatal(err)
		}
		var res contract.CampaignBatchResult
		if err := val.Get(&res); err != nil {
			t.Fatal(err)
		}
		texts := cdb.texts()
		kinds := cdb.reset()
		if res.Recipients != n || res.Delivered != n {
			t.Fatalf("%s batch: %+v", ch, res)
		}
		var top []string
		for k, v := range texts {
			top = append(top, fmt.Sprintf("%6d  %s", v, k))
		}
		sort.Sort(sort.Reverse(sort.StringSlice(top)))
		per := float64(kinds["herald"]) / n
		t.Logf("%s: %d recipients, %d herald statements (%.3f per recipient), %d sandbox recordings (%.3f per recipient)\n%s",
			ch, n, kinds["herald"], per, kinds["sandbox"], float64(kinds["sandbox"])/n, strings.Join(top[:min(len(top), 12)], "\n"))
		if per > maxStatementsPerRecipient {
			t.Errorf("%s: %.3f herald statements per recipient, want at most %.2f", ch, per, maxStatementsPerRecipient)
		}
	}
}
