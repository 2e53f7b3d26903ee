package activities_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/providers/providertest"
)

// Ordered delivery end to end (docs/ordering.md): the SendGrid fake receives a
// lane's notifications in the order they were accepted, whatever fails.

// orderedSetup is setup with an "ordered" template (ordering "user") and email
// retries quick and many (a transient failure is retried for about 20 s).
func orderedSetup(t *testing.T) (*apitest.Harness, apitest.Fakes, string, string) {
	t.Helper()
	h, f, tenantID, key := setup(t)
	tpl := apitest.SimpleTemplate("ordered")
	tpl.Ordering = herald.OrderingPerUser
	h.Template(key, tpl)
	persistentRetries(t, h, tenantID)
	return h, f, tenantID, key
}

// persistentRetries: email retries every 100-200 ms, 100 attempts.
func persistentRetries(t *testing.T, h *apitest.Harness, tenantID string) {
	t.Helper()
	ctx := context.Background()
	ts, err := h.Store.GetTenantSettings(ctx, tenantID)
	if err != nil {
		t.Fatal(err)
	}
	p := herald.RetryPolicy{InitialInterval: herald.Duration{Duration: 100 * time.Millisecond},
		MaximumInterval: herald.Duration{Duration: 200 * time.Millisecond}, MaximumAttempts: 100}
	ts.RetryPolicies = map[herald.Channel]herald.RetryPolicy{"email": p, "sms": p}
	if err := h.Store.PutTenantSettings(ctx, tenantID, ts); err != nil {
		t.Fatal(err)
	}
}

// quickRetries is persistentRetries as PUT /v1/settings takes it.
var quickRetries = map[string]any{"email": map[string]any{"initial_interval": "100ms", "maximum_interval": "200ms", "maximum_attempts": 100}}

// mailSubject is a mail send's subject ("" when it is not one).
func mailSubject(r *providertest.Request) string {
	m, err := providertest.DecodeMail(*r)
	if err != nil {
		return ""
	}
	if len(m.Personalizations) > 0 && m.Personalizations[0].Subject != "" {
		return m.Personalizations[0].Subject
	}
	return m.Subject
}

// subjectIs picks the mail sends with this subject (the template's title).
func subjectIs(subject string) func(*providertest.Request) bool {
	return func(r *providertest.Request) bool { return mailSubject(r) == subject }
}

// acceptedSubjects are the subjects of the mails the fake accepted, in order.
func acceptedSubjects(f apitest.Fakes) []string {
	var out []string
	for _, r := range f.SendGrid.AcceptedRequests() {
		out = append(out, mailSubject(&r))
	}
	return out
}

// sendOrdered accepts an email to user with title as subject; key "" leaves
// ordering_key out (the template decides).
func sendOrdered(h *apitest.Harness, apiKey, template, user, title, orderingKey string) string {
	h.T.Helper()
	body := map[string]any{"user_id": user, "template_id": template, "channels": []string{"email"},
		"data": map[string]any{"title": title}}
	if orderingKey != "" {
		body["ordering_key"] = orderingKey
	}
	return h.Accept(apiKey, body)
}

// ordering is the email channel's ordering object of GET /v1/notifications/{id}.
func ordering(h *apitest.Harness, key, id string) map[string]any {
	h.T.Helper()
	_, chans := h.Channels(key, id)
	o, _ := chans["email"]["ordering"].(map[string]any)
	return o
}

