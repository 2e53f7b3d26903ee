package api_test

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/herald"
)

// orderedItem is an inbox item as the order tests read it.
type orderedItem struct {
	id, title string
	seq       int64
}

// listAllInbox walks the user's inbox with pages of limit, newest first.
func listAllInbox(t *testing.T, h *apitest.Harness, token, userID string, limit int) []orderedItem {
	t.Helper()
	var out []orderedItem
	path := fmt.Sprintf("/v1/users/%s/inbox?limit=%d", userID, limit)
	for page := 0; ; page++ {
		if page > 1000 {
			t.Fatal("the inbox pages do not end")
		}
		r := h.MustDo(http.StatusOK, http.MethodGet, path, token, nil)
		items, _ := r.JSON["items"].([]any)
		for _, raw := range items {
			it := raw.(map[string]any)
			out = append(out, orderedItem{id: it["notification_id"].(string), title: it["title"].(string), seq: int64(it["sequence"].(float64))})
		}
		next, _ := r.JSON["next_cursor"].(string)
		if next == "" {
			return out
		}
		path = fmt.Sprintf("/v1/users/%s/inbox?limit=%d&cursor=%s", userID, limit, next)
	}
}

// sequenceOf is GET /v1/notifications/{id}'s sequence (0: null).
func sequenceOf(h *apitest.Harness, key, id string) int64 {
	h.T.Helper()
	r := h.MustDo(http.StatusOK, http.MethodGet, "/v1/notifications/"+id, key, nil)
	f, _ := r.JSON["sequence"].(float64)
	return int64(f)
}

// 100 in-app notifications to one user, each submitted after the previous 202;
// the inbox writes of the first ten fail until a later one is in the inbox (a
// trigger refuses them, the local activity retries with backoff), so later
// ones reach the inbox first. The inbox still lists all 100 in accept order, on every
// page size, numbered 100 … 1; GET shows each one's number; the stream
// announces each retried item once, late, with its sequence, and no other
// item as late.
func TestInboxOrderSurvivesRetriedInboxWrites(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	tenantID, key, token := inboxUser(t, h, "ada")
	refused := h.FailInboxWrites(tenantID, "flaky")
	st := h.OpenStream("", "/v1/users/ada/inbox/stream", token)
	st.NextOf("ready", streamWithin)

	const n, flaky = 100, 10
	ids := make([]string, n)
	for i := range n {
		title := fmt.Sprintf("plain %03d", i)
		if i < flaky {
			title = fmt.Sprintf("flaky %03d", i)
		}
		ids[i] = sendInApp(t, h, key, "ada", title)
	}
	for _, id := range ids {
		waitDelivered(h, key, id)
	}

	// The stream: one item.created per item, in the order they were written,
	// each late exactly when a higher sequence was written before it; every
	// retried item was (the items after it went first).
	late := map[string]bool{}
	var highest int64
	for range n {
		ev := st.NextOf(herald.InboxItemCreated, 30*time.Second)
		item, _ := ev.Data["item"].(map[string]any)
		f, _ := item["sequence"].(float64)
		seq := int64(f)
		l, ok := ev.Data["late"].(bool)
		if !ok || seq < 1 || seq > n {
			t.Fatalf("item.created without late, or with sequence %d: %s", seq, ev.Raw)
		}
		if l != (seq < highest) {
			t.Fatalf("item.created with sequence %d after %d: late=%v: %s", seq, highest, l, ev.Raw)
		}
		highest = max(highest, seq)
		late[ev.NotificationID()] = l
	}
	for i := range flaky {
		if !late[ids[i]] {
			t.Errorf("retried notification %d (%s) was not announced late", i, ids[i])
		}
	}
	if n := refused(); n < 1 {
		t.Fatalf("no inbox write was refused: the test injected no failure")
	} else {
		t.Logf("%d inbox writes refused and retried", n)
	}

	want := make([]string, n)
	for i, id := range ids {
		want[n-1-i] = id
	}
	for _, limit := range []int{100, 7} {
		got := listAllInbox(t, h, token, "ada", limit)
		gotIDs := make([]string, len(got))
		for i, it := range got {
			gotIDs[i] = it.id
			if it.seq != int64(n-i) {
				t.Fatalf("limit %d: item %d (%s) has sequence %d, want %d", limit, i, it.title, it.seq, n-i)
			}
		}
		if !slices.Equal(gotIDs, want) {
			t.Fatalf("limit %d: the inbox is not in accept order:\n got %v\nwant %v", limit, gotIDs, want)
		}
	}
	for _, i := range []int{0, flaky - 1, flaky, n - 1} {
		if got := sequenceOf(h, key, ids[i]); got != int64(i+1) {
			t.Errorf("GET notification %d: sequence %d, want %d", i, got, i+1)
		}
	}
}

