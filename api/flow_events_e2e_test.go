package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/flows"
	"github.com/herald-notify/herald/internal/templates"
)

// flowOf is the "flow" object of an event's status (nil when absent).
func flowOf(r apitest.Response) map[string]any {
	f, _ := r.JSON["flow"].(map[string]any)
	return f
}

// digestOf is the digest an event joined, from its status.
func digestOf(r apitest.Response) map[string]any {
	d, _ := flowOf(r)["digest"].(map[string]any)
	return d
}

// openDigests answers GET /v1/users/{user}/digests as "flow/key=count" strings.
func openDigests(h *apitest.Harness, key, user string) []string {
	r := h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/"+user+"/digests", key, nil)
	if r.JSON["next_cursor"] != nil {
		h.T.Fatalf("a user's few open digests came in more than one page: %s", r.Body)
	}
	var out []string
	for _, it := range r.JSON["items"].([]any) {
		m := it.(map[string]any)
		out = append(out, fmt.Sprintf("%s/%s=%v", m["flow_id"], m["key"], m["count"]))
	}
	return out
}

// TestFlowEventsThroughTheAPI runs the example flow end to end through
// the API: events accepted once per key (a retry answers the same id), one
// digest of every event, open digests listed, the flush, each event's status
// showing its run and the digest it joined, a cancelled event leaving the
// digest, and another tenant seeing, flushing and triggering nothing of it.
func TestFlowEventsThroughTheAPI(t *testing.T) {
	t.Parallel()
	h := apitest.Start(t, apitest.Options{})
	_, key := h.Tenant("flow-events")
	_, otherKey := h.Tenant("flow-events-other")
	h.Template(key, commentDigestTemplate())
	h.PutUser(key, "ada", map[string]any{})
	h.PutUser(otherKey, "ada", map[string]any{})
	h.MustDo(http.StatusCreated, http.MethodPut, "/v1/flows/comments", key, commentsFlow)

	event := func(idem string, data map[string]any) map[string]any {
		return map[string]any{"user_id": "ada", "flow_id": "comments", "data": data, "idempotency_key": idem}
	}
	// Layer 1: a key is accepted once; a retry answers the same id; the same key
	// with another body (data, or another flow) is 422.
	first := h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/notifications", key, event("c-1", map[string]any{"text": "one"}))
	id1 := first.Str("notification_id")
	if first.Str("status") != "queued" || first.Str("dedup") != "new" {
		t.Fatalf("first event: %s", first.Body)
	}
	retry := h.MustDo(http.StatusOK, http.MethodPost, "/v1/notifications", key, event("c-1", map[string]any{"text": "one"}))
	if retry.Str("notification_id") != id1 || retry.Str("dedup") != "duplicate" {
		t.Fatalf("retry: %s", retry.Body)
	}
	apitest.WantError(t, h.Do(http.MethodPost, "/v1/notifications", key, event("c-1", map[string]any{"text": "changed"})),
		http.StatusUnprocessableEntity, "idempotency_key_reused", "idempotency_key")
	// Without a key the content dedups, and never with a notification of a
	// template of the flow's name.
	noKey := map[string]any{"user_id": "ada", "flow_id": "comments", "data": map[string]any{"text": "two"}}
	id2 := h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/notifications", key, noKey).Str("notification_id")
	if again := h.MustDo(http.StatusOK, http.MethodPost, "/v1/notifications", key, noKey); again.Str("notification_id") != id2 {
		t.Fatalf("the same content without a key: %s", again.Body)
	}
	id3 := h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/notifications", key, event("c-3", map[string]any{"text": "three"})).Str("notification_id")
	gone := h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/notifications", key, event("c-4", map[string]any{"text": "cancelled"})).Str("notification_id")

	// Every event joins the one open digest (no key: key "").
	h.Eventually(20*time.Second, "four events in the open digest", func() bool {
		d := openDigests(h, key, "ada")
		return len(d) == 1 && d[0] == "comments/=4"
	})
	st := h.MustDo(http.StatusOK, http.MethodGet, "/v1/notifications/"+id1, key, nil)
	f := flowOf(st)
	if f == nil || f["flow_id"] != "comments" || f["flow_version"] != 1.0 {
		t.Fatalf("status of a digested event: %s", st.Body)
	}
	steps := f["steps"].([]any)
	if s0 := steps[0].(map[string]any); s0["path"] != "steps[0]" || s0["type"] != "digest" || s0["outcome"] != "digested" || s0["started_at"] == nil {
		t.Fatalf("digest step: %s", st.Body)
	}
	if d := digestOf(st); d["status"] != "open" || d["sent"] != false {
		t.Fatalf("joined digest while open: %s", st.Body)
	}

	// Cancelling an event before its digest closes takes it out.
	if r := h.MustDo(http.StatusOK, http.MethodDelete, "/v1/notifications/"+gone, key, nil); flowOf(r)["flow_id"] != "comments" {
		t.Fatalf("the cancel's answer shows no run: %s", r.Body)
	}
	h.Eventually(20*time.Second, "the cancelled event out of the digest", func() bool {
		d := openDigests(h, key, "ada")
		return len(d) == 1 && d[0] == "comments/=3"
	})

	// Another tenant: no status, no digests, no flush, no trigger.
	apitest.WantError(t, h.Do(http.MethodGet, "/v1/notifications/"+id1, otherKey, nil), http.StatusNotFound, "not_found", "")
	if d := openDigests(h, otherKey, "ada"); len(d) != 0 {
		t.Fatalf("another tenant's ada sees digests %v", d)
	}
	apitest.WantError(t, h.Do(http.MethodPost, "/v1/users/ada/digests/comments/flush", otherKey, nil), http.StatusNotFound, "not_found", "")
	apitest.WantError(t, h.Do(http.MethodPost, "/v1/notifications", otherKey, event("x-1", nil)), http.StatusUnprocessableEntity, "unknown_flow", "flow_id")

	// The flush sends the digest now: one in-app item counting the three events.
	fl := h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/users/ada/digests/comments/flush", key, `{"key":""}`)
	if fl.Str("flow_id") != "comments" || fl.Str("status") != "closing" {
		t.Fatalf("flush: %s", fl.Body)
	}
	h.Eventually(20*time.Second, "the digest's inbox item", func() bool {
		r := h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/ada/inbox?limit=10", key, nil)
		items := r.JSON["items"].([]any)
		return len(items) == 1 && items[0].(map[string]any)["body"] == "3 new comments"
	})
	var digestID string
	for _, id := range []string{id1, id2, id3} {
		h.Eventually(20*time.Second, "the event's digest sent", func() bool {
			d := digestOf(h.MustDo(http.StatusOK, http.MethodGet, "/v1/notifications/"+id, key, nil))
			return d["status"] == "sent" && d["sent"] == true && d["digest_id"] != nil
		})
		d := digestOf(h.MustDo(http.StatusOK, http.MethodGet, "/v1/notifications/"+id, key, nil))
		if digestID == "" {
			digestID = d["digest_id"].(string)
		}
		if d["digest_id"] != digestID {
			t.Fatalf("events in different digests: %v and %s", d, digestID)
		}
	}
	if d := digestOf(h.MustDo(http.StatusOK, http.MethodGet, "/v1/notifications/"+gone, key, nil)); d["status"] != "cancelled" || d["sent"] != false {
		t.Fatalf("the cancelled event's digest: %v", d)
	}
	if d := openDigests(h, key, "ada"); len(d) != 0 {
		t.Fatalf("digests open after the flush: %v", d)
	}
	apitest.WantError(t, h.Do(http.MethodPost, "/v1/users/ada/digests/comments/flush", key, nil), http.StatusNotFound, "not_found", "")
	log := h.MustDo(http.StatusOK, http.MethodGet, "/v1/audit-log?action=digest.flush", key, nil)
	if n := len(log.JSON["items"].([]any)); n != 1 {
		t.Fatalf("digest.flush audit entries: %d", n)
	}
}

