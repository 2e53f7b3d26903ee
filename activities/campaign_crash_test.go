package activities_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/testenv"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/providertest"
)

// TestCampaignSurvivesWorkerKills SIGKILLs a real `herald worker` process three
// times while a 1,500-recipient campaign (in-app + SendGrid email, batches of
// 100) drains, restarting it each time, with SendGrid's event webhook
// simulated (a receipt per accepted personalization, as SendGrid's "processed"
// events arrive). No recipient is lost: every one ends with exactly one inbox
// row (the in-app guard is transactional) and its email sent. None is emailed
// twice: a re-run batch that finds emails "sending" (the worker died after
// SendGrid accepted and before it recorded "sent") waits for the receipt window
// (herald.ReasonInDoubt) and the receipt then records them sent. Without a
// receipt inside the wait, the documented residual remains (as in crash_test.go).
func TestCampaignSurvivesWorkerKills(t *testing.T) {
	const pageSize, window = 100, 2
	bin, f, h := crashHarness(t, apitest.Options{CampaignPageSize: pageSize, CampaignWindow: window,
		CampaignInDoubtWait: 2 * time.Second})
	tenantID, key := h.TenantWith("campaign-crash", "promo")
	h.ConfigureSendGrid(tenantID, `{"from":"shop@example.com"}`)
	const n = 1500
	users := make([]store.User, n)
	ids := make([]string, n)
	for i := range users {
		id, email := fmt.Sprintf("k%05d", i), fmt.Sprintf("k%05d@example.com", i)
		users[i], ids[i] = store.User{UserID: id, Email: &email}, id
	}
	if err := h.Store.InsertUsers(context.Background(), tenantID, users); err != nil {
		t.Fatal(err)
	}
	f.SendGrid.Always(providertest.Slow(150 * time.Millisecond)) // time to die mid-send

	w := startWorkerProcess(t, bin, h, f, "HERALD_WORKER_STOP_TIMEOUT=0")
	stopReceipts := simulateReceipts(t, h, f, tenantID)
	defer stopReceipts()

	h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/campaigns", key, map[string]any{"campaign_id": "crash", "template_id": "promo",
		"channels": []string{"in_app", "email"}, "audience": map[string]any{"user_ids": ids}})
	const kills = 3
	done := killWhileSending(t, h, key, "crash", w, n, kills, 120*time.Second)
	c := done.JSON["counts"].(map[string]any)
	inApp, email := c["in_app"].(map[string]any), c["email"].(map[string]any)
	if int(inApp["delivered"].(float64)) != n || int(email["sent"].(float64))+int(email["delivered"].(float64)) != n {
		t.Fatalf("after %d kills: %s", kills, done.Body)
	}
	var inboxRows, distinct int
	if err := testenv.Pool(t).QueryRow(context.Background(),
		`SELECT count(*), count(DISTINCT user_id) FROM inbox WHERE tenant_id = $1`, tenantID).Scan(&inboxRows, &distinct); err != nil {
		t.Fatal(err)
	}
	if inboxRows != n || distinct != n {
		t.Fatalf("inbox rows %d for %d users, want %d each once", inboxRows, distinct, n)
	}
	mails := map[string]int{}
	for _, req := range f.SendGrid.AcceptedRequests() {
		m, err := providertest.DecodeMail(req)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range m.Personalizations {
			mails[p.CustomArgs["notification_id"]]++
		}
	}
	twice := 0
	for _, c := range mails {
		if c > 1 {
			twice++
		}
	}
	t.Logf("%d kills: %d recipients, %d emailed, %d emailed twice, %d mail sends", kills, n, len(mails), twice, len(f.SendGrid.AcceptedRequests()))
	if len(mails) != n || twice != 0 {
		t.Fatalf("%d of %d recipients emailed, %d of them twice", len(mails), n, twice)
	}
}

// simulateReceipts records, every 100 ms, a receipt for each personalization of
// each mail send SendGrid accepted, as its event webhook would.
func simulateReceipts(t *testing.T, h *apitest.Harness, f apitest.Fakes, tenantID string) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		seen := 0
		for {
			reqs := f.SendGrid.AcceptedRequests()
			for _, req := range reqs[seen:] {
				m, err := providertest.DecodeMail(req)
				if err != nil {
					continue
				}
				for _, p := range m.Personalizations {
					_, _ = h.Providers.RecordReceipt(context.Background(), providers.Receipt{Provider: "sendgrid", TenantID: tenantID,
						NotificationID: p.CustomArgs["notification_id"], Channel: "email", ProviderMessageID: req.MessageID,
						Status: providers.ReceiptAccepted, ProviderStatus: "processed", OccurredAt: time.Now()})
				}
			}
			seen = len(reqs)
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return func() { close(done); <-finished }
}

