package api_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-notify/herald/api"
	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/app"
	"github.com/herald-notify/herald/internal/config"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/inboxlive"
	"github.com/herald-notify/herald/internal/metrics"
	"github.com/herald-notify/herald/internal/retention"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/testenv"
)

// The live inbox end to end: the real API, worker, Temporal and PostgreSQL.

// streamWithin bounds how long a stream event may take to arrive after the
// change that causes it (generous: the machine is shared; the bench measures
// the real latency).
const streamWithin = 15 * time.Second

func inboxUser(t *testing.T, h *apitest.Harness, userID string) (tenantID, key, token string) {
	t.Helper()
	tenantID, key = h.TenantWith("inbox", e2eTemplates...)
	createUser(h, key, userID)
	return tenantID, key, h.UserToken(key, userID)
}

func sendInApp(t *testing.T, h *apitest.Harness, key, userID, title string) string {
	t.Helper()
	return accept(t, h, key, userID, "hi", map[string]any{"title": title, "body": "b"}, "in_app")
}

func inboxCounts(t *testing.T, h *apitest.Harness, tenantID, userID string) (api, recount store.InboxCounts) {
	t.Helper()
	api, _, err := h.Store.GetInboxCounts(context.Background(), tenantID, userID)
	if err != nil {
		t.Fatal(err)
	}
	recount, err = h.Store.RecountInbox(context.Background(), tenantID, userID)
	if err != nil {
		t.Fatal(err)
	}
	return api, recount
}

func TestInboxStreamSeesNewNotificationAndStateChanges(t *testing.T) {
	h := apitest.Start(t, apitest.Options{InboxHeartbeat: 300 * time.Millisecond})
	_, key, token := inboxUser(t, h, "ada")

	st := h.OpenStream("", "/v1/users/ada/inbox/stream", token)
	if st.Status != http.StatusOK {
		t.Fatalf("stream: %d %s", st.Status, st.Body)
	}
	ready := st.Next(streamWithin)
	if ready.Type != "ready" || ready.ID != 0 {
		t.Fatalf("first event = %s %d %s, want ready 0", ready.Type, ready.ID, ready.Raw)
	}
	select {
	case <-st.Heartbeats:
	case <-time.After(streamWithin):
		t.Fatal("no heartbeat")
	}

	id := sendInApp(t, h, key, "ada", "Order shipped")
	ev := st.Next(streamWithin)
	if ev.Type != herald.InboxItemCreated || ev.ID != 1 || ev.NotificationID() != id {
		t.Fatalf("event = %s %d %s, want item.created 1 for %s", ev.Type, ev.ID, ev.Raw, id)
	}
	if item, _ := ev.Data["item"].(map[string]any); item["title"] != "Order shipped" || item["category"] != "general" {
		t.Fatalf("event item: %s", ev.Raw)
	}
	if total, unread, unseen := ev.Counts(); total != 1 || unread != 1 || unseen != 1 {
		t.Fatalf("counts after delivery = %d/%d/%d, want 1/1/1", total, unread, unseen)
	}

	// The user marks it read with the token: the stream sees it with the new counts.
	r := h.MustDo(http.StatusOK, http.MethodPost, "/v1/users/ada/inbox/"+id+"/read", token, nil)
	if r.JSON["read_at"] == nil {
		t.Fatalf("read: %s", r.Body)
	}
	ev = st.Next(streamWithin)
	if total, unread, unseen := ev.Counts(); ev.Type != herald.InboxItemUpdated || ev.ID != 2 || total != 1 || unread != 0 || unseen != 0 {
		t.Fatalf("after read: %s %d %s", ev.Type, ev.ID, ev.Raw)
	}
	// Reading it again changes nothing and sends nothing.
	h.MustDo(http.StatusOK, http.MethodPost, "/v1/users/ada/inbox/"+id+"/read", token, nil)
	for _, action := range []string{"unread", "archive", "unarchive", "seen"} {
		h.MustDo(http.StatusOK, http.MethodPost, "/v1/users/ada/inbox/"+id+"/"+action, token, nil)
	}
	var got []string
	for range 3 { // seen changes nothing: the item stayed seen through unread
		ev := st.Next(streamWithin)
		total, unread, _ := ev.Counts()
		got = append(got, fmt.Sprintf("%d:%d/%d", ev.ID, total, unread))
	}
	if want := []string{"3:1/1", "4:0/0", "5:1/1"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events after unread, archive, unarchive = %v, want %v", got, want)
	}
	st.Quiet(500 * time.Millisecond)
}

