package activities_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/internal/testenv"
)

// wantOnePerChannel checks that every recipient got exactly one message per
// channel (one recorded message, asked for once: sum(calls) = 1) and returns
// each channel's messages by notification id.
func wantOnePerChannel(t *testing.T, tenantID string, channels []string, n int) map[string]map[string]sandboxMessage {
	t.Helper()
	byChannel := map[string]map[string]sandboxMessage{}
	calls := map[string]int{}
	for _, m := range sandboxMessages(t, tenantID) {
		if byChannel[m.channel] == nil {
			byChannel[m.channel] = map[string]sandboxMessage{}
		}
		if _, dup := byChannel[m.channel][m.notificationID]; dup {
			t.Fatalf("%s of %s recorded twice", m.channel, m.notificationID)
		}
		byChannel[m.channel][m.notificationID] = m
		calls[m.channel] += m.calls
	}
	for _, ch := range channels {
		if len(byChannel[ch]) != n || calls[ch] != n {
			t.Fatalf("%s: %d recipients got a message, asked %d times; want %d once each", ch, len(byChannel[ch]), calls[ch], n)
		}
	}
	return byChannel
}

// wantOwnContent checks that recipient i's message on each channel is its own:
// its name and code, as the template prints them.
// With conditional, the email is conditionalTemplate's.
func wantOwnContent(t *testing.T, tenantID, campaignID, prefix string, i int, msgs map[string]map[string]sandboxMessage, conditional bool) {
	t.Helper()
	id := ids.CampaignNotificationID(tenantID, campaignID, fmt.Sprintf("%s%05d", prefix, i))
	name, code := recipientName(i), recipientCode(i)
	email, sms, push := msgs["email"][id], msgs["sms"][id], msgs["push"][id]
	wantSubject := name + ", your spring offer"
	wantText := "Hello " + name + ", your code is " + code + "."
	if conditional {
		wantSubject = name + ", your offer"
		if i%3 == 0 { // personalizedAudience's vip
			wantSubject, wantText = "VIP: "+wantSubject, "Hello "+name+", our VIP, your code is "+code+"."
		}
	}
	if email.subject != wantSubject || email.body != wantText || email.recipient != fmt.Sprintf("%s%05d@example.com", prefix, i) {
		t.Fatalf("recipient %d's email: %+v, want subject %q and text %q", i, email, wantSubject, wantText)
	}
	if sms.body != name+": code "+code+" (spring)" || sms.recipient != fmt.Sprintf("+1415%07d", i) {
		t.Fatalf("recipient %d's SMS: %+v", i, sms)
	}
	if push.subject != "Hi "+name || push.body != "Code "+code || push.recipient != fmt.Sprintf("tok-%s%05d", prefix, i) {
		t.Fatalf("recipient %d's push: %+v", i, push)
	}
}

// TestPersonalizedCampaignEmailSMSPush: a 5,000-recipient campaign whose list
// gives each recipient data of its own, on email, SMS and push (sandbox):
// every recipient gets exactly one message per channel, with its own content;
// the emails go in batch calls from one skeleton with per-recipient
// substitutions (a handful of calls, not one per recipient), SMS and push in
// chunks of single calls; each channel's history has one accepted attempt per
// recipient.
func TestPersonalizedCampaignEmailSMSPush(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	tenantID, key := h.Tenant("personal")
	h.Template(key, personalizedTemplate("personal"))
	const n = 5000
	list, _ := personalizedAudience(t, h, tenantID, key, "p", n)

	done := func() apitest.Response {
		_, r := runCampaign(t, h, key, map[string]any{"campaign_id": "personal", "template_id": "personal",
			"channels": []string{"email", "sms", "push"}, "data": map[string]any{"offer": "spring"},
			"audience": map[string]any{"list_id": list}}, 3*time.Minute)
		return r
	}()
	counts := done.JSON["counts"].(map[string]any)
	for _, ch := range []string{"email", "sms", "push"} {
		if c := counts[ch].(map[string]any); int(c["sent"].(float64)) != n {
			t.Fatalf("%s counts: %s", ch, done.Body)
		}
	}
	msgs := wantOnePerChannel(t, tenantID, []string{"email", "sms", "push"}, n)
	for i := 0; i < n; i += 37 {
		wantOwnContent(t, tenantID, "personal", "p", i, msgs, false)
	}
	wantOwnContent(t, tenantID, "personal", "p", n-1, msgs, false)

	pool := testenv.Pool(t)
	var calls, accepted, other, stored int
	if err := pool.QueryRow(context.Background(), `
		SELECT count(DISTINCT provider_message_id) FROM deliveries WHERE tenant_id = $1 AND channel = 'email'`, tenantID).Scan(&calls); err != nil {
		t.Fatal(err)
	}
	if calls > 20 {
		t.Fatalf("%d email provider calls for %d personalized recipients: not batched", calls, n)
	}
	if err := pool.QueryRow(context.Background(), `
		SELECT count(*) FILTER (WHERE accepted_attempt = 1), count(*) FILTER (WHERE accepted_attempt IS DISTINCT FROM 1),
			(SELECT count(*) FROM delivery_attempts WHERE tenant_id = $1)
		FROM deliveries WHERE tenant_id = $1 AND channel <> 'in_app'`, tenantID).Scan(&accepted, &other, &stored); err != nil {
		t.Fatal(err)
	}
	// Every first call accepted: the delivery rows carry the accepted
	// attempts (store.ListAttemptsOf), and no attempt is a row.
	if accepted != 3*n || other != 0 || stored != 0 {
		t.Fatalf("history: %d first attempts accepted, %d other deliveries, %d attempt rows; want %d, 0 and 0", accepted, other, stored, 3*n)
	}
}