// TestPersonalizedCampaignSurvivesWorkerKill SIGKILLs a real `herald worker`
// process twice while a 5,000-recipient personalized campaign (per-recipient
// data from a list upload) drains on email, SMS and push through the sandbox,
// restarting it each time. No recipient is lost on any channel, and each gets
// its own content. No email or SMS is sent twice (sum(calls) over the sandbox's
// messages is one per recipient): a re-run batch that finds them "sending"
// waits for the receipt window, and the sandbox's receipt (recorded with the
// message, as SendGrid's processed event and Twilio's status callback would
// be) then records them sent. Push has no receipts (FCM sends none): a push
// the worker died between the provider's accept and its "sent" record is
// sent again after the wait, the documented residual (crash_test.go's
// after-accept-no-receipt); the test checks that every repeated push is such
// a one (its record went through "sending" twice) and reports how many.
func TestPersonalizedCampaignSurvivesWorkerKill(t *testing.T) {
	bin, f, h := crashHarness(t, apitest.Options{CampaignPageSize: 250, CampaignWindow: 4,
		CampaignInDoubtWait: 2 * time.Second})
	tenantID, key := h.Tenant("personal-crash")
	h.Template(key, personalizedTemplate("personal"))
	const n = 5000
	list, _ := personalizedAudience(t, h, tenantID, key, "k", n)

	w := startWorkerProcess(t, bin, h, f, "HERALD_WORKER_STOP_TIMEOUT=0", "HERALD_SANDBOX_FALLBACK=true")
	h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/campaigns", key, map[string]any{"campaign_id": "crash", "template_id": "personal",
		"channels": []string{"email", "sms", "push"}, "data": map[string]any{"offer": "spring"}, "audience": map[string]any{"list_id": list}})
	const kills = 2
	done := killWhileSending(t, h, key, "crash", w, n, kills, 180*time.Second)
	c := done.JSON["counts"].(map[string]any)
	for _, ch := range []string{"email", "sms", "push"} {
		if sent := int(c[ch].(map[string]any)["sent"].(float64)); sent != n {
			t.Fatalf("after %d kills, %s sent %d of %d: %s", kills, ch, sent, n, done.Body)
		}
	}
	got := map[string]map[string]sandboxMessage{}
	calls := map[string]int{}
	for _, m := range sandboxMessages(t, tenantID) {
		if got[m.channel] == nil {
			got[m.channel] = map[string]sandboxMessage{}
		}
		got[m.channel][m.notificationID] = m
		calls[m.channel] += m.calls
	}
	var inDoubtPush, repeatedOutsideDoubt int
	if err := testenv.Pool(t).QueryRow(context.Background(), `
		SELECT (SELECT count(*) FROM deliveries WHERE tenant_id = $1 AND channel = 'push' AND attempts >= 2),
			(SELECT count(*) FROM sandbox_messages m JOIN deliveries d ON d.tenant_id = m.tenant_id AND d.notification_id = m.notification_id AND d.channel = m.channel
			 WHERE m.tenant_id = $1 AND m.calls > 1 AND d.attempts < 2)`, tenantID).Scan(&inDoubtPush, &repeatedOutsideDoubt); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d kills: %d recipients; messages email %d (%d calls), sms %d (%d calls), push %d (%d calls); %d pushes were in doubt (sent again after the wait)",
		kills, n, len(got["email"]), calls["email"], len(got["sms"]), calls["sms"], len(got["push"]), calls["push"], inDoubtPush)
	for _, ch := range []string{"email", "sms", "push"} {
		if len(got[ch]) != n {
			t.Fatalf("%s: %d of %d recipients got a message", ch, len(got[ch]), n)
		}
	}
	if calls["email"] != n || calls["sms"] != n {
		t.Fatalf("sent twice: %d email calls and %d SMS calls for %d recipients", calls["email"], calls["sms"], n)
	}
	if calls["push"]-n > inDoubtPush || repeatedOutsideDoubt != 0 {
		t.Fatalf("push: %d repeats, %d of them to recipients never in doubt (%d in doubt)", calls["push"]-n, repeatedOutsideDoubt, inDoubtPush)
	}
	for i := 0; i < n; i += 101 {
		wantOwnContent(t, tenantID, "crash", "k", i, got, false)
	}
}

// killWhileSending SIGKILLs the worker kills times, evenly through the
// campaign's n recipients, starting it again each time, and returns the
// campaign once it has completed (within the given time after the last kill).
func killWhileSending(t *testing.T, h *apitest.Harness, key, id string, w *workerProcess, n, kills int, within time.Duration) apitest.Response {
	t.Helper()
	processed := func() int {
		r := h.MustDo(http.StatusOK, http.MethodGet, "/v1/campaigns/"+id, key, nil)
		v, _ := r.JSON["recipients_processed"].(float64)
		return int(v)
	}
	for k := 1; k <= kills; k++ {
		target := k * n / (kills + 1)
		h.Eventually(60*time.Second, fmt.Sprintf("%d recipients processed", target), func() bool { return processed() >= target })
		t.Logf("kill %d at %d processed", k, processed())
		w.kill()
		w.start()
	}
	var done apitest.Response
	h.Eventually(within, "the campaign completed", func() bool {
		done = h.MustDo(http.StatusOK, http.MethodGet, "/v1/campaigns/"+id, key, nil)
		return done.Str("status") == herald.CampaignCompleted
	})
	return done
}