func TestInboxStreamOnReplicaASeesWritesThroughReplicaB(t *testing.T) {
	// A heartbeat far beyond streamWithin: only the NOTIFY fan-out can deliver in time.
	h := apitest.Start(t, apitest.Options{InboxHeartbeat: 5 * time.Minute})
	_, key, token := inboxUser(t, h, "ada")
	replicaB := h.Replica()

	st := h.OpenStream("", "/v1/users/ada/inbox/stream", token) // replica A
	st.NextOf("ready", streamWithin)

	// Accepted through B, delivered by the worker: A's listener hears the NOTIFY.
	req := map[string]any{"user_id": "ada", "template_id": "hi", "channels": []string{"in_app"},
		"data": map[string]any{"title": "via B"}, "idempotency_key": freshKey("replica")}
	r := h.DoAt(replicaB, http.MethodPost, "/v1/notifications", key, req)
	if r.Status != http.StatusAccepted {
		t.Fatalf("submit through B: %d %s", r.Status, r.Body)
	}
	id := r.Str("notification_id")
	ev := st.NextOf(herald.InboxItemCreated, streamWithin)
	if ev.NotificationID() != id {
		t.Fatalf("replica A got %s, want %s", ev.Raw, id)
	}
	// Marked read through B's API: A's stream sees that too.
	if r := h.DoAt(replicaB, http.MethodPost, "/v1/users/ada/inbox/"+id+"/read", token, nil); r.Status != http.StatusOK {
		t.Fatalf("read through B: %d %s", r.Status, r.Body)
	}
	ev = st.NextOf(herald.InboxItemUpdated, streamWithin)
	if _, unread, _ := ev.Counts(); unread != 0 || ev.NotificationID() != id {
		t.Fatalf("replica A after read through B: %s", ev.Raw)
	}
	// And a stream on B sees a write through A.
	stB := h.OpenStream(replicaB, "/v1/users/ada/inbox/stream", token)
	stB.NextOf("ready", streamWithin)
	h.MustDo(http.StatusOK, http.MethodPost, "/v1/users/ada/inbox/"+id+"/unread", token, nil)
	if ev := stB.NextOf(herald.InboxItemUpdated, streamWithin); ev.NotificationID() != id {
		t.Fatalf("replica B: %s", ev.Raw)
	}
}