// TestFlowRunPinnedToItsVersion: a run keeps the version it started with while
// a new version is saved; the next event runs the new one.
func TestFlowRunPinnedToItsVersion(t *testing.T) {
	t.Parallel()
	h := apitest.Start(t, apitest.Options{})
	_, key := h.Tenant("flow-pin")
	h.Template(key, templates.Template{ID: "v1_text", Category: "c", InApp: &templates.InAppContent{Title: "t", Body: "from version 1"}})
	h.Template(key, templates.Template{ID: "v2_text", Category: "c", InApp: &templates.InAppContent{Title: "t", Body: "from version 2"}})
	h.PutUser(key, "bo", map[string]any{})
	h.MustDo(http.StatusCreated, http.MethodPut, "/v1/flows/pin", key,
		`{"category":"c","steps":[{"type":"delay","duration":"2s"},{"type":"send","id":"s","template_id":"v1_text","channels":["in_app"]}]}`)
	old := h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/notifications", key,
		map[string]any{"user_id": "bo", "flow_id": "pin", "idempotency_key": "p-1"}).Str("notification_id")
	h.MustDo(http.StatusOK, http.MethodPut, "/v1/flows/pin", key,
		`{"category":"c","steps":[{"type":"send","id":"s","template_id":"v2_text","channels":["in_app"]}]}`)
	next := h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/notifications", key,
		map[string]any{"user_id": "bo", "flow_id": "pin", "idempotency_key": "p-2"}).Str("notification_id")

	h.Eventually(20*time.Second, "both runs sent", func() bool {
		r := h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/bo/inbox?limit=10", key, nil)
		return len(r.JSON["items"].([]any)) == 2
	})
	bodies := map[string]bool{}
	for _, it := range h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/bo/inbox?limit=10", key, nil).JSON["items"].([]any) {
		bodies[it.(map[string]any)["body"].(string)] = true
	}
	if !bodies["from version 1"] || !bodies["from version 2"] {
		t.Fatalf("inbox %v: the run started on version 1 must send version 1's template", bodies)
	}
	for id, want := range map[string]struct {
		version float64
		steps   string
	}{old: {1, "[steps[0] delay elapsed] [steps[1] send"}, next: {2, "[steps[0] send"}} {
		var f map[string]any
		h.Eventually(20*time.Second, "the run's send step finished", func() bool {
			f = flowOf(h.MustDo(http.StatusOK, http.MethodGet, "/v1/notifications/"+id, key, nil))
			steps, _ := f["steps"].([]any)
			last, _ := steps[len(steps)-1].(map[string]any)
			return len(steps) > 0 && last["type"] == "send" && last["outcome"] != "running" && last["notification_id"] != nil
		})
		var got string
		for _, s := range f["steps"].([]any) {
			m := s.(map[string]any)
			got += fmt.Sprintf("[%s %s %s] ", m["path"], m["type"], m["outcome"])
		}
		if f["flow_version"] != want.version || len(got) < len(want.steps) || got[:len(want.steps)] != want.steps {
			t.Fatalf("run %s: version %v, steps %s; want version %v, steps %s...", id, f["flow_version"], got, want.version, want.steps)
		}
	}
}

