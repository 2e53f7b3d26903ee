package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/internal/store"
)

// opMust sends a request and fails the test unless it answers want. (The op*
// helpers are this file's and operator_e2e_test.go's own, so these tests do not
// depend on helpers other test files may move.)
func opMust(t *testing.T, h *apitest.Harness, want int, method, path, key string, body any) apitest.Response {
	t.Helper()
	r := h.Do(method, path, key, body)
	if r.Status != want {
		t.Fatalf("%s %s: got %d, want %d: %s", method, path, r.Status, want, r.Body)
	}
	return r
}

// opError fails the test unless r is an error with this status, code and field.
func opError(t *testing.T, what string, r apitest.Response, status int, code, field string) {
	t.Helper()
	gotField, gotCode := r.ErrorField()
	if r.Status != status || gotCode != code || gotField != field {
		t.Fatalf("%s: got %d %s/%s, want %d %s/%s: %s", what, r.Status, gotCode, gotField, status, code, field, r.Body)
	}
}

// opPage is one page of a list: the items' key field and next_cursor ("" on the last).
func opPage(t *testing.T, h *apitest.Harness, key, path, field string) (keys []string, next string) {
	t.Helper()
	r := opMust(t, h, http.StatusOK, http.MethodGet, path, key, nil)
	for _, it := range r.JSON["items"].([]any) {
		keys = append(keys, fmt.Sprint(it.(map[string]any)[field]))
	}
	if n, ok := r.JSON["next_cursor"].(string); ok {
		next = n
	} else if r.JSON["next_cursor"] != nil {
		t.Fatalf("%s: next_cursor %v", path, r.JSON["next_cursor"])
	}
	return keys, next
}

// withQuery adds query parameters to a path that may already have some.
func withQuery(path string, kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return path + sep + q.Encode()
}

// pageAll pages path (limit 3) to the end, calling between(i) after page i, and
// returns every key in order. It fails on a duplicate.
func pageAll(t *testing.T, h *apitest.Harness, key, path, field string, between func(page int)) []string {
	t.Helper()
	var all []string
	seen := map[string]bool{}
	cursor := ""
	for page := 0; ; page++ {
		p := withQuery(path, "limit", "3")
		if cursor != "" {
			p = withQuery(path, "limit", "3", "cursor", cursor)
		}
		keys, next := opPage(t, h, key, p, field)
		if len(keys) > 3 {
			t.Fatalf("page %d has %d items with limit 3", page, len(keys))
		}
		for _, k := range keys {
			if seen[k] {
				t.Fatalf("%s listed twice (pages so far: %v)", k, all)
			}
			seen[k] = true
			all = append(all, k)
		}
		if next == "" {
			return all
		}
		if page > 50 {
			t.Fatal("pagination does not end")
		}
		if between != nil {
			between(page)
		}
		cursor = next
	}
}

// badPages checks the 400s every paginated list gives for a bad limit or cursor.
func badPages(t *testing.T, h *apitest.Harness, key, path, otherListPath string) {
	t.Helper()
	for _, l := range []string{"0", "201", "-1", "x", ""} {
		opError(t, path+" limit="+l, h.Do(http.MethodGet, withQuery(path, "limit", l), key, nil), 400, "invalid_field", "limit")
	}
	for _, c := range []string{"", "!!!", "bm90IGpzb24", "e30", strings.Repeat("A", 9000)} {
		opError(t, path+" cursor="+c, h.Do(http.MethodGet, withQuery(path, "cursor", c), key, nil), 400, "invalid_field", "cursor")
	}
	// A cursor of another list is refused, not misread.
	_, other := opPage(t, h, key, withQuery(otherListPath, "limit", "1"), "id")
	if other == "" {
		t.Fatalf("%s: want a second page to borrow a cursor from", otherListPath)
	}
	opError(t, path+" with a cursor of "+otherListPath, h.Do(http.MethodGet, withQuery(path, "cursor", other), key, nil), 400, "invalid_field", "cursor")
}

func TestTemplatesPaginateByID(t *testing.T) {
	t.Parallel()
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	tenantID, key := h.Tenant("pages-templates")
	_, otherKey := h.Tenant("pages-templates-other")
	for i := range 7 {
		h.Template(key, apitest.SimpleTemplate(fmt.Sprintf("t%02d", i)))
	}
	h.Template(otherKey, apitest.SimpleTemplate("t03x"))

	// Default page: everything (7 < 50), next_cursor null.
	if keys, next := opPage(t, h, key, "/v1/templates", "id"); len(keys) != 7 || next != "" {
		t.Fatalf("default page: %v next %q", keys, next)
	}
	// Pages of 3 while templates are saved, created and deleted between pages.
	got := pageAll(t, h, key, "/v1/templates", "id", func(page int) {
		if page == 0 {
			h.Template(key, apitest.SimpleTemplate("a-before")) // sorts before the cursor: not on later pages
			h.Template(key, apitest.SimpleTemplate("t01"))      // a new version of a listed one: not repeated
			h.Template(key, apitest.SimpleTemplate("t04"))      // a new version of one still to come: listed once
			h.Template(key, apitest.SimpleTemplate("t99"))      // sorts after: listed
			opMust(t, h, http.StatusNoContent, http.MethodDelete, "/v1/templates/t05", key, nil)
		}
	})
	if want := "t00 t01 t02 t03 t04 t06 t99"; strings.Join(got, " ") != want {
		t.Fatalf("pages listed %v, want %s", got, want)
	}
	deadLetter(t, h, tenantID, 1)
	deadLetter(t, h, tenantID, 2)
	badPages(t, h, key, "/v1/templates", "/v1/dead-letters")
}

