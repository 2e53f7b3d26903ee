package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/app"
	"github.com/herald-notify/herald/internal/config"
	"github.com/herald-notify/herald/internal/testenv"
)

func importUsers(h *apitest.Harness, key, contentType, body string) apitest.Response {
	h.T.Helper()
	return h.Do(http.MethodPost, "/v1/users/import", key, body, "Content-Type", contentType)
}

func wantCounts(t *testing.T, r apitest.Response, users, created, updated, unchanged int) {
	t.Helper()
	if r.Status != http.StatusOK || num(r.JSON, "users") != users || num(r.JSON, "created") != created ||
		num(r.JSON, "updated") != updated || num(r.JSON, "unchanged") != unchanged {
		t.Fatalf("import: want users %d created %d updated %d unchanged %d, got %d %s", users, created, updated, unchanged, r.Status, r.Body)
	}
}

// TestUserImport: an NDJSON import creates users with their profiles,
// preferences, topics and devices; the same file again changes nothing; a
// changed field counts as updated; a user named twice takes its last line; the
// first bad line is a 400 naming line and field and stores nothing; CSV works
// alike; imports are audited; a user's devices are capped.
func TestUserImport(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	tenantID, key := h.TenantWith("importer", "promo")
	_, otherKey := h.Tenant("importer-other")

	file := strings.Join([]string{
		`{"user_id":"ada","name":"Ada","email":"ada@example.com","locale":"en-GB","timezone":"Europe/London",` +
			`"preferences":{"categories":{"marketing":{"enabled":false}}},"topics":["news","release-notes"],` +
			`"push_tokens":[{"token":"tok-ada-1","platform":"android"},{"token":"tok-ada-2","platform":"ios"}]}`,
		``,
		`{"user_id":"bob","phone":"+14155550101"}`,
		`{"user_id":"cy","email":"cy-old@example.com"}`,
		`{"user_id":"cy","email":"cy@example.com","topics":["news"]}`,
	}, "\n") + "\n"
	r := importUsers(h, key, "application/x-ndjson", file)
	wantCounts(t, r, 3, 3, 0, 0)
	if num(r.JSON, "lines") != 4 {
		t.Fatalf("lines: %s", r.Body)
	}
	ada := h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/ada", key, nil)
	if ada.Str("email") != "ada@example.com" || ada.Str("locale") != "en-GB" || ada.Str("name") != "Ada" {
		t.Fatalf("ada: %s", ada.Body)
	}
	if cy := h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/cy", key, nil); cy.Str("email") != "cy@example.com" {
		t.Fatalf("cy takes its last line: %s", cy.Body)
	}
	prefs := h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/ada/preferences", key, nil)
	if !strings.Contains(string(prefs.Body), `"marketing":{"enabled":false}`) {
		t.Fatalf("ada's preferences: %s", prefs.Body)
	}
	subs := h.MustDo(http.StatusOK, http.MethodGet, "/v1/topics/news/subscribers", key, nil)
	if !strings.Contains(string(subs.Body), `"ada"`) || !strings.Contains(string(subs.Body), `"cy"`) || strings.Contains(string(subs.Body), `"bob"`) {
		t.Fatalf("news subscribers: %s", subs.Body)
	}
	if toks := h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/ada/push-tokens", key, nil); len(toks.JSON["items"].([]any)) != 2 {
		t.Fatalf("ada's devices: %s", toks.Body)
	}
	h.MustDo(http.StatusNotFound, http.MethodGet, "/v1/users/ada", otherKey, nil)

	// The same file again: nothing changes.
	wantCounts(t, importUsers(h, key, "application/x-ndjson", file), 3, 0, 0, 3)
	// One new user, one changed email, one new topic for bob; ada unchanged.
	// A new topic of the new user and of the changed one counts them once.
	wantCounts(t, importUsers(h, key, "application/x-ndjson", strings.Join([]string{
		`{"user_id":"ada","name":"Ada","email":"ada@example.com","locale":"en-GB","timezone":"Europe/London"}`,
		`{"user_id":"bob","phone":"+14155550101","topics":["news"]}`,
		`{"user_id":"cy","email":"cy@example.org","topics":["deals"]}`,
		`{"user_id":"dee","topics":["deals"]}`,
	}, "\n")), 4, 1, 2, 1)

	// The first bad line names line and field; nothing of the file is stored.
	for _, c := range []struct{ ct, body, field string }{
		{"application/x-ndjson", "{\"user_id\":\"new1\"}\n{\"user_id\":\"new2\",\"email\":\"not an address\"}\n{\"user_id\":\"x\",\"email\":\"bad\"}", "line 2.email"},
		{"application/x-ndjson", "{\"user_id\":\"new1\"}\n\n{\"user_id\":\"new2\",\"shoe_size\":42}", "line 3.shoe_size"},
		{"application/x-ndjson", "{\"user_id\":\"new1\",\"preferences\":{\"channels\":{\"fax\":true}}}", "line 1.preferences.channels.fax"},
		{"application/x-ndjson", "{\"user_id\":\"new1\",\"push_tokens\":[{\"token\":\"t\",\"platform\":\"palm\"}]}", "line 1.push_tokens[0].platform"},
		{"application/x-ndjson", "{\"user_id\":\"new1\",\"topics\":[\"a b\"]}", "line 1.topics[0]"},
		{"application/x-ndjson", "{\"user_id\":\"new/1\"}", "line 1.user_id"},
		{"application/x-ndjson", "not json", "line 1"},
		{"text/csv", "user_id,email,shoe_size\nnew1,a@example.com,42\n", "line 1.shoe_size"},
		{"text/csv", "user_id,email,timezone\nnew1,a@example.com,Europe/London\nnew2,b@example.com,Mars/Olympus\n", "line 3.timezone"},
	} {
		r := importUsers(h, key, c.ct, c.body)
		apitest.WantError(t, r, http.StatusBadRequest, "invalid_line", c.field)
	}
	h.MustDo(http.StatusNotFound, http.MethodGet, "/v1/users/new1", key, nil)
	apitest.WantError(t, importUsers(h, key, "application/json", `{"user_id":"x"}`), http.StatusUnsupportedMediaType, "unsupported_media_type", "")

	// CSV: topics separated by ';', an empty cell is an absent field.
	wantCounts(t, importUsers(h, key, "text/csv; charset=utf-8",
		"user_id,name,email,topics,push_token,push_platform\r\ncsv1,\"Doe, Jane\",jane@example.com,news;deals,tok-csv1,web\r\ncsv2,,,,,\r\n"), 2, 2, 0, 0)
	if u := h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/csv1", key, nil); u.Str("name") != "Doe, Jane" {
		t.Fatalf("csv1: %s", u.Body)
	}
	if subs := h.MustDo(http.StatusOK, http.MethodGet, "/v1/topics/deals/subscribers", key, nil); !strings.Contains(string(subs.Body), `"csv1"`) {
		t.Fatalf("deals subscribers: %s", subs.Body)
	}

	// Whatever a field holds reaches PostgreSQL intact through the COPY spool:
	// tabs, newlines and backslashes in a name; quotes, backslashes, commas and
	// braces in topic names (an array literal inside COPY text).
	weird := `{"user_id":"weird","name":"tab\there\nnewline \\N back\\slash","topics":["q\"uote","back\\slash","{br,ace}","NULL"]}`
	wantCounts(t, importUsers(h, key, "application/x-ndjson", weird), 1, 1, 0, 0)
	if u := h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/weird", key, nil); u.Str("name") != "tab\there\nnewline \\N back\\slash" {
		t.Fatalf("weird name: %q", u.Str("name"))
	}
	for _, topic := range []string{`q"uote`, `back\slash`, "{br,ace}", "NULL"} {
		subs := h.MustDo(http.StatusOK, http.MethodGet, "/v1/topics/"+url.PathEscape(topic)+"/subscribers", key, nil)
		if !strings.Contains(string(subs.Body), `"weird"`) {
			t.Fatalf("topic %q: %s", topic, subs.Body)
		}
	}

	// Audited by size, never by content.
	audit := h.MustDo(http.StatusOK, http.MethodGet, "/v1/audit-log?action=users.import", key, nil)
	if items := audit.JSON["items"].([]any); len(items) < 3 || strings.Contains(string(audit.Body), "ada@example.com") {
		t.Fatalf("audit: %s", audit.Body)
	}

	// The body is bounded like a list upload's: the operator's max_list_bytes
	// for the tenant; past it 413 and nothing stored.
	h.MustDo(http.StatusOK, http.MethodPut, "/v1/operator/tenants/"+tenantID+"/limits", h.OperatorKey, map[string]any{"max_list_bytes": 1000})
	var big strings.Builder
	for i := range 40 {
		fmt.Fprintf(&big, "{\"user_id\":\"big%02d\",\"email\":\"big%02d@example.com\"}\n", i, i)
	}
	apitest.WantError(t, importUsers(h, key, "application/x-ndjson", big.String()), http.StatusRequestEntityTooLarge, "body_too_large", "")
	h.MustDo(http.StatusNotFound, http.MethodGet, "/v1/users/big00", key, nil)
	h.MustDo(http.StatusOK, http.MethodPut, "/v1/operator/tenants/"+tenantID+"/limits", h.OperatorKey, map[string]any{"max_list_bytes": 0})

	// Devices are capped (HERALD_PUSH_TOKENS_PER_USER, 10 by default): an import
	// line with more is refused, and registering an 11th removes the oldest.
	var many []string
	for i := range 11 {
		many = append(many, fmt.Sprintf(`{"token":"tok-many-%02d","platform":"android"}`, i))
	}
	apitest.WantError(t, importUsers(h, key, "application/x-ndjson", `{"user_id":"dee","push_tokens":[`+strings.Join(many, ",")+`]}`),
		http.StatusBadRequest, "invalid_line", "line 1.push_tokens")
	for i := range 11 {
		h.MustDo(http.StatusCreated, http.MethodPut, "/v1/users/dee/push-tokens", key, map[string]any{"token": fmt.Sprintf("dev-%02d", i), "platform": "ios"})
	}
	toks := h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/dee/push-tokens", key, nil)
	if items := toks.JSON["items"].([]any); len(items) != 10 || strings.Contains(string(toks.Body), `"dev-00"`) || !strings.Contains(string(toks.Body), `"dev-10"`) {
		t.Fatalf("dee's devices after 11 registrations: %s", toks.Body)
	}
}