// Many notifications to one user at once (and to a second user meanwhile):
// each user's notifications are numbered 1 … N, no gap and no repeat, and the
// inbox lists them by those numbers; one user's numbers do not move the
// other's.
func TestDueSequenceGapFreeUnderConcurrency(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	_, key, tokenA := inboxUser(t, h, "ada")
	createUser(h, key, "bob")
	tokenB := h.UserToken(key, "bob")

	const perAda, perBob = 60, 25
	ids := make([]string, perAda+perBob)
	var mu sync.Mutex
	concurrently(perAda+perBob, func(i int) {
		user := "ada"
		if i >= perAda {
			user = "bob"
		}
		r := h.Submit(key, map[string]any{"user_id": user, "template_id": "hi", "channels": []string{"in_app"},
			"data": map[string]any{"title": fmt.Sprintf("n%d", i), "body": "b"}, "idempotency_key": freshKey("seq")})
		if r.Status != http.StatusAccepted {
			t.Errorf("submit %d: %d %s", i, r.Status, r.Body)
			return
		}
		mu.Lock()
		ids[i] = r.Str("notification_id")
		mu.Unlock()
	})
	if t.Failed() {
		t.FailNow()
	}
	for _, id := range ids {
		waitDelivered(h, key, id)
	}
	for _, u := range []struct {
		user, token string
		ids         []string
	}{{"ada", tokenA, ids[:perAda]}, {"bob", tokenB, ids[perAda:]}} {
		seqs := map[int64]string{}
		for _, id := range u.ids {
			s := sequenceOf(h, key, id)
			if prev, dup := seqs[s]; dup {
				t.Fatalf("%s: %s and %s both have sequence %d", u.user, prev, id, s)
			}
			seqs[s] = id
		}
		for s := int64(1); s <= int64(len(u.ids)); s++ {
			if _, ok := seqs[s]; !ok {
				t.Fatalf("%s: sequences %v have a gap at %d", u.user, keysOf(seqs), s)
			}
		}
		got := listAllInbox(t, h, u.token, u.user, 10)
		for i, it := range got {
			if it.seq != int64(len(u.ids)-i) || seqs[it.seq] != it.id {
				t.Fatalf("%s: inbox item %d is %s with sequence %d, want sequence %d (%s)", u.user, i, it.id, it.seq, len(u.ids)-i, seqs[int64(len(u.ids)-i)])
			}
		}
	}
}