// deadLetter stores a dead letter of a new notification of the tenant.
func deadLetter(t *testing.T, h *apitest.Harness, tenantID string, i int) int64 {
	t.Helper()
	ctx := context.Background()
	k := ids.IdempotencyKeyHash(fmt.Sprintf("%s-%d-%d", tenantID, i, time.Now().UnixNano()))
	nid := ids.NotificationID(k, "00000000-0000-4000-8000-000000000000")
	if err := h.Store.InsertNotification(ctx, store.Notification{TenantID: tenantID, ID: nid, UserID: "ada", TemplateID: "t",
		Channels: []herald.Channel{herald.ChannelEmail}, WorkflowID: ids.NotificationWorkflowID(tenantID, k), RunID: "r", DedupKeyHash: k.String(),
		Status: herald.NotificationSending, AcceptedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	d, err := h.Store.PutDeadLetter(ctx, store.DeadLetter{TenantID: tenantID, NotificationID: nid, Channel: herald.ChannelEmail,
		TemplateID: "t", Attempts: 1, LastError: "500", Payload: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	return d.ID
}

func TestDeadLettersPaginateNewestFirst(t *testing.T) {
	t.Parallel()
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	tenantID, key := h.Tenant("pages-dead-letters")
	var want []string // newest first
	for i := range 7 {
		want = append([]string{fmt.Sprint(deadLetter(t, h, tenantID, i))}, want...)
	}
	h.Template(key, apitest.SimpleTemplate("a"))
	h.Template(key, apitest.SimpleTemplate("b"))

	if keys, next := opPage(t, h, key, "/v1/dead-letters", "id"); len(keys) != 7 || next != "" {
		t.Fatalf("default page: %v next %q", keys, next)
	}
	// Dead letters created while a client pages are newer than its position: the
	// pages go on with the older ones, none repeated, none skipped.
	var added []string
	got := pageAll(t, h, key, "/v1/dead-letters", "id", func(int) {
		added = append(added, fmt.Sprint(deadLetter(t, h, tenantID, 100+len(added))))
	})
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("pages listed %v, want %v (added meanwhile: %v)", got, want, added)
	}
	// The filter holds across pages; a redriven dead letter leaves the open list.
	if got := pageAll(t, h, key, "/v1/dead-letters?status=all&channel=email", "id", nil); len(got) != 7+len(added) {
		t.Fatalf("status=all lists %d, want %d", len(got), 7+len(added))
	}
	if got := pageAll(t, h, key, "/v1/dead-letters?channel=sms", "id", nil); len(got) != 0 {
		t.Fatalf("channel=sms lists %v", got)
	}
	badPages(t, h, key, "/v1/dead-letters", "/v1/templates")
}

func TestPushTokensPaginateOldestFirst(t *testing.T) {
	t.Parallel()
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	_, key := h.Tenant("pages-push")
	opMust(t, h, http.StatusCreated, http.MethodPut, "/v1/users/ada", key, map[string]any{"email": "ada@example.com"})
	opMust(t, h, http.StatusCreated, http.MethodPut, "/v1/users/bob", key, map[string]any{"email": "bob@example.com"})
	register := func(user, token string, want int) {
		t.Helper()
		opMust(t, h, want, http.MethodPut, "/v1/users/"+user+"/push-tokens", key, map[string]any{"token": token, "platform": "android"})
	}
	var want []string
	for i := range 7 {
		tok := fmt.Sprintf("tok-%d", 9-i) // registration order is not token order
		register("ada", tok, http.StatusCreated)
		want = append(want, tok)
	}
	register("bob", "bobs", http.StatusCreated)
	h.Template(key, apitest.SimpleTemplate("a"))
	h.Template(key, apitest.SimpleTemplate("b"))

	got := pageAll(t, h, key, "/v1/users/ada/push-tokens", "token", func(page int) {
		if page == 0 {
			register("ada", "tok-9", http.StatusOK) // a refresh keeps its place: not repeated
			register("ada", "tok-0", http.StatusCreated)
			register("ada", "bobs", http.StatusCreated) // moved here from bob: a new registration, at the end
		}
	})
	want = append(want, "tok-0", "bobs")
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("pages listed %v, want %v", got, want)
	}
	if got := pageAll(t, h, key, "/v1/users/bob/push-tokens", "token", nil); len(got) != 0 {
		t.Fatalf("bob still lists %v", got)
	}
	badPages(t, h, key, "/v1/users/ada/push-tokens", "/v1/templates")
}