// TestUserImportIntoEmptyTenant: a tenant's first import (no users yet, the
// rows COPYed straight into users) stores profiles and every optional section
// as the staged path does, a token named on two lines goes to the later user,
// and a bad line anywhere still stores nothing; the same file again is
// unchanged, a file naming a user twice falls back to the staged path.
func TestUserImportIntoEmptyTenant(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	_, key := h.Tenant("import-first")

	bad := "{\"user_id\":\"e1\",\"topics\":[\"news\"]}\n{\"user_id\":\"e2\"}\n{\"user_id\":\"e3\",\"phone\":\"555\"}\n"
	apitest.WantError(t, importUsers(h, key, "application/x-ndjson", bad), http.StatusBadRequest, "invalid_line", "line 3.phone")
	h.MustDo(http.StatusNotFound, http.MethodGet, "/v1/users/e1", key, nil)
	h.MustDo(http.StatusNotFound, http.MethodGet, "/v1/topics/news/subscribers", key, nil) // nor its topic

	file := strings.Join([]string{
		`{"user_id":"e1","name":"Eve","email":"eve@example.com","locale":"fr-FR","timezone":"Europe/Paris",` +
			`"preferences":{"categories":{"marketing":{"enabled":false}}},"topics":["news","news","deals"],` +
			`"push_tokens":[{"token":"tok-shared","platform":"ios"},{"token":"tok-e1","platform":"android"}]}`,
		`{"user_id":"e2","phone":"+14155550102","push_tokens":[{"token":"tok-shared","platform":"web"}]}`,
		`{"user_id":"e3","topics":[]}`,
	}, "\n") + "\n"
	wantCounts(t, importUsers(h, key, "application/x-ndjson", file), 3, 3, 0, 0)
	if u := h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/e1", key, nil); u.Str("name") != "Eve" || u.Str("timezone") != "Europe/Paris" {
		t.Fatalf("e1: %s", u.Body)
	}
	if prefs := h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/e1/preferences", key, nil); !strings.Contains(string(prefs.Body), `"marketing":{"enabled":false}`) {
		t.Fatalf("e1's preferences: %s", prefs.Body)
	}
	for topic, want := range map[string]string{"news": `"e1"`, "deals": `"e1"`} {
		if subs := h.MustDo(http.StatusOK, http.MethodGet, "/v1/topics/"+topic+"/subscribers", key, nil); !strings.Contains(string(subs.Body), want) {
			t.Fatalf("%s subscribers: %s", topic, subs.Body)
		}
	}
	e1 := h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/e1/push-tokens", key, nil)
	e2 := h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/e2/push-tokens", key, nil)
	if len(e1.JSON["items"].([]any)) != 1 || strings.Contains(string(e1.Body), "tok-shared") || !strings.Contains(string(e2.Body), `"tok-shared"`) {
		t.Fatalf("the shared token goes to the later line: e1 %s, e2 %s", e1.Body, e2.Body)
	}

	// Again: nothing changes (the staged path, the tenant has users now).
	wantCounts(t, importUsers(h, key, "application/x-ndjson", file), 3, 0, 0, 3)

	// Another tenant's first file names a user twice: the direct COPY breaks
	// the primary key, the staged path applies it (the last line wins).
	_, key2 := h.Tenant("import-first-twice")
	wantCounts(t, importUsers(h, key2, "text/csv", "user_id,email,topics\nd1,old@example.com,news\nd2,,\nd1,new@example.com,deals\n"), 2, 2, 0, 0)
	if u := h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/d1", key2, nil); u.Str("email") != "new@example.com" {
		t.Fatalf("d1 takes its last line: %s", u.Body)
	}
	h.MustDo(http.StatusNotFound, http.MethodGet, "/v1/topics/news/subscribers", key2, nil) // d1's first line is not applied
	if subs := h.MustDo(http.StatusOK, http.MethodGet, "/v1/topics/deals/subscribers", key2, nil); !strings.Contains(string(subs.Body), `"d1"`) {
		t.Fatalf("deals subscribers: %s", subs.Body)
	}
}