func keysOf(m map[int64]string) []int64 {
	out := make([]int64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// A scheduled notification is numbered when its send_at comes, not when it was
// accepted: after a notification accepted later but due at once, before one
// accepted after its send_at. It has no number while it waits.
func TestScheduledNotificationNumberedWhenDue(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	_, key, token := inboxUser(t, h, "ada")

	// send_at leaves room for a loaded machine: "first" is numbered before its
	// 202, so only its accept has to happen before send_at.
	sendAt := time.Now().Add(10 * time.Second).UTC()
	scheduled := h.Accept(key, map[string]any{"user_id": "ada", "template_id": "hi", "channels": []string{"in_app"},
		"data": map[string]any{"title": "scheduled", "body": "b"}, "idempotency_key": freshKey("sched"), "send_at": sendAt.Format(time.RFC3339Nano)})
	first := sendInApp(t, h, key, "ada", "first")
	s := sequenceOf(h, key, scheduled)
	if !time.Now().Before(sendAt) {
		t.Fatalf("accepting \"first\" took until after send_at (%s): the machine is too slow for this test's premise", sendAt)
	}
	if s != 0 {
		t.Fatalf("the scheduled notification has sequence %d before send_at", s)
	}
	waitDelivered(h, key, first)
	waitDelivered(h, key, scheduled)
	second := sendInApp(t, h, key, "ada", "second")
	waitDelivered(h, key, second)

	if a, b, c := sequenceOf(h, key, first), sequenceOf(h, key, scheduled), sequenceOf(h, key, second); a != 1 || b != 2 || c != 3 {
		t.Fatalf("sequences first=%d scheduled=%d second=%d, want 1 2 3", a, b, c)
	}
	got := listAllInbox(t, h, token, "ada", 20)
	if len(got) != 3 || got[0].title != "second" || got[1].title != "scheduled" || got[2].title != "first" {
		t.Fatalf("inbox = %+v, want second, scheduled, first", got)
	}
}

// A campaign's message and single notifications to one user share the user's
// due sequence: the inbox lists them in the order they became due (the
// campaign's when its batch wrote the recipient).
func TestCampaignAndSingleNotificationsShareTheDueOrder(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	_, key, token := inboxUser(t, h, "ada")
	before := sendInApp(t, h, key, "ada", "before")
	waitDelivered(h, key, before)

	h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/campaigns", key, map[string]any{"campaign_id": "mixed", "template_id": "hi",
		"channels": []string{"in_app"}, "data": map[string]any{"title": "campaign", "body": "b"},
		"audience": map[string]any{"user_ids": []string{"ada"}}})
	awaitCampaign(h, key, "mixed", herald.CampaignCompleted, 60*time.Second)
	after := sendInApp(t, h, key, "ada", "after")
	waitDelivered(h, key, after)

	got := listAllInbox(t, h, token, "ada", 20)
	if len(got) != 3 || got[0].title != "after" || got[1].title != "campaign" || got[2].title != "before" {
		t.Fatalf("inbox = %+v, want after, campaign, before", got)
	}
	if got[0].seq != 3 || got[1].seq != 2 || got[2].seq != 1 {
		t.Fatalf("sequences = %+v, want 3 2 1", got)
	}
	if s := sequenceOf(h, key, got[1].id); s != 2 {
		t.Fatalf("GET the campaign recipient's notification: sequence %d, want 2", s)
	}
}

// A flow's send step is a notification of its own, numbered in the user's due
// sequence when its run records it; the flow event itself is not numbered.
func TestFlowSendTakesItsPlaceInTheDueOrder(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	_, key, token := inboxUser(t, h, "ada")
	h.MustDo(http.StatusCreated, http.MethodPut, "/v1/flows/ping", key,
		`{"category":"c","steps":[{"type":"send","template_id":"hi","channels":["in_app"]}]}`)
	before := sendInApp(t, h, key, "ada", "before")
	waitDelivered(h, key, before)
	event := h.Accept(key, map[string]any{"user_id": "ada", "flow_id": "ping", "data": map[string]any{"title": "flow", "body": "b"},
		"idempotency_key": freshKey("flow")})
	h.Eventually(30*time.Second, "the flow's send in the inbox", func() bool { return len(listAllInbox(t, h, token, "ada", 20)) == 2 })
	after := sendInApp(t, h, key, "ada", "after")
	waitDelivered(h, key, after)

	got := listAllInbox(t, h, token, "ada", 20)
	if len(got) != 3 || got[0].title != "after" || got[1].title != "flow" || got[2].title != "before" ||
		got[0].seq != 3 || got[1].seq != 2 || got[2].seq != 1 {
		t.Fatalf("inbox = %+v, want after 3, flow 2, before 1", got)
	}
	if s := sequenceOf(h, key, event); s != 0 {
		t.Fatalf("the flow event itself has sequence %d, want none", s)
	}
}