func TestInboxReconnectReplaysExactlyTheMissedEvents(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	tenantID, key, token := inboxUser(t, h, "ada")

	// Two events before the client goes away.
	for i := range 2 {
		sendInApp(t, h, key, "ada", fmt.Sprint("before ", i))
	}
	h.Eventually(streamWithin, "2 items", func() bool { c, _ := inboxCounts(t, h, tenantID, "ada"); return c.Total == 2 })
	st := h.OpenStream("", "/v1/users/ada/inbox/stream", token)
	last := st.NextOf("ready", streamWithin).ID
	st.Close()
	if last != 2 {
		t.Fatalf("ready id = %d, want 2", last)
	}

	// 20 events happen while it is away.
	var missed []string
	for i := range 20 {
		missed = append(missed, sendInApp(t, h, key, "ada", fmt.Sprint("missed ", i)))
	}
	h.Eventually(30*time.Second, "22 items", func() bool { c, _ := inboxCounts(t, h, tenantID, "ada"); return c.Total == 22 })

	st = h.OpenStream("", "/v1/users/ada/inbox/stream", token, "Last-Event-ID", strconv.FormatInt(last, 10))
	seen := map[string]bool{}
	for i := range 20 {
		ev := st.Next(streamWithin)
		if ev.Type != herald.InboxItemCreated || ev.ID != last+1+int64(i) {
			t.Fatalf("replayed event %d = %s %d, want item.created %d", i, ev.Type, ev.ID, last+1+int64(i))
		}
		if total, _, _ := ev.Counts(); total != 3+int64(i) {
			t.Fatalf("replayed event %d counts total %d, want %d", i, total, 3+i)
		}
		seen[ev.NotificationID()] = true
	}
	for _, id := range missed {
		if !seen[id] {
			t.Fatalf("notification %s was not replayed", id)
		}
	}
	st.Quiet(time.Second) // nothing twice, nothing more
	// The query form works as well (and is what a fresh EventSource uses).
	st2 := h.OpenStream("", "/v1/users/ada/inbox/stream?last_event_id=21", token)
	if ev := st2.Next(streamWithin); ev.ID != 22 {
		t.Fatalf("from 21: got %d", ev.ID)
	}
	// An id from the future (another database, a forged one) is a refetch.
	st3 := h.OpenStream("", "/v1/users/ada/inbox/stream", token, "Last-Event-ID", "999")
	if ev := st3.Next(streamWithin); ev.Type != herald.InboxRefetch || ev.ID != 22 {
		t.Fatalf("from 999: %s %d", ev.Type, ev.ID)
	}
	bad := h.OpenStream("", "/v1/users/ada/inbox/stream", token, "Last-Event-ID", "abc")
	if bad.Status != http.StatusBadRequest {
		t.Fatalf("Last-Event-ID abc: %d", bad.Status)
	}
}

func TestInboxBatchInsertNotifiesOnceAndOldIDsRefetch(t *testing.T) {
	// Every item stays: the inbox cap is above the batch (this tests the event
	// log's own bound).
	keep := retention.Defaults
	keep.InboxItems = 2 * store.InboxEventRetention
	h := apitest.Start(t, apitest.Options{NoWorker: true, Retention: keep})
	tenantID, key, token := inboxUser(t, h, "ada")
	createUser(h, key, "bob")
	stBob := h.OpenStream("", "/v1/users/bob/inbox/stream", h.UserToken(key, "bob"))
	stBob.NextOf("ready", streamWithin)

	// One batch: 1001 items for ada and one for bob, in one transaction.
	n := store.InboxEventRetention + 1
	var items []store.NewInboxItem
	base := time.Now().Add(-time.Hour)
	for i := range n {
		items = append(items, store.NewInboxItem{TenantID: tenantID, UserID: "ada", NotificationID: fmt.Sprintf("n_%064x", i),
			Title: "t", Body: "b", Category: "campaign", CreatedAt: base.Add(time.Duration(i) * time.Millisecond)})
	}
	items = append(items, store.NewInboxItem{TenantID: tenantID, UserID: "bob", NotificationID: fmt.Sprintf("n_%064x", 999999), Title: "t", Body: "b", CreatedAt: base})
	items = append(items, items[0]) // a duplicate in the batch is inserted once
	inserted, err := h.Store.InsertInboxItems(context.Background(), items)
	if err != nil {
		t.Fatal(err)
	}
	if inserted[0] != true || inserted[len(inserted)-1] != false {
		t.Fatalf("inserted[0] = %v, inserted[last] = %v", inserted[0], inserted[len(inserted)-1])
	}
	if ev := stBob.Next(streamWithin); ev.Type != herald.InboxItemCreated || ev.NotificationID() != fmt.Sprintf("n_%064x", 999999) {
		t.Fatalf("bob: %s", ev.Raw)
	}
	// Again: nothing new, no event.
	if ins, err := h.Store.InsertInboxItems(context.Background(), items[:1]); err != nil || ins[0] {
		t.Fatalf("re-insert: %v %v", ins, err)
	}
	stBob.Quiet(300 * time.Millisecond)

	c, recount := inboxCounts(t, h, tenantID, "ada")
	if c != recount || c.Total != int64(n) {
		t.Fatalf("counts %+v, recount %+v, want total %d", c, recount, n)
	}
	// Event 1 was pruned (the log keeps the last 1000): from 0 the stream says refetch.
	st := h.OpenStream("", "/v1/users/ada/inbox/stream", token, "Last-Event-ID", "0")
	ev := st.Next(streamWithin)
	if ev.Type != herald.InboxRefetch || ev.ID != int64(n) {
		t.Fatalf("from 0: %s %d, want refetch %d", ev.Type, ev.ID, n)
	}
	// From 1 everything is still there: 2 … 1001.
	st = h.OpenStream("", "/v1/users/ada/inbox/stream", token, "Last-Event-ID", "1")
	for want := int64(2); want <= int64(n); want++ {
		if ev := st.Next(streamWithin); ev.ID != want {
			t.Fatalf("from 1: got %d, want %d", ev.ID, want)
		}
	}
	// The category filter.
	page := h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/ada/inbox?category=campaign&limit=5", token, nil)
	if len(page.JSON["items"].([]any)) != 5 {
		t.Fatalf("category page: %s", page.Body)
	}
	page = h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/ada/inbox?category=other", token, nil)
	if len(page.JSON["items"].([]any)) != 0 {
		t.Fatalf("other category: %s", page.Body)
	}
}