// postImportStream POSTs an NDJSON import whose body is written by write as
// the request goes (the import reads it while it arrives) and returns the
// answer's status and JSON.
func postImportStream(t *testing.T, h *apitest.Harness, key string, write func(w io.Writer)) (int, map[string]any) {
	t.Helper()
	pr, pw := io.Pipe()
	go func() {
		write(pw)
		_ = pw.Close()
	}()
	req, err := http.NewRequest(http.MethodPost, h.URL+"/v1/users/import", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/x-ndjson")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%d %s", resp.StatusCode, raw)
	}
	return resp.StatusCode, out
}

// importCopies counts the COPYs into users or the import's staging table
// running in the test database.
func importCopies(pool *pgxpool.Pool) int64 {
	var c int64
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'COPY user%' AND state <> 'idle'`).Scan(&c); err != nil {
		return -1
	}
	return c
}

// writeWatchingCopy writes the lines of write in chunks of 64 KiB and records
// in seen whether a COPY ran while the body was still being sent: past the
// first MiB (which the import waits for), until it has seen one, it looks for
// up to 300 ms after each chunk (less than the import's second of waiting).
func writeWatchingCopy(pool *pgxpool.Pool, w io.Writer, seen *atomic.Bool, write func(w io.Writer)) {
	pr, pw := io.Pipe()
	go func() {
		write(pw)
		_ = pw.Close()
	}()
	buf := make([]byte, 64<<10)
	sent := 0
	for {
		n, err := io.ReadFull(pr, buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				_ = pr.CloseWithError(werr)
				return
			}
			sent += n
			for start := time.Now(); sent > 1<<20 && !seen.Load() && time.Since(start) < 300*time.Millisecond; time.Sleep(10 * time.Millisecond) {
				if importCopies(pool) > 0 {
					seen.Store(true)
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// pauseUntilNoCopy pauses for 1.5 s (past the import's 1 s of waiting), then
// until no COPY of the test database runs (the import gave its attempt up),
// or 30 s: how long the import takes to reach the pause depends on the
// machine's load, not on the rule. It returns the last count seen.
func pauseUntilNoCopy(pool *pgxpool.Pool) int64 {
	time.Sleep(1500 * time.Millisecond)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if c := importCopies(pool); c <= 0 || time.Now().After(deadline) {
			return c
		}
	}
}

// TestUserImportStreamed: a body larger than the part the import waits for
// before it starts is imported while it arrives (a COPY runs while the body is
// still being sent); a client that stops sending for longer than the import
// waits (its transaction given up: no COPY runs during the pause, the import
// run again once the body has ended) still gets every line imported once; a
// bad line, or a body over the tenant's limit, part-way through a streamed
// body stores nothing.
func TestUserImportStreamed(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	tenantID, key := h.Tenant("import-streamed")
	const n = 30_000 // about 2.7 MB: past the first MiB the import waits for
	lines := func(w io.Writer, from, to int, tag string) {
		bw := bufio.NewWriter(w)
		for i := from; i < to; i++ {
			fmt.Fprintf(bw, `{"user_id":"s%06d","name":"Streamed %d %s","email":"s%06d@example.com","topics":["t%d"]}`+"\n", i, i, tag, i, i%3)
		}
		_ = bw.Flush()
	}

	// Streamed while the import runs: every line stored, a COPY seen while
	// the body was still being sent.
	pool := testenv.Pool(t)
	var seen atomic.Bool
	status, out := postImportStream(t, h, key, func(w io.Writer) {
		writeWatchingCopy(pool, w, &seen, func(w io.Writer) { lines(w, 0, n, "a") })
	})
	if status != http.StatusOK || num(out, "created") != n {
		t.Fatalf("streamed import: %d %v", status, out)
	}
	if !seen.Load() {
		t.Fatal("no COPY ran while the body was being sent: the import waited for the whole body")
	}
	// The client pauses past the import's wait: the attempt is given up (no
	// COPY holds a connection during the rest of the pause) and the file
	// applied from the spool once complete (half updated, half new).
	seen.Store(false)
	var copying atomic.Int64
	copying.Store(-1)
	status, out = postImportStream(t, h, key, func(w io.Writer) {
		writeWatchingCopy(pool, w, &seen, func(w io.Writer) { lines(w, n/2, n, "b") })
		copying.Store(pauseUntilNoCopy(pool))
		lines(w, n, n+n/2, "b")
	})
	if status != http.StatusOK || num(out, "updated") != n/2 || num(out, "created") != n/2 || num(out, "unchanged") != 0 {
		t.Fatalf("import with a pause: %d %v", status, out)
	}
	if !seen.Load() {
		t.Fatal("no COPY ran while the body's first half was being sent")
	}
	if c := copying.Load(); c != 0 {
		t.Fatalf("%d imports held a COPY while their client paused for 30 s", c)
	}
	if u := h.MustDo(http.StatusOK, http.MethodGet, fmt.Sprintf("/v1/users/s%06d", n+n/2-1), key, nil); u.Str("name") != fmt.Sprintf("Streamed %d b", n+n/2-1) {
		t.Fatalf("the last user after the pause: %s", u.Body)
	}
	subs := h.MustDo(http.StatusOK, http.MethodGet, "/v1/topics/t0/subscribers?limit=1", key, nil)
	if len(subs.JSON["items"].([]any)) != 1 {
		t.Fatalf("t0 subscribers: %s", subs.Body)
	}

	// A bad line after the first MiB: 400 naming it, nothing of the file
	// stored (its first line's user is new).
	status, out = postImportStream(t, h, key, func(w io.Writer) {
		lines(w, 2*n, 3*n, "c")
		fmt.Fprintln(w, `{"user_id":"bad","email":"not an address"}`)
		lines(w, 3*n, 3*n+100, "c")
	})
	if e, _ := out["error"].(map[string]any); status != http.StatusBadRequest || e["field"] != fmt.Sprintf("line %d.email", n+1) {
		t.Fatalf("bad line: %d %v", status, out)
	}
	h.MustDo(http.StatusNotFound, http.MethodGet, fmt.Sprintf("/v1/users/s%06d", 2*n), key, nil)

	// Over the tenant's limit part-way: 413, nothing stored.
	h.MustDo(http.StatusOK, http.MethodPut, "/v1/operator/tenants/"+tenantID+"/limits", h.OperatorKey, map[string]any{"max_list_bytes": 2 << 20})
	status, out = postImportStream(t, h, key, func(w io.Writer) { lines(w, 4*n, 5*n, "d") })
	if status != http.StatusRequestEntityTooLarge {
		t.Fatalf("over the limit: %d %v", status, out)
	}
	h.MustDo(http.StatusNotFound, http.MethodGet, fmt.Sprintf("/v1/users/s%06d", 4*n), key, nil)
}

// TestUserImportRefusesWhatPUTRefuses: what PUT /v1/users/{id} and PUT
// …/preferences refuse with a 400 is refused by an import with a 400 naming
// the line, never a 500 nor stored altered: a NUL character in a preferences
// key (PostgreSQL's jsonb refuses it mid-COPY), in a tenant's first import
// (direct) and a later one (staged), in NDJSON and in a CSV preferences cell;
// an unpaired surrogate escape; data after a line's object.
func TestUserImportRefusesWhatPUTRefuses(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	_, key := h.Tenant("import-refuses")
	_, putKey := h.Tenant("import-refuses-put")
	nulPrefs := `{"categories":{"\u0000":{"enabled":false}}}`
	h.PutUser(putKey, "p1", map[string]any{"name": "P"})
	r := h.Do(http.MethodPut, "/v1/users/p1/preferences", putKey, nulPrefs, "Content-Type", "application/json")
	if r.Status != http.StatusBadRequest {
		t.Fatalf("PUT preferences with a NUL key: %d %s", r.Status, r.Body)
	}
	cases := []struct{ ct, body, field string }{
		{"application/x-ndjson", "{\"user_id\":\"n1\"}\n{\"user_id\":\"n2\",\"preferences\":" + nulPrefs + "}\n", `line 2.preferences.categories["\u0000"]`},
		{"text/csv", "user_id,preferences\nn1,\nn2,\"" + strings.ReplaceAll(nulPrefs, `"`, `""`) + "\"\n", `line 3.preferences.categories["\u0000"]`},
		{"application/x-ndjson", "{\"user_id\":\"n1\"}\n{\"user_id\":\"\\ud800\"}\n", "line 2.user_id"},
		{"application/x-ndjson", "{\"user_id\":\"n1\"}\n{\"user_id\":\"n2\"}}\n", "line 2"},
	}
	for _, c := range cases { // direct: the tenant has no users
		apitest.WantError(t, importUsers(h, key, c.ct, c.body), http.StatusBadRequest, "invalid_line", c.field)
	}
	h.MustDo(http.StatusNotFound, http.MethodGet, "/v1/users/n1", key, nil)
	h.PutUser(key, "someone", map[string]any{"name": "Someone"})
	for _, c := range cases { // staged
		apitest.WantError(t, importUsers(h, key, c.ct, c.body), http.StatusBadRequest, "invalid_line", c.field)
	}
	h.MustDo(http.StatusNotFound, http.MethodGet, "/v1/users/n1", key, nil)
}