// The accept path refuses what a flow event cannot be, naming the field.
func TestFlowEventBadRequests(t *testing.T) {
	t.Parallel()
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	_, key := h.Tenant("flow-bad-events")
	h.Template(key, commentDigestTemplate())
	h.PutUser(key, "ada", map[string]any{})
	h.MustDo(http.StatusCreated, http.MethodPut, "/v1/flows/keyed", key,
		`{"category":"c","steps":[{"type":"digest","window":"5s","key":"{{.thread}}"},{"type":"send","template_id":"comment_digest","channels":["in_app"]}]}`)
	long := strings.Repeat("x", flows.MaxRenderedKeyBytes+1) // one byte over: refused, never cut
	for _, tc := range []struct {
		body        map[string]any
		status      int
		code, field string
	}{
		{map[string]any{"user_id": "ada", "flow_id": "keyed", "template_id": "comment_digest"}, http.StatusBadRequest, "conflicting_field", "flow_id"},
		{map[string]any{"user_id": "ada", "flow_id": "keyed", "channels": []string{"in_app"}}, http.StatusBadRequest, "invalid_field", "channels"},
		{map[string]any{"user_id": "ada", "flow_id": "keyed", "send_at": "2030-01-01T00:00:00Z"}, http.StatusBadRequest, "invalid_field", "send_at"},
		{map[string]any{"user_id": "ada", "flow_id": "bad/id"}, http.StatusBadRequest, "invalid_field", "flow_id"},
		{map[string]any{"flow_id": "keyed"}, http.StatusBadRequest, "missing_field", "user_id"},
		{map[string]any{"user_id": "ada", "flow_id": "keyed", "priority": "critical"}, http.StatusBadRequest, "invalid_field", "priority"},
		{map[string]any{"user_id": "ada", "flow_id": "keyed", "data": map[string]any{"x": "a\u0000b"}}, http.StatusBadRequest, "invalid_field", "data.x"},
		{map[string]any{"user_id": "ada", "flow_id": "nope"}, http.StatusUnprocessableEntity, "unknown_flow", "flow_id"},
		{map[string]any{"user_id": "nobody", "flow_id": "keyed"}, http.StatusUnprocessableEntity, "unknown_user", "user_id"},
		{map[string]any{"user_id": "ada", "flow_id": "keyed", "data": map[string]any{"thread": long}}, http.StatusUnprocessableEntity, "render_failed", "data"},
	} {
		apitest.WantError(t, h.Do(http.MethodPost, "/v1/notifications", key, tc.body), tc.status, tc.code, tc.field)
	}
	h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/notifications", key,
		map[string]any{"user_id": "ada", "flow_id": "keyed", "data": map[string]any{"thread": long[1:]}})

	// A send that runs on the event's own data is rendered now, as a
	// notification is: data it cannot render from is refused naming the step.
	h.Template(key, templates.Template{ID: "needs_name", Category: "c", InApp: &templates.InAppContent{Title: "t", Body: "Hi {{.name}}"}})
	h.MustDo(http.StatusCreated, http.MethodPut, "/v1/flows/greet", key,
		`{"category":"c","steps":[{"type":"delay","duration":"1s"},{"type":"send","template_id":"needs_name","channels":["in_app"]}]}`)
	r := h.Do(http.MethodPost, "/v1/notifications", key, map[string]any{"user_id": "ada", "flow_id": "greet"})
	apitest.WantError(t, r, http.StatusUnprocessableEntity, "missing_variables", "data")
	if !strings.Contains(string(r.Body), "steps[1]") {
		t.Fatalf("the refusal does not name the step: %s", r.Body)
	}
	greeted := h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/notifications", key,
		map[string]any{"user_id": "ada", "flow_id": "greet", "data": map[string]any{"name": "Ada"}}).Str("notification_id")
	// ... but not a send inside a branch, whose case the data may never take.
	h.MustDo(http.StatusCreated, http.MethodPut, "/v1/flows/maybe", key,
		`{"category":"c","steps":[{"type":"branch","cases":[{"if":{"field":"data.name","op":"exists"},
			"steps":[{"type":"send","template_id":"needs_name","channels":["in_app"]}]}]}]}`)
	h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/notifications", key, map[string]any{"user_id": "ada", "flow_id": "maybe"})
	// Accepted without a worker, an event of a flow that starts with a delay is
	// visible at once (queued) from its run; one of a flow that starts with a
	// digest has no run of its own: it is digested on acceptance, its digest open.
	if r := h.MustDo(http.StatusOK, http.MethodGet, "/v1/notifications/"+greeted, key, nil); r.Str("status") != "queued" {
		t.Fatalf("an event not yet run: %s", r.Body)
	}
	id := h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/notifications", key,
		map[string]any{"user_id": "ada", "flow_id": "keyed", "data": map[string]any{"thread": "t"}}).Str("notification_id")
	if r := h.MustDo(http.StatusOK, http.MethodGet, "/v1/notifications/"+id, key, nil); r.Str("status") != "digested" || digestOf(r)["status"] != "open" {
		t.Fatalf("an event not yet run: %s", r.Body)
	}
	apitest.WantError(t, h.Do(http.MethodGet, "/v1/users/nobody/digests", key, nil), http.StatusNotFound, "not_found", "")
	apitest.WantError(t, h.Do(http.MethodGet, "/v1/users/ada/digests?limit=0", key, nil), http.StatusBadRequest, "invalid_field", "limit")
	apitest.WantError(t, h.Do(http.MethodGet, "/v1/users/ada/digests?cursor=bm9wZQ", key, nil), http.StatusBadRequest, "invalid_field", "cursor")
	apitest.WantError(t, h.Do(http.MethodPost, "/v1/users/ada/digests/keyed/flush", key, `{"key":"`+long+`"}`), http.StatusBadRequest, "invalid_field", "key")
	apitest.WantError(t, h.Do(http.MethodPost, "/v1/users/ada/digests/keyed/flush", key, `{"keys":"t"}`), http.StatusBadRequest, "unknown_field", "keys")
}