// TestConditionalTemplateCampaign: a template whose email has a conditional is
// not batchable; each recipient is sent its own render in chunks of single
// calls, the conditional decided by its own data. A webhook endpoint gets one
// "sent" event per recipient and channel, queued in bulk.
func TestConditionalTemplateCampaign(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	tenantID, key := h.Tenant("conditional")
	h.Template(key, conditionalTemplate("cond"))
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer hook.Close()
	h.MustDo(http.StatusCreated, http.MethodPost, "/v1/webhook-endpoints", key,
		map[string]any{"url": hook.URL, "events": []string{herald.EventDeliverySent}})
	const n = 600
	list, _ := personalizedAudience(t, h, tenantID, key, "c", n)

	_, done := runCampaign(t, h, key, map[string]any{"campaign_id": "cond", "template_id": "cond",
		"channels": []string{"email", "sms", "push"}, "data": map[string]any{"offer": "spring"},
		"audience": map[string]any{"list_id": list}}, 2*time.Minute)
	counts := done.JSON["counts"].(map[string]any)
	for _, ch := range []string{"email", "sms", "push"} {
		if c := counts[ch].(map[string]any); int(c["sent"].(float64)) != n {
			t.Fatalf("%s counts: %s", ch, done.Body)
		}
	}
	msgs := wantOnePerChannel(t, tenantID, []string{"email", "sms", "push"}, n)
	for i := range n {
		wantOwnContent(t, tenantID, "cond", "c", i, msgs, true)
	}
	var single, events int
	pool := testenv.Pool(t)
	if err := pool.QueryRow(context.Background(), `
		SELECT count(DISTINCT provider_message_id) FROM deliveries WHERE tenant_id = $1 AND channel = 'email' AND provider_message_id NOT LIKE 'sandbox-batch-%'`,
		tenantID).Scan(&single); err != nil {
		t.Fatal(err)
	}
	if single != n {
		t.Fatalf("%d emails sent singly, want %d (a conditional is not batchable)", single, n)
	}
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM webhook_messages WHERE tenant_id = $1 AND event_type = $2`,
		tenantID, herald.EventDeliverySent).Scan(&events); err != nil {
		t.Fatal(err)
	}
	if events != 3*n {
		t.Fatalf("%d sent events queued, want %d", events, 3*n)
	}
	if !strings.HasPrefix(msgs["email"][ids.CampaignNotificationID(tenantID, "cond", "c00000")].subject, "VIP: ") {
		t.Fatal("the conditional was not applied")
	}
}

// TestCampaignChunkReadsReceiptsFirst: a batch re-run after its "sent" records
// were lost (the worker died after the provider accepted) finds the
// providers' receipts and records those sends without calling again: the
// sandbox's email (batched) and SMS (chunked) are asked once each. Run twice
// as is, the batch sends nothing (the guard records).
func TestCampaignChunkReadsReceiptsFirst(t *testing.T) {
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	tenantID, key := h.Tenant("receipts")
	h.Template(key, personalizedTemplate("personal"))
	const n = 200
	list, _ := personalizedAudience(t, h, tenantID, key, "r", n)
	h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/campaigns", key, map[string]any{"campaign_id": "receipts", "template_id": "personal",
		"channels": []string{"email", "sms"}, "data": map[string]any{"offer": "spring"}, "audience": map[string]any{"list_id": list}})
	cp, err := h.Store.GetCampaign(context.Background(), tenantID, "receipts")
	if err != nil {
		t.Fatal(err)
	}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(h.Activities())
	batch := func() contract.CampaignBatchResult {
		t.Helper()
		val, err := env.ExecuteActivity(contract.CampaignBatch, contract.CampaignBatchInput{Campaign: campaignSpec(t, cp), Limit: n})
		if err != nil {
			t.Fatal(err)
		}
		var res contract.CampaignBatchResult
		if err := val.Get(&res); err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := batch(); res.Delivered != 2*n {
		t.Fatalf("first run: %+v", res)
	}
	if res := batch(); res.Delivered != 0 || res.Duplicates != 2*n {
		t.Fatalf("second run: %+v", res)
	}
	// Lose the records: as if the worker died after the provider accepted.
	if _, err := testenv.Pool(t).Exec(context.Background(), `
		UPDATE deliveries SET status = 'pending', provider = NULL, provider_message_id = NULL, sent_at = NULL
		WHERE tenant_id = $1`, tenantID); err != nil {
		t.Fatal(err)
	}
	if res := batch(); res.Delivered != 0 || res.Duplicates != 2*n {
		t.Fatalf("re-run without records: %+v; want every send found by its receipt", res)
	}
	wantOnePerChannel(t, tenantID, []string{"email", "sms"}, n)
	var sent int
	if err := testenv.Pool(t).QueryRow(context.Background(), `
		SELECT count(*) FROM deliveries WHERE tenant_id = $1 AND status = 'sent' AND provider_message_id LIKE 'sandbox-%'`, tenantID).Scan(&sent); err != nil {
		t.Fatal(err)
	}
	if sent != 2*n {
		t.Fatalf("%d sends recorded from their receipts, want %d", sent, 2*n)
	}
}