// TestUserImportOutlastsServerTimeouts: an import's deadlines are sized to the
// tenant's body limit (at least 1 MB/s plus a margin), not the server's
// ReadTimeout and WriteTimeout: a slow but steady upload lasting longer than
// both (here shortened to 1 s and 2 s) is read to its end and answered.
func TestUserImportOutlastsServerTimeouts(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	_, key := h.Tenant("import-slow-client")
	srv := app.HTTPServer(config.Config{HTTPReadHeaderTimeout: time.Second, HTTPReadTimeout: time.Second,
		HTTPWriteTimeout: 2 * time.Second, HTTPIdleTimeout: time.Second}, h.HandlerWith(nil), slog.New(slog.DiscardHandler))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	hs := *h
	hs.URL = "http://" + ln.Addr().String()
	const n = 35
	start := time.Now()
	status, out := postImportStream(t, &hs, key, func(w io.Writer) {
		for i := range n {
			fmt.Fprintf(w, "{\"user_id\":\"slow%02d\",\"name\":\"Slow %d\"}\n", i, i)
			time.Sleep(100 * time.Millisecond)
		}
	})
	if status != http.StatusOK || num(out, "created") != n {
		t.Fatalf("an upload of %v past the server's timeouts: %d %v", time.Since(start), status, out)
	}
	if took := time.Since(start); took < 3*time.Second {
		t.Fatalf("the upload took %v, not past the timeouts", took)
	}
}