func TestOrderedBurstReachesTheProviderInAcceptOrder(t *testing.T) {
	h, f, _, key := orderedSetup(t)
	// The first sends fail transiently (503) and are retried; the later
	// notifications must wait for them.
	f.SendGrid.Next(providertest.Fail503(""), providertest.Fail503(""), providertest.Fail503(""), providertest.Fail503(""), providertest.Fail503(""))
	const n = 100
	var want, ids []string
	for i := range n {
		title := fmt.Sprintf("burst #%03d", i)
		want = append(want, title)
		ids = append(ids, sendOrdered(h, key, "ordered", "ada", title, "")) // the template's ordering: "user"
	}
	h.Eventually(120*time.Second, "100 accepted mails", func() bool { return f.SendGrid.Accepted() >= n })
	if got := acceptedSubjects(f); !slices.Equal(got, want) {
		t.Fatalf("the provider accepted the burst out of order:\n got %v\nwant %v", got, want)
	}
	if f.SendGrid.Calls() < n+5 {
		t.Fatalf("%d provider calls: the transient failures were not retried", f.SendGrid.Calls())
	}
	// Each has its place, in accept order (a seq may be skipped when the API's
	// claim and the workflow's race); the second waited behind the first.
	last := 0.0
	for i, id := range ids {
		h.AwaitChannel(key, id, "email", "sent", "", 10*time.Second)
		o := ordering(h, key, id)
		if o == nil || o["seq"].(float64) <= last || o["ordering_key"] != "user" || o["done_at"] == nil {
			t.Fatalf("notification %d: ordering %v (the one before: seq %v)", i, o, last)
		}
		last = o["seq"].(float64)
	}
	if o := ordering(h, key, ids[1]); o["waited"] != true || o["behind_notification_id"] != ids[0] || o["order_timeout"] != false {
		t.Fatalf("the second notification did not wait behind the first: %v", o)
	}
}

func TestUnorderedNotificationsAreNeverHeld(t *testing.T) {
	h, f, tenantID, key := orderedSetup(t)
	hold := f.SendGrid.HoldNext(false) // the first send hangs at the provider
	first := sendOrdered(h, key, "order_shipped", "ada", "unordered #0", "")
	<-hold.Arrived()
	for i := 1; i <= 10; i++ {
		sendOrdered(h, key, "order_shipped", "ada", fmt.Sprintf("unordered #%d", i), "")
	}
	// Without an ordering key nothing waits for the hung one.
	h.Eventually(30*time.Second, "10 mails past the hung one", func() bool { return f.SendGrid.Accepted() >= 10 })
	hold.Release()
	h.AwaitChannel(key, first, "email", "sent", "", 20*time.Second)
	if o := ordering(h, key, first); o != nil {
		t.Fatalf("an unordered notification has an ordering: %v", o)
	}
	places, err := h.Store.ListOrderHandoffs(context.Background(), tenantID, first)
	if err != nil || len(places) != 0 {
		t.Fatalf("an unordered notification took a place: %v %v", places, err)
	}
}