func TestInboxCountsExactUnderConcurrentDeliveriesAndMarks(t *testing.T) {
	// Concurrent marks far over a person's rate: the per-user action limit is off.
	h := apitest.Start(t, apitest.Options{InboxActions: api.Rate{PerSecond: -1}})
	h.StartWorkers(1)
	tenantID, key, token := inboxUser(t, h, "ada")
	st := h.OpenStream("", "/v1/users/ada/inbox/stream", token)
	st.NextOf("ready", streamWithin)

	const deliveries = 50
	var mu sync.Mutex
	var ids []string
	var wg sync.WaitGroup
	// 50 deliveries at once…
	wg.Add(1)
	go func() {
		defer wg.Done()
		concurrently(deliveries, func(i int) {
			id := sendInApp(t, h, key, "ada", fmt.Sprint("n", i))
			mu.Lock()
			ids = append(ids, id)
			mu.Unlock()
		})
	}()
	// …while 50 marks (on whatever has arrived) and mark-alls run at once.
	actions := []string{"read", "unread", "seen", "archive", "unarchive"}
	marks := 0
	deadline := time.Now().Add(60 * time.Second)
	for marks < deliveries && time.Now().Before(deadline) {
		page := h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/ada/inbox?limit=100", token, nil)
		items := page.JSON["items"].([]any)
		if len(items) == 0 {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		batch := min(10, deliveries-marks)
		concurrently(batch, func(i int) {
			it := items[rand.IntN(len(items))].(map[string]any)
			path := "/v1/users/ada/inbox/" + it["notification_id"].(string) + "/" + actions[rand.IntN(len(actions))]
			if i == 0 {
				path = "/v1/users/ada/inbox/" + []string{"read-all", "seen-all"}[rand.IntN(2)]
			}
			h.MustDo(http.StatusOK, http.MethodPost, path, token, nil)
		})
		marks += batch
	}
	wg.Wait()
	h.Eventually(60*time.Second, "50 delivered", func() bool {
		n, err := h.Store.CountInboxForTemplate(context.Background(), tenantID, "hi")
		return err == nil && n == deliveries
	})
	c, recount := inboxCounts(t, h, tenantID, "ada")
	if c != recount {
		t.Fatalf("counters %+v != recount %+v", c, recount)
	}
	listed := h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/ada/inbox", token, nil).JSON["counts"].(map[string]any)
	if int64(listed["total"].(float64)) != recount.Total || int64(listed["unread"].(float64)) != recount.Unread ||
		int64(listed["unseen"].(float64)) != recount.Unseen {
		t.Fatalf("list counts %v != recount %+v", listed, recount)
	}
	// The stream got every event once, in order, and its last counts are the recount.
	_, seq, _ := h.Store.GetInboxCounts(context.Background(), tenantID, "ada")
	var last apitest.Event
	for want := int64(1); want <= seq; want++ {
		last = st.Next(streamWithin)
		if last.ID != want {
			t.Fatalf("stream event id %d, want %d", last.ID, want)
		}
	}
	st.Quiet(300 * time.Millisecond)
	if total, unread, unseen := last.Counts(); total != recount.Total || unread != recount.Unread || unseen != recount.Unseen {
		t.Fatalf("last stream counts %d/%d/%d != recount %+v", total, unread, unseen, recount)
	}
	if seq < deliveries {
		t.Fatalf("only %d events for %d deliveries", seq, deliveries)
	}
}

func TestInboxMarkAllAndFilters(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	tenantID, key, token := inboxUser(t, h, "ada")
	var ids []string
	for i := range 4 {
		ids = append(ids, sendInApp(t, h, key, "ada", fmt.Sprint("n", i)))
	}
	h.Eventually(streamWithin, "4 items", func() bool { c, _ := inboxCounts(t, h, tenantID, "ada"); return c.Total == 4 })
	list := func(q string) int {
		return len(h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/ada/inbox"+q, token, nil).JSON["items"].([]any))
	}
	h.MustDo(http.StatusOK, http.MethodPost, "/v1/users/ada/inbox/"+ids[0]+"/archive", token, nil)
	h.MustDo(http.StatusOK, http.MethodPost, "/v1/users/ada/inbox/"+ids[1]+"/seen", token, nil)
	h.MustDo(http.StatusOK, http.MethodPost, "/v1/users/ada/inbox/"+ids[2]+"/read", token, nil)
	for q, want := range map[string]int{"": 3, "?archived=true": 1, "?read=true": 1, "?read=false": 2, "?unread=true": 2,
		"?seen=true": 2, "?seen=false": 1, "?category=general": 3} {
		if got := list(q); got != want {
			t.Errorf("list%s = %d items, want %d", q, got, want)
		}
	}
	r := h.MustDo(http.StatusOK, http.MethodPost, "/v1/users/ada/inbox/seen-all", token, nil)
	if r.JSON["changed"].(float64) != 1 {
		t.Fatalf("seen-all: %s", r.Body)
	}
	r = h.MustDo(http.StatusOK, http.MethodPost, "/v1/users/ada/inbox/read-all", token, nil)
	if c := r.JSON["counts"].(map[string]any); r.JSON["changed"].(float64) != 2 || c["unread"].(float64) != 0 || c["total"].(float64) != 3 {
		t.Fatalf("read-all: %s", r.Body)
	}
	c, recount := inboxCounts(t, h, tenantID, "ada")
	if c != recount || c.Unread != 0 || c.Unseen != 0 || c.Total != 3 {
		t.Fatalf("counts %+v recount %+v", c, recount)
	}
	apitest.WantError(t, h.Do(http.MethodGet, "/v1/users/ada/inbox?read=true&unread=true", token, nil), 400, "invalid_field", "unread")
	apitest.WantError(t, h.Do(http.MethodGet, "/v1/users/ada/inbox?archived=maybe", token, nil), 400, "invalid_field", "archived")
	apitest.WantError(t, h.Do(http.MethodPost, "/v1/users/ada/inbox/"+ids[0]+"/explode", token, nil), 404, "not_found", "")
	apitest.WantError(t, h.Do(http.MethodPost, "/v1/users/ada/inbox/n_nope/read", token, nil), 400, "invalid_field", "notification_id")
}

func TestInboxStreamLimits(t *testing.T) {
	h := apitest.Start(t, apitest.Options{InboxStreams: inboxlive.Limits{PerUser: 2, PerTenant: 3}})
	_, key, token := inboxUser(t, h, "ada")
	createUser(h, key, "bob")
	createUser(h, key, "cy")
	for range 2 {
		h.OpenStream("", "/v1/users/ada/inbox/stream", token).NextOf("ready", streamWithin)
	}
	st := h.OpenStream("", "/v1/users/ada/inbox/stream", token)
	if st.Status != http.StatusTooManyRequests {
		t.Fatalf("third stream of a user: %d %s", st.Status, st.Body)
	}
	h.OpenStream("", "/v1/users/bob/inbox/stream", key).NextOf("ready", streamWithin)
	if st := h.OpenStream("", "/v1/users/cy/inbox/stream", key); st.Status != http.StatusTooManyRequests {
		t.Fatalf("fourth stream of the tenant: %d %s", st.Status, st.Body)
	}
	if n := h.InboxStreamsOpen(); n != 3 {
		t.Fatalf("open streams = %d, want 3", n)
	}
	if v := h.Scrape().Value(metrics.InboxStreamsOpen); v != 3 {
		t.Fatalf("%s = %v, want 3", metrics.InboxStreamsOpen, v)
	}
}

func TestInboxComponentAndDemoAreServed(t *testing.T) {
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	js := h.MustDo(http.StatusOK, http.MethodGet, "/inbox/herald-inbox.js", "", nil)
	if !strings.HasPrefix(js.Header.Get("Content-Type"), "text/javascript") || !strings.Contains(string(js.Body), `customElements.define("herald-inbox"`) {
		t.Fatalf("component: %s %.100s", js.Header.Get("Content-Type"), js.Body)
	}
	demo := h.MustDo(http.StatusOK, http.MethodGet, "/inbox/demo", "", nil)
	if !strings.Contains(string(demo.Body), `<herald-inbox`) || demo.Header.Get("Content-Security-Policy") == "" {
		t.Fatalf("demo: %.200s", demo.Body)
	}
}

// A stream outlives the server's write timeout (HERALD_HTTP_WRITE_TIMEOUT bounds
// ordinary answers): each write pushes the deadline forward.
func TestInboxStreamOutlivesTheWriteTimeout(t *testing.T) {
	h := apitest.Start(t, apitest.Options{InboxHeartbeat: 200 * time.Millisecond})
	_, key, token := inboxUser(t, h, "ada")
	srv := app.HTTPServer(config.Config{HTTPWriteTimeout: time.Second, HTTPReadTimeout: time.Second}, h.Handler(),
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	st := h.OpenStream("http://"+ln.Addr().String(), "/v1/users/ada/inbox/stream", token)
	st.NextOf("ready", streamWithin)
	time.Sleep(2500 * time.Millisecond) // well past the 1 s write timeout
	id := sendInApp(t, h, key, "ada", "late")
	if ev := st.NextOf(herald.InboxItemCreated, streamWithin); ev.NotificationID() != id {
		t.Fatalf("got %s", ev.Raw)
	}
}

// A campaign's in-app page goes through the inbox's batch path: every
// recipient's open stream gets its item.created, the counters stay exact, and a
// re-run of the page adds nothing.
func TestCampaignInboxItemsReachTheStreams(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	tenantID, key := h.TenantWith("campaign-inbox", e2eTemplates...)
	h.Template(key, apitest.SimpleTemplate("promo"))
	users := []string{"c1", "c2", "c3"}
	var streams []*apitest.Stream
	for _, u := range users {
		createUser(h, key, u)
		st := h.OpenStream("", "/v1/users/"+u+"/inbox/stream", h.UserToken(key, u))
		st.NextOf("ready", streamWithin)
		streams = append(streams, st)
	}
	h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/campaigns", key, map[string]any{"campaign_id": "live", "template_id": "promo",
		"channels": []string{"in_app"}, "data": map[string]any{"title": "Sale"}, "audience": map[string]any{"user_ids": users}})
	for i, st := range streams {
		ev := st.NextOf(herald.InboxItemCreated, 30*time.Second)
		if item, _ := ev.Data["item"].(map[string]any); item["title"] != "Sale" || item["category"] != "general" || ev.ID != 1 {
			t.Fatalf("%s: %s", users[i], ev.Raw)
		}
		c, recount := inboxCounts(t, h, tenantID, users[i])
		if c != recount || c.Total != 1 {
			t.Fatalf("%s: counts %+v recount %+v", users[i], c, recount)
		}
	}
}

// A change whose NOTIFY never arrived (written straight into the event log, no
// pg_notify) still reaches the open stream: every heartbeat re-reads the log.
func TestInboxStreamRecoversALostNotifyAtTheNextHeartbeat(t *testing.T) {
	h := apitest.Start(t, apitest.Options{InboxHeartbeat: 300 * time.Millisecond})
	tenantID, key, token := inboxUser(t, h, "ada")
	st := h.OpenStream("", "/v1/users/ada/inbox/stream", token)
	st.NextOf("ready", streamWithin)
	id := sendInApp(t, h, key, "ada", "Order shipped")
	if ev := st.NextOf(herald.InboxItemCreated, streamWithin); ev.NotificationID() != id {
		t.Fatalf("created: %s", ev.Raw)
	}
	// The next event, as a mark would log it, minus its NOTIFY (the created
	// event before it is carried by the inbox row: 0155).
	tag, err := testenv.Pool(t).Exec(context.Background(), `
		INSERT INTO inbox_events (tenant_id, user_id, seq, kind, notification_id, item, total, unread, unseen)
		SELECT tenant_id, user_id, ev_seq + 1, $3, notification_id,
		       jsonb_build_object('t', title, 'b', body, 'at', created_at, 's', NULLIF(due_seq, 0)), ev_total, ev_unread, ev_unseen FROM inbox
		WHERE tenant_id = $1 AND user_id = $2 ORDER BY ev_seq DESC LIMIT 1`, tenantID, "ada", herald.InboxItemUpdated)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("insert the event: %v %v", tag, err)
	}
	ev := st.NextOf(herald.InboxItemUpdated, streamWithin)
	if ev.ID != 2 || ev.NotificationID() != id {
		t.Fatalf("recovered event = %d %s, want 2 for %s", ev.ID, ev.Raw, id)
	}
}