// TestUserImportCountsDevicesTaken: a user of the file whose device another
// line takes, and one whose oldest devices the per-user cap removes, changed:
// both count as updated, not unchanged.
func TestUserImportCountsDevicesTaken(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	_, key := h.Tenant("import-devices-taken")
	wantCounts(t, importUsers(h, key, "application/x-ndjson",
		"{\"user_id\":\"a\",\"push_tokens\":[{\"token\":\"tok-a\",\"platform\":\"ios\"}]}\n{\"user_id\":\"b\"}\n"), 2, 2, 0, 0)
	// b takes a's device; a's line is otherwise as stored.
	wantCounts(t, importUsers(h, key, "application/x-ndjson",
		"{\"user_id\":\"a\"}\n{\"user_id\":\"b\",\"push_tokens\":[{\"token\":\"tok-a\",\"platform\":\"ios\"}]}\n"), 2, 0, 2, 0)
	if toks := h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/a/push-tokens", key, nil); len(toks.JSON["items"].([]any)) != 0 {
		t.Fatalf("a's devices: %s", toks.Body)
	}

	// c has 3 devices; under a cap of 2, a line naming one of them as stored
	// removes the oldest.
	h.PutUser(key, "c", map[string]any{})
	for i := range 3 {
		h.MustDo(http.StatusCreated, http.MethodPut, "/v1/users/c/push-tokens", key, map[string]any{"token": fmt.Sprintf("tok-c%d", i), "platform": "web"})
	}
	capped := httptest.NewServer(h.HandlerWith(func(c *config.Config) { c.PushTokensPerUser = 2 }))
	t.Cleanup(capped.Close)
	hc := *h
	hc.URL = capped.URL
	wantCounts(t, importUsers(&hc, key, "application/x-ndjson", "{\"user_id\":\"c\",\"push_tokens\":[{\"token\":\"tok-c2\",\"platform\":\"web\"}]}\n"), 1, 0, 1, 0)
	if toks := h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/c/push-tokens", key, nil); len(toks.JSON["items"].([]any)) != 2 {
		t.Fatalf("c's devices under a cap of 2: %s", toks.Body)
	}
}