func TestOrderedLanesOfUsersAreIndependent(t *testing.T) {
	h, f, tenantID, key := orderedSetup(t)
	// The stuck send must stay pending (retrying) while the others go: a retry
	// budget of minutes, not persistentRetries' 20 s (a dead letter releases the lane).
	ctx := context.Background()
	ts, err := h.Store.GetTenantSettings(ctx, tenantID)
	if err != nil {
		t.Fatal(err)
	}
	ts.RetryPolicies = map[herald.Channel]herald.RetryPolicy{"email": {InitialInterval: herald.Duration{Duration: 100 * time.Millisecond},
		MaximumInterval: herald.Duration{Duration: 2 * time.Second}, MaximumAttempts: 300}}
	if err := h.Store.PutTenantSettings(ctx, tenantID, ts); err != nil {
		t.Fatal(err)
	}
	const users, each = 50, 20
	for u := range users {
		h.PutUser(key, fmt.Sprintf("u%02d", u), map[string]any{"email": fmt.Sprintf("u%02d@example.com", u)})
	}
	// u00's provider is stuck on its first notification: the rest of u00's
	// lane waits, nobody else's does.
	f.SendGrid.When(subjectIs("u00 #00"), providertest.Fail503(""))
	var wg sync.WaitGroup
	errs := make(chan error, users)
	for g := range 10 {
		wg.Add(1)
		go func() { // users g, g+10, …: each user's notifications one after another
			defer wg.Done()
			for i := range each {
				for u := g; u < users; u += 10 {
					r := h.Submit(key, map[string]any{"user_id": fmt.Sprintf("u%02d", u), "template_id": "ordered",
						"channels": []string{"email"}, "data": map[string]any{"title": fmt.Sprintf("u%02d #%02d", u, i)}})
					if r.Status != http.StatusAccepted {
						errs <- fmt.Errorf("u%02d #%d: %d %s", u, i, r.Status, r.Body)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	h.Eventually(180*time.Second, "every other user's mails", func() bool { return f.SendGrid.Accepted() >= (users-1)*each })
	time.Sleep(time.Second)
	perUser := func() map[string][]string {
		out := map[string][]string{}
		for _, s := range acceptedSubjects(f) {
			out[s[:3]] = append(out[s[:3]], s)
		}
		return out
	}
	if got := perUser()["u00"]; len(got) != 0 {
		t.Fatalf("u00's later notifications overtook its stuck first one: %v", got)
	}
	f.SendGrid.ClearWhen()
	h.Eventually(120*time.Second, "u00's mails", func() bool { return f.SendGrid.Accepted() >= users*each })
	for u, got := range perUser() {
		var want []string
		for i := range each {
			want = append(want, fmt.Sprintf("%s #%02d", u, i))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s out of order: %v", u, got)
		}
	}
}

func TestOrderTimeoutAfterMaxHold(t *testing.T) {
	h, f, _, key := orderedSetup(t)
	apitest.WantError(t, h.Do(http.MethodPut, "/v1/settings", key, map[string]any{"ordering_max_hold": "500ms"}), 400, "invalid_field", "ordering_max_hold")
	apitest.WantError(t, h.Do(http.MethodPut, "/v1/settings", key, map[string]any{"ordering_max_hold": "2h"}), 400, "invalid_field", "ordering_max_hold")
	apitest.WantError(t, h.Submit(key, map[string]any{"user_id": "ada", "template_id": "ordered", "ordering_key": "no spaces"}), 400, "invalid_field", "ordering_key")
	if r := h.MustDo(http.StatusOK, http.MethodGet, "/v1/settings", key, nil); r.Str("ordering_max_hold") != "5m0s" {
		t.Fatalf("default ordering_max_hold: %s", r.Body)
	}
	h.MustDo(http.StatusOK, http.MethodPut, "/v1/settings", key, map[string]any{"ordering_max_hold": "2s", "retry_policies": quickRetries})

	f.SendGrid.When(subjectIs("earlier"), providertest.Fail503("")) // keeps failing
	earlier := sendOrdered(h, key, "order_shipped", "ada", "earlier", "orders")
	h.Eventually(10*time.Second, "the earlier one's first attempt", func() bool { return f.SendGrid.Calls() > 0 })
	start := time.Now()
	later := sendOrdered(h, key, "order_shipped", "ada", "later", "orders")
	st := h.AwaitChannel(key, later, "email", "sent", herald.ReasonOrderTimeout, 20*time.Second)
	took := time.Since(start)
	if took < 1900*time.Millisecond || took > 8*time.Second {
		t.Fatalf("the later one went after %s, want about 2 s (max_hold)", took)
	}
	o, _ := st["ordering"].(map[string]any)
	if o["order_timeout"] != true || o["waited"] != true || o["behind_notification_id"] != earlier || o["waited_ms"].(float64) < 1900 {
		t.Fatalf("ordering after the timeout: %v", o)
	}
	if _, chans := h.Channels(key, earlier); chans["email"]["status"] != "sending" {
		t.Fatalf("the earlier one: %v", chans["email"])
	}
	f.SendGrid.ClearWhen()
	h.AwaitChannel(key, earlier, "email", "sent", "", 20*time.Second)
	if got := acceptedSubjects(f); !slices.Equal(got, []string{"later", "earlier"}) {
		t.Fatalf("accepted %v", got)
	}
}

func TestCancelledEarlierOneReleasesTheNextAtOnce(t *testing.T) {
	h, f, _, key := orderedSetup(t)
	alert := apitest.SimpleTemplate("alert")
	alert.Critical = true // bypasses quiet hours
	h.Template(key, alert)
	// Bob is in his quiet hours all day: a non-critical email waits (scheduled).
	h.PutUser(key, "bob", map[string]any{"email": "bob@example.com", "timezone": "UTC"})
	now := time.Now().UTC()
	h.MustDo(http.StatusOK, http.MethodPut, "/v1/users/bob/preferences", key, map[string]any{
		"quiet_hours": map[string]any{"start": now.Add(-time.Hour).Format("15:04"), "end": now.Add(2 * time.Hour).Format("15:04"), "timezone": "UTC"}})
	h.MustDo(http.StatusOK, http.MethodPut, "/v1/settings", key, map[string]any{"ordering_max_hold": "1h", "retry_policies": quickRetries})

	earlier := sendOrdered(h, key, "order_shipped", "bob", "earlier", "acct")
	h.AwaitChannel(key, earlier, "email", "scheduled", herald.ReasonQuietHours, 10*time.Second)
	later := sendOrdered(h, key, "alert", "bob", "later", "acct")
	h.Eventually(10*time.Second, "the later one waiting", func() bool {
		o := ordering(h, key, later)
		return o != nil && o["waiting"] == true && o["behind_notification_id"] == earlier
	})
	time.Sleep(500 * time.Millisecond)
	if f.SendGrid.Calls() != 0 {
		t.Fatal("the later one went while the earlier one was deferred")
	}
	start := time.Now()
	h.MustDo(http.StatusOK, http.MethodDelete, "/v1/notifications/"+earlier, key, nil)
	h.AwaitChannel(key, later, "email", "sent", "", 10*time.Second)
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("the later one went %s after the cancel, want at once", took)
	}
	o := ordering(h, key, later)
	if o["order_timeout"] != false || o["waited"] != true {
		t.Fatalf("ordering: %v", o)
	}
	if _, chans := h.Channels(key, earlier); chans["email"]["status"] != "cancelled" {
		t.Fatalf("the earlier one: %v", chans["email"])
	}
}

func TestScheduledNotificationHoldsNothingDueNow(t *testing.T) {
	h, f, _, key := orderedSetup(t)
	scheduled := h.Accept(key, map[string]any{"user_id": "ada", "template_id": "ordered", "channels": []string{"email"},
		"data": map[string]any{"title": "tomorrow"}, "send_at": time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)})
	now := sendOrdered(h, key, "ordered", "ada", "now", "")
	h.AwaitChannel(key, now, "email", "sent", "", 10*time.Second)
	if o := ordering(h, key, now); o == nil || o["waited"] != false {
		t.Fatalf("the notification due now waited: %v", o)
	}
	if o := ordering(h, key, scheduled); o != nil {
		t.Fatalf("a notification scheduled for tomorrow took its place already: %v", o)
	}
	if f.SendGrid.Accepted() != 1 {
		t.Fatalf("accepted %d", f.SendGrid.Accepted())
	}
}

// TestCampaignSendsAreNotInLanes: a campaign's send to a user whose ordered
// lane is blocked goes at once; campaigns never join lanes (docs/ordering.md).
func TestCampaignSendsAreNotInLanes(t *testing.T) {
	h, f, _, key := orderedSetup(t)
	f.SendGrid.When(subjectIs("blocked"), providertest.Fail503(""))
	blocked := sendOrdered(h, key, "ordered", "ada", "blocked", "")
	behind := sendOrdered(h, key, "ordered", "ada", "behind", "")
	h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/campaigns", key, map[string]any{"campaign_id": "promo", "template_id": "order_shipped",
		"channels": []string{"email"}, "data": map[string]any{"title": "campaign"}, "audience": map[string]any{"user_ids": []string{"ada"}}})
	h.Eventually(30*time.Second, "the campaign's mail", func() bool { return slices.Contains(acceptedSubjects(f), "campaign") })
	// Held while the one before it fails: its workflow may reach the lane after
	// the campaign's mail went out (a campaign is not in the lane), not before.
	h.Eventually(20*time.Second, "the ordered one behind the blocked one waits", func() bool {
		o := ordering(h, key, behind)
		return o != nil && o["waiting"] == true
	})
	if got := acceptedSubjects(f); slices.Contains(got, "behind") || slices.Contains(got, "blocked") {
		t.Fatalf("accepted %v while the first ordered one fails", got)
	}
	f.SendGrid.ClearWhen()
	h.AwaitChannel(key, behind, "email", "sent", "", 20*time.Second)
	h.AwaitChannel(key, blocked, "email", "sent", "", 20*time.Second)
	if got := acceptedSubjects(f); !slices.Equal(got, []string{"campaign", "blocked", "behind"}) {
		t.Fatalf("accepted %v", got)
	}
}