// An item the inbox cap removed takes its item.created event with it (the row
// carries it, 0155): a stream resuming from before that event finds a hole in
// the log, before its first event or inside the page, and refetches instead of
// skipping it.
func TestInboxStreamRefetchesOverACappedAwayCreatedEvent(t *testing.T) {
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	tenantID, _, token := inboxUser(t, h, "ada")
	capped := store.New(testenv.Pool(t))
	capped.SetInboxCap(2)
	// The feed's order is n_c, n_b, n_a (no due sequences: by id): n_c
	// pushes n_a (event 2) out; the log is 1 (n_b created), 3 (removed), 4
	// (n_c created).
	for _, id := range []string{"n_b", "n_a", "n_c"} {
		if _, err := capped.InsertInboxItems(context.Background(), []store.NewInboxItem{{TenantID: tenantID, UserID: "ada", NotificationID: id,
			Title: id, Body: "b", CreatedAt: time.Now()}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, from := range []string{"0", "1"} { // the hole inside the page, before it
		st := h.OpenStream("", "/v1/users/ada/inbox/stream", token, "Last-Event-ID", from)
		if ev := st.Next(streamWithin); ev.Type != herald.InboxRefetch || ev.ID != 4 {
			t.Fatalf("from %s: %s %d %s, want refetch 4", from, ev.Type, ev.ID, ev.Raw)
		}
		st.Quiet(300 * time.Millisecond)
	}
	// From 2 on nothing is missing: 3 and 4.
	st := h.OpenStream("", "/v1/users/ada/inbox/stream", token, "Last-Event-ID", "2")
	if ev := st.Next(streamWithin); ev.Type != herald.InboxItemsRemoved || ev.ID != 3 {
		t.Fatalf("from 2: %s %d", ev.Type, ev.ID)
	}
	if ev := st.Next(streamWithin); ev.Type != herald.InboxItemCreated || ev.ID != 4 || ev.NotificationID() != "n_c" {
		t.Fatalf("from 2: %s %d %s", ev.Type, ev.ID, ev.Raw)
	}
}