// TestUserImportDirectSlowClient: a tenant's first import (the direct path:
// profiles COPYed into users, sections to a side spool) whose client pauses
// past the import's wait is rolled back and run again from the spool once the
// body has ended: every user created once, with its sections once (nothing of
// the given-up attempt doubled), and the same file again is unchanged.
func TestUserImportDirectSlowClient(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	tenantID, key := h.Tenant("import-direct-slow")
	pool := testenv.Pool(t)
	const n = 24_000 // about 3 MB
	lines := func(w io.Writer, from, to int) {
		bw := bufio.NewWriter(w)
		for i := from; i < to; i++ {
			fmt.Fprintf(bw, `{"user_id":"d%06d","email":"d%06d@example.com","topics":["t%d"],"preferences":{"categories":{"c%d":{"enabled":false}}},`+
				`"push_tokens":[{"token":"tok-d%06d","platform":"web"}]}`+"\n", i, i, i%3, i%5, i)
		}
		_ = bw.Flush()
	}
	var seen atomic.Bool
	var copying atomic.Int64
	copying.Store(-1)
	file := func(w io.Writer) {
		writeWatchingCopy(pool, w, &seen, func(w io.Writer) { lines(w, 0, n/2) })
		copying.Store(pauseUntilNoCopy(pool))
		lines(w, n/2, n)
	}
	status, out := postImportStream(t, h, key, file)
	if status != http.StatusOK || num(out, "lines") != n || num(out, "created") != n || num(out, "updated") != 0 || num(out, "unchanged") != 0 {
		t.Fatalf("first import with a pause: %d %v", status, out)
	}
	if !seen.Load() {
		t.Fatal("no COPY ran while the body's first half was being sent")
	}
	if c := copying.Load(); c != 0 {
		t.Fatalf("%d imports held a COPY while their client paused", c)
	}
	var users, subs, prefs, toks int
	if err := pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM users WHERE tenant_id = $1),
		(SELECT count(*) FROM topic_subscribers WHERE tenant_id = $1),
		(SELECT count(*) FROM user_preferences WHERE tenant_id = $1),
		(SELECT count(*) FROM push_tokens WHERE tenant_id = $1)`, tenantID).Scan(&users, &subs, &prefs, &toks); err != nil {
		t.Fatal(err)
	}
	if users != n || subs != n || prefs != n || toks != n {
		t.Fatalf("users %d, subscriptions %d, preferences %d, devices %d; want %d of each", users, subs, prefs, toks, n)
	}
	// The same file again (staged now), sent at once: nothing changes.
	status, out = postImportStream(t, h, key, func(w io.Writer) { lines(w, 0, n) })
	if status != http.StatusOK || num(out, "unchanged") != n || num(out, "created") != 0 || num(out, "updated") != 0 {
		t.Fatalf("the same file again: %d %v", status, out)
	}
}
