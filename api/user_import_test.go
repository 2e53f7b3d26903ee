package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/internal/store"
)

// TestImportValidCacheDoesNotPinLines: the locale and time zone caches keep
// copies of what they hold, not slices of the lines they came from (the fast
// decoder's strings are slices of a copy of the whole line): 4096 lines of
// 60 KiB, each with a new locale and zone, leave no more than a few MiB live
// (they pinned 256 MiB).
func TestImportValidCacheDoesNotPinLines(t *testing.T) {
	ir := &importReader{ndjson: true, maxTokens: 10}
	pad := strings.Repeat(" ", 60<<10)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range maxValidCache {
		line := fmt.Sprintf(`{"user_id":"u%d",%s"locale":"en-x-%06d","topics":["t%d"]}`, i, pad, i, i)
		if _, err := ir.parseJSON([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if len(ir.locales) != maxValidCache {
		t.Fatalf("%d locales cached, want %d", len(ir.locales), maxValidCache)
	}
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 16<<20 {
		t.Fatalf("the live heap grew by %d MiB after %d lines", grew>>20, maxValidCache)
	}
	runtime.KeepAlive(ir)
}

// TestImportFastTopicsReleaseLines: the topics' array the fast decoder reuses
// holds nothing of the line before (its elements would keep that line alive).
func TestImportFastTopicsReleaseLines(t *testing.T) {
	var f importFast
	if !decodeFast([]byte(`{"user_id":"u1","topics":["a","b","c"]}`), &f) {
		t.Fatal("not decoded")
	}
	if !decodeFast([]byte(`{"user_id":"u2","topics":["d"]}`), &f) {
		t.Fatal("not decoded")
	}
	for i, s := range f.topics[len(f.topics):cap(f.topics)] {
		if s != "" {
			t.Fatalf("topics[%d] beyond the line's still holds %q", len(f.topics)+i, s)
		}
	}
}

// importLines runs an importReader over body (NDJSON, or CSV) and returns
// its rows, or the first error.
func importLines(t *testing.T, ndjson bool, body string) ([]store.ImportRow, error) {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "spool")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	spool := newImportSpool(f)
	spool.fill(strings.NewReader(body))
	ir := &importReader{spool: spool, ndjson: ndjson, maxTokens: 10}
	if err := ir.Rewind(); err != nil {
		t.Fatal(err)
	}
	var rows []store.ImportRow
	for {
		row, err := ir.Next()
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
		if err != nil {
			return rows, err
		}
		rows = append(rows, row)
	}
}

// wantLineError fails unless err is an import line error naming line and a
// field starting with field, its message containing msg.
func wantLineError(t *testing.T, what string, err error, line int64, field, msg string) {
	t.Helper()
	var le *importLineError
	if !errors.As(err, &le) {
		t.Fatalf("%s: want a line error, got %v", what, err)
	}
	if le.line != line || !strings.HasPrefix(le.field, field) || !strings.Contains(le.msg, msg) {
		t.Fatalf("%s: want line %d field %s… (%q), got line %d field %q: %s", what, line, field, msg, le.line, le.field, le.msg)
	}
}

// TestImportRefusesLoneSurrogates: an unpaired UTF-16 surrogate escape, which
// encoding/json would silently turn into U+FFFD ("\ud800" and "\udc00" would
// be one user), is refused wherever it is, naming the line and field, as PUT
// /v1/users/{id} and PUT …/preferences refuse it; so is a NUL character in a
// preferences key or string, which PostgreSQL's jsonb refuses mid-COPY. A
// proper pair, and an escaped U+FFFD, are taken.
func TestImportRefusesLoneSurrogates(t *testing.T) {
	const surrogate = "unpaired UTF-16 surrogate"
	for _, c := range []struct{ line, field, msg string }{
		{`{"user_id":"\ud800"}`, "user_id", surrogate},
		{`{"user_id":"\udc00"}`, "user_id", surrogate},
		{`{"user_id":"u1","name":"a\ud800b"}`, "name", surrogate},
		{`{"user_id":"u1","email":"\ud800@example.com"}`, "email", surrogate},
		{`{"user_id":"u1","topics":["a\udbff"]}`, "topics[0]", surrogate},
		{`{"user_id":"u1","preferences":{"categories":{"x\ud800":{"enabled":false}}}}`, "preferences.categories", surrogate},
		{`{"user_id":"u1","preferences":{"categories":{"\u0000":{"enabled":false}}}}`, "preferences.categories", "NUL"},
		{`{"user_id":"u1","preferences":{"categories":{"a":{"enabled":false}}, "quiet_hours":{"start":"\u0000","end":"07:00"}}}`, "preferences.quiet_hours.start", "NUL"},
	} {
		_, err := importLines(t, true, "{\"user_id\":\"ok\"}\n"+c.line+"\n")
		wantLineError(t, c.line, err, 2, c.field, c.msg)
	}
	for _, c := range []struct{ cell, field, msg string }{
		{`{"categories":{"x\ud800":{"enabled":false}}}`, "preferences.categories", surrogate},
		{`{"categories":{"\u0000":{"enabled":false}}}`, "preferences.categories", "NUL"},
	} {
		csvCell := `"` + strings.ReplaceAll(c.cell, `"`, `""`) + `"`
		_, err := importLines(t, false, "user_id,preferences\nok,\nu1,"+csvCell+"\n")
		wantLineError(t, c.cell, err, 3, c.field, c.msg)
	}
	rows, err := importLines(t, true, `{"user_id":"u1","name":"\ud83d\ude00 \ufffd"}`+"\n")
	if err != nil || len(rows) != 1 || *rows[0].Name != "\U0001F600 \uFFFD" {
		t.Fatalf("a surrogate pair and U+FFFD: %v %+v", err, rows)
	}
}

// TestImportPreferencesNotAmplified: a preference document is re-encoded
// without HTML escaping, so its COPY text stays about the line's size: '<'
// as \u003c, its backslash doubled by COPY, made a line of 200 categories
// named with '<' 6 times larger on its way to PostgreSQL (past the side
// spool's and the wire's bound).
func TestImportPreferencesNotAmplified(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"user_id":"u1","preferences":{"categories":{`)
	for i := range 200 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%03d%s":{}`, i, strings.Repeat("<>&", 20))
	}
	b.WriteString(`}}}`)
	line := b.String()
	rows, err := importLines(t, true, line+"\n")
	if err != nil {
		t.Fatal(err)
	}
	// COPY text doubles each backslash (store.copyTextBytes); the JSON
	// encoding has no raw tab or newline.
	copyText := len(rows[0].Preferences) + strings.Count(string(rows[0].Preferences), `\`)
	if ratio := float64(copyText) / float64(len(line)); ratio > 1.1 {
		t.Fatalf("a %d-byte line's preferences are %d bytes of COPY text (x%.1f)", len(line), copyText, ratio)
	}
}

// TestImportRefusesTrailingData: after a line's object (or a CSV preferences
// cell's), only spaces may follow; json.Decoder.More is false before a '}' or
// ']', which let `{"user_id":"u1"}}` through.
func TestImportRefusesTrailingData(t *testing.T) {
	for _, line := range []string{`{"user_id":"u1"}}`, `{"user_id":"u1"}]garbage`, `{"user_id":"u1","name":"x"} }{"oops"`,
		`{"user_id":"u1","name":"\u00e9"}}`} {
		_, err := importLines(t, true, "{\"user_id\":\"ok\"}\n"+line+"\n")
		wantLineError(t, line, err, 2, "", "one JSON object per line")
	}
	_, err := importLines(t, false, "user_id,preferences\nu1,\"{\"\"channels\"\":{\"\"sms\"\":false}}}]junk\"\n")
	wantLineError(t, "CSV preferences cell", err, 2, "preferences", "preference document")
	rows, err := importLines(t, true, "{\"user_id\":\"u1\",\"name\":\"\\u00e9\"} \t\r\n")
	if err != nil || len(rows) != 1 {
		t.Fatalf("spaces after the object: %v %v", rows, err)
	}
}

// TestDecodeJSONRefusesTrailingData: a PUT body is one JSON object and
// nothing but spaces after it.
func TestDecodeJSONRefusesTrailingData(t *testing.T) {
	for body, ok := range map[string]bool{`{"name":"x"}}`: false, `{"name":"x"} ]junk`: false, `{"name":"x"}{}`: false,
		`{"name":"x"}` + " \n\t": true} {
		w := httptest.NewRecorder()
		c, _ := gin.CreateTestContext(w)
		c.Request = httptest.NewRequest(http.MethodPut, "/", strings.NewReader(body))
		var req putUserRequest
		err := decodeJSON(c, &req)
		var he *httpError
		switch {
		case ok && err != nil:
			t.Fatalf("%q: %v", body, err)
		case !ok && (!errors.As(err, &he) || he.Code != "malformed_json" || he.Status != http.StatusBadRequest):
			t.Fatalf("%q: want 400 malformed_json, got %v", body, err)
		}
	}
}

// TestImportBlankLines: a blank line (spaces, tabs, a \r) is skipped; a line
// of other Unicode or ASCII spaces (U+00A0, U+0085, \f, \v), which
// bytes.TrimSpace would have taken for blank, is a bad line.
func TestImportBlankLines(t *testing.T) {
	rows, err := importLines(t, true, "{\"user_id\":\"u1\"}\n \t\r\n\n{\"user_id\":\"u2\"}\r\n")
	if err != nil || len(rows) != 2 {
		t.Fatalf("blank lines: %v %v", rows, err)
	}
	for _, blank := range []string{"\u00a0", "\u0085", "\f", "\v", " \u00a0\t"} {
		_, err := importLines(t, true, "{\"user_id\":\"u1\"}\n"+blank+"\n{\"user_id\":\"u2\"}\n")
		wantLineError(t, fmt.Sprintf("%q", blank), err, 2, "", "")
		_, err = importLines(t, false, "user_id\nu1\n"+blank+"\nu2\n")
		wantLineError(t, fmt.Sprintf("CSV %q", blank), err, 3, "", "")
	}
}

// TestImportCSVByteOrderMark: a CSV file starting with a UTF-8 byte order
// mark (Excel's "CSV UTF-8") is read as without it; a second one, or one
// elsewhere, is not taken away.
func TestImportCSVByteOrderMark(t *testing.T) {
	rows, err := importLines(t, false, "\ufeffuser_id,name\r\nu1,Ada\r\n")
	if err != nil || len(rows) != 1 || rows[0].UserID != "u1" || *rows[0].Name != "Ada" {
		t.Fatalf("CSV with a BOM: %v %+v", err, rows)
	}
	_, err = importLines(t, false, "\ufeff\ufeffuser_id\nu1\n")
	wantLineError(t, "two BOMs", err, 1, "\ufeffuser_id", "unknown column")
	if rows, err = importLines(t, false, "user_id\n\ufeffu1\n"); err == nil && (len(rows) != 1 || rows[0].UserID != "\ufeffu1") {
		t.Fatalf("a BOM on line 2 is taken away: %+v", rows)
	}
}

// TestImportCSVQuotedNewline: a quoted CSV field holding a line break is
// refused (one record per line; docs/api.md says so and shows the error).
func TestImportCSVQuotedNewline(t *testing.T) {
	_, err := importLines(t, false, "user_id,name\nu1,\"Doe\nJane\"\n")
	wantLineError(t, "a quoted newline", err, 2, "", "not a CSV record: column 8: extraneous or missing \" in quoted-field (one record per line")
}
