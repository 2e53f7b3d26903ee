package api

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/internal/jsondecode"
	"github.com/herald-notify/herald/internal/preferences"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/providers"
)

// Bulk user import: POST /v1/users/import (docs/api.md, "Bulk user import").
//
// The body (NDJSON or CSV by Content-Type) is spooled to a file as it arrives
// (memory stays bounded whatever the file's size) and read back while it is
// being written (user_import_spool.go: a client that does not keep up holds a
// file, not a database connection). A body over the tenant's MaxListBytes
// (HERALD_LIST_MAX_BYTES, or the operator's max_list_bytes for it) answers 413.
// An import takes one of the tenant's upload slots, shared with list uploads
// (the disk they spool to is shared). store.ImportUsers reads the spool
// through an importReader, which validates each line as PUT /v1/users/{id} and
// PUT …/preferences would validate it while PostgreSQL COPYs the lines before
// it, all in one transaction: the first bad line answers 400 naming it (line
// number and field) and nothing is stored.

// Bounds of one import line.
const (
	maxImportLineBytes = 64 << 10
	maxImportTopics    = 100
)

// importLineError is a bad line: 400 invalid_line naming the line and field.
type importLineError struct {
	line  int64
	field string
	msg   string
}

func (e *importLineError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.msg) }

func (e *importLineError) httpError() *httpError {
	field := fmt.Sprintf("line %d", e.line)
	if e.field != "" {
		field += "." + e.field
	}
	return &httpError{Status: http.StatusBadRequest, Code: "invalid_line", Field: field,
		Message: fmt.Sprintf("line %d: %s", e.line, e.msg)}
}

// importLine is one NDJSON line.
type importLine struct {
	UserID      *string         `json:"user_id"`
	Name        *string         `json:"name"`
	Email       *string         `json:"email"`
	Phone       *string         `json:"phone"`
	Locale      *string         `json:"locale"`
	Timezone    *string         `json:"timezone"`
	Preferences json.RawMessage `json:"preferences"`
	Topics      []string        `json:"topics"`
	PushTokens  []struct {
		Token    *string `json:"token"`
		Platform *string `json:"platform"`
	} `json:"push_tokens"`
}

// importColumns are the CSV columns an import's header may name.
var importCSVColumns = map[string]bool{"user_id": true, "name": true, "email": true, "phone": true, "locale": true,
	"timezone": true, "preferences": true, "topics": true, "push_token": true, "push_platform": true}

// importReader reads and validates an import's lines from the spooled body:
// the store.ImportSource of store.ImportUsers.
type importReader struct {
	spool *importSpool
	// wait is what is left of the attempt's allowance for waiting on the body
	// (spoolReader).
	wait      time.Duration
	r         *bufio.Reader
	ndjson    bool
	maxTokens int
	header    []string
	line      int64
	// locales and zones cache the locales and time zones already validated: a
	// million lines name a few dozen, and time.LoadLocation reads the zone
	// database each time (40% of an import's CPU without the cache).
	locales, zones map[string]struct{}
	// fast is the line the fast path decoded (user_import_json.go).
	fast importFast
}

// maxValidCache bounds importReader.locales and .zones.
const maxValidCache = 4096

// Rewind reads the spool again from its first line.
func (ir *importReader) Rewind() error {
	sr := &spoolReader{s: ir.spool, wait: &ir.wait}
	if ir.r == nil {
		ir.r = bufio.NewReaderSize(sr, maxImportLineBytes)
	} else {
		ir.r.Reset(sr)
	}
	ir.header, ir.line = nil, 0
	return nil
}

// Next returns the next row; io.EOF at the end; an *importLineError for a bad
// line.
func (ir *importReader) Next() (store.ImportRow, error) {
	for {
		raw, err := ir.r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			ir.line++
			return store.ImportRow{}, ir.bad("", "longer than %d bytes", maxImportLineBytes)
		}
		if len(raw) == 0 && err != nil {
			return store.ImportRow{}, err
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return store.ImportRow{}, err
		}
		ir.line++
		line := bytes.TrimRight(raw, "\r\n")
		// Blank: only spaces, tabs (and the \r of a \r\n). Not
		// bytes.TrimSpace, which also takes U+00A0, U+0085, \f and \v for
		// space: a line of them is not blank, it is refused.
		if len(bytes.Trim(line, " \t\r")) == 0 {
			if err != nil {
				return store.ImportRow{}, io.EOF
			}
			continue
		}
		if !utf8.Valid(line) || bytes.IndexByte(line, 0) >= 0 {
			return store.ImportRow{}, ir.bad("", "not valid UTF-8 text")
		}
		if ir.ndjson {
			return ir.parseJSON(line)
		}
		if ir.header == nil {
			if ir.line == 1 {
				// Excel's "CSV UTF-8" starts with a byte order mark.
				line = bytes.TrimPrefix(line, []byte("\ufeff"))
			}
			if herr := ir.readHeader(line); herr != nil {
				return store.ImportRow{}, herr
			}
			continue
		}
		return ir.parseCSV(line)
	}
}

func (ir *importReader) bad(field, format string, args ...any) error {
	return &importLineError{line: ir.line, field: field, msg: fmt.Sprintf(format, args...)}
}

// badField turns a field's validation error (validEmail, …) into the line's.
func (ir *importReader) badField(field string, e *httpError) error {
	return &importLineError{line: ir.line, field: field, msg: e.Message}
}

func (ir *importReader) parseJSON(line []byte) (store.ImportRow, error) {
	if decodeFast(line, &ir.fast) {
		return ir.fastRow()
	}
	var in importLine
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		e := jsondecode.Explain(err)
		return store.ImportRow{}, ir.bad(e.Field, "%s", e.Message)
	}
	if !jsondecode.OnlySpaceLeft(dec, line) {
		return store.ImportRow{}, ir.bad("", "one JSON object per line")
	}
	// A NUL character or an unpaired surrogate escape (which encoding/json
	// turns into U+FFFD: "\ud800" and "\udc00" would be one user) is refused
	// as PUT refuses it. The fast path takes no line with an escape.
	if e := checkBodyText(line); e != nil {
		return store.ImportRow{}, ir.badField(e.Field, e)
	}
	if in.UserID == nil {
		return store.ImportRow{}, ir.bad("user_id", "user_id is required")
	}
	row := store.ImportRow{UserID: *in.UserID, Name: in.Name, Email: in.Email, Phone: in.Phone, Locale: in.Locale, Timezone: in.Timezone}
	if err := ir.checkProfile(row); err != nil {
		return row, err
	}
	if p := bytes.TrimSpace(in.Preferences); len(p) > 0 && string(p) != "null" {
		var err error
		if row.Preferences, err = ir.checkPreferences(p); err != nil {
			return row, err
		}
	}
	if in.Topics != nil {
		row.Topics = in.Topics
		if err := ir.checkTopics(row.Topics); err != nil {
			return row, err
		}
	}
	if in.PushTokens != nil {
		if len(in.PushTokens) > ir.maxTokens {
			return row, ir.bad("push_tokens", "at most %d push tokens per user", ir.maxTokens)
		}
		row.PushTokens = make([]store.ImportPushToken, 0, len(in.PushTokens))
		for i, t := range in.PushTokens {
			var tok, plat string
			if t.Token != nil {
				tok = *t.Token
			}
			if t.Platform != nil {
				plat = *t.Platform
			}
			pt, err := ir.checkPushToken(fmt.Sprintf("push_tokens[%d]", i), tok, plat)
			if err != nil {
				return row, err
			}
			row.PushTokens = append(row.PushTokens, pt)
		}
	}
	return row, nil
}

// fastRow validates the line decodeFast decoded into ir.fast.
func (ir *importReader) fastRow() (store.ImportRow, error) {
	f := &ir.fast
	field := func(k int) *string {
		if f.set[k] {
			return &f.profile[k]
		}
		return nil
	}
	row := store.ImportRow{UserID: f.profile[fieldUserID], Name: field(fieldName), Email: field(fieldEmail),
		Phone: field(fieldPhone), Locale: field(fieldLocale), Timezone: field(fieldTimezone)}
	if err := ir.checkProfile(row); err != nil {
		return row, err
	}
	if f.preferences != nil {
		var err error
		if row.Preferences, err = ir.checkPreferences(f.preferences); err != nil {
			return row, err
		}
	}
	if f.hasTopics {
		row.Topics = f.topics
		if row.Topics == nil {
			row.Topics = []string{}
		}
		if err := ir.checkTopics(row.Topics); err != nil {
			return row, err
		}
	}
	return row, nil
}

func (ir *importReader) readHeader(line []byte) error {
	rec, err := csv.NewReader(bytes.NewReader(line)).Read()
	if err != nil {
		return ir.bad("", "%s", csvRecordError(err))
	}
	seen := map[string]bool{}
	for i, h := range rec {
		h = strings.TrimSpace(h)
		rec[i] = h
		if !importCSVColumns[h] {
			return ir.bad(h, "unknown column %q; the columns are user_id, name, email, phone, locale, timezone, preferences, topics, push_token, push_platform", h)
		}
		if seen[h] {
			return ir.bad(h, "column %q is named twice", h)
		}
		seen[h] = true
	}
	switch {
	case !seen["user_id"]:
		return ir.bad("user_id", "the header must name a user_id column")
	case seen["push_token"] != seen["push_platform"]:
		return ir.bad("push_token", "push_token and push_platform go together")
	}
	ir.header = rec
	return nil
}

// csvRecordError says why a line is not a CSV record. A CSV record is one
// line: a quoted field cannot hold a line break (docs/api.md).
func csvRecordError(err error) string {
	var pe *csv.ParseError
	if !errors.As(err, &pe) {
		return "not a CSV record: " + err.Error()
	}
	msg := fmt.Sprintf("not a CSV record: column %d: %v", pe.Column, pe.Err)
	if errors.Is(pe.Err, csv.ErrQuote) {
		msg += " (one record per line: a quoted field cannot hold a line break)"
	}
	return msg
}

func (ir *importReader) parseCSV(line []byte) (store.ImportRow, error) {
	rec, err := csv.NewReader(bytes.NewReader(line)).Read()
	if err != nil {
		return store.ImportRow{}, ir.bad("", "%s", csvRecordError(err))
	}
	if len(rec) != len(ir.header) {
		return store.ImportRow{}, ir.bad("", "has %d fields; the header has %d", len(rec), len(ir.header))
	}
	var row store.ImportRow
	var token, platform string
	for i, col := range ir.header {
		v := rec[i]
		val := &v
		if v == "" {
			val = nil // an empty cell is an absent field
		}
		switch col {
		case "user_id":
			row.UserID = v
		case "name":
			row.Name = val
		case "email":
			row.Email = val
		case "phone":
			row.Phone = val
		case "locale":
			row.Locale = val
		case "timezone":
			row.Timezone = val
		case "preferences":
			if val != nil {
				if row.Preferences, err = ir.checkPreferences([]byte(v)); err != nil {
					return row, err
				}
			}
		case "topics":
			if val != nil {
				row.Topics = strings.Split(v, ";")
				if err := ir.checkTopics(row.Topics); err != nil {
					return row, err
				}
			}
		case "push_token":
			token = v
		case "push_platform":
			platform = v
		}
	}
	if err := ir.checkProfile(row); err != nil {
		return row, err
	}
	if token != "" || platform != "" {
		pt, err := ir.checkPushToken("push_token", token, platform)
		if err != nil {
			return row, err
		}
		row.PushTokens = []store.ImportPushToken{pt}
	}
	return row, nil
}

// checkProfile validates the profile fields as PUT /v1/users/{id} does.
func (ir *importReader) checkProfile(r store.ImportRow) error {
	if e := validID("user_id", r.UserID); e != nil {
		return ir.badField("user_id", e)
	}
	req := putUserRequest{Name: r.Name, Email: r.Email, Phone: r.Phone, Locale: r.Locale, Timezone: r.Timezone}
	// Locales and zones seen before are known to be valid.
	if r.Locale != nil {
		if _, ok := ir.locales[*r.Locale]; ok {
			req.Locale = nil
		}
	}
	if r.Timezone != nil {
		if _, ok := ir.zones[*r.Timezone]; ok {
			req.Timezone = nil
		}
	}
	if e := req.validate(); e != nil {
		return ir.badField(e.Field, e)
	}
	if req.Locale != nil && len(ir.locales) < maxValidCache {
		if ir.locales == nil {
			ir.locales = map[string]struct{}{}
		}
		// A copy: the fast decoder's strings are slices of the whole line.
		ir.locales[strings.Clone(*req.Locale)] = struct{}{}
	}
	if req.Timezone != nil && len(ir.zones) < maxValidCache {
		if ir.zones == nil {
			ir.zones = map[string]struct{}{}
		}
		ir.zones[strings.Clone(*req.Timezone)] = struct{}{}
	}
	for _, f := range []*string{r.Name, r.Email, r.Phone, r.Locale, r.Timezone} {
		if f != nil && strings.ContainsRune(*f, 0) {
			return ir.bad("", "a field holds a NUL character")
		}
	}
	return nil
}

// checkPreferences decodes and validates a preference document as PUT
// /v1/users/{id}/preferences does and returns it re-encoded.
func (ir *importReader) checkPreferences(raw []byte) ([]byte, error) {
	var p preferences.Preferences
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil || !jsondecode.OnlySpaceLeft(dec, raw) {
		field, msg := "preferences", "preferences must be a preference document (as PUT /v1/users/{id}/preferences takes)"
		if err != nil {
			if e := jsondecode.Explain(err); e.Field != "" {
				field, msg = "preferences."+e.Field, e.Message
			}
		}
		return nil, ir.bad(field, "%s", msg)
	}
	// What PUT …/preferences refuses in a string or key (checkBodyText): a
	// NUL character (PostgreSQL's jsonb refuses it, mid-COPY) or an unpaired
	// surrogate escape (silently U+FFFD).
	if e := checkBodyText(raw); e != nil {
		return nil, ir.badField(strings.TrimSuffix("preferences."+e.Field, "."), e)
	}
	if errs := p.Validate(); len(errs) > 0 {
		return nil, ir.bad("preferences."+errs[0].Field, "%s", errs[0].Error())
	}
	// Without HTML escaping: json.Marshal writes '<' as \u003c, whose
	// backslash COPY text doubles, 7 bytes for one (a line grew 6 times).
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}

func (ir *importReader) checkTopics(topics []string) error {
	if len(topics) > maxImportTopics {
		return ir.bad("topics", "at most %d topics per user", maxImportTopics)
	}
	for i, t := range topics {
		if validTopic("topic", t) != nil {
			field := fmt.Sprintf("topics[%d]", i)
			return ir.badField(field, validTopic(field, t))
		}
	}
	return nil
}

func (ir *importReader) checkPushToken(field, token, platform string) (store.ImportPushToken, error) {
	if e := validPushToken(field+".token", token); e != nil {
		return store.ImportPushToken{}, ir.badField(field+".token", e)
	}
	switch platform {
	case providers.PlatformAndroid, providers.PlatformIOS, providers.PlatformWeb:
	default:
		return store.ImportPushToken{}, ir.bad(field+".platform", "platform must be android, ios or web")
	}
	return store.ImportPushToken{Token: token, Platform: platform}, nil
}

// importUsers is POST /v1/users/import: 200 with the counts.
func (h *usersRoom) importUsers(c *gin.Context) {
	mt, _, _ := mime.ParseMediaType(c.GetHeader("Content-Type"))
	if mt != contentTypeCSV && mt != contentTypeNDJSON {
		h.abort(c, &httpError{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type",
			Message: "import users as application/x-ndjson (one {\"user_id\": ...} per line) or text/csv (a header with user_id)"})
		return
	}
	tenantID := tenantOf(c).ID
	limits, err := h.limitsFor(c.Request.Context(), tenantID)
	if err != nil {
		h.abort(c, err)
		return
	}
	maxBytes := limits.MaxListBytes
	tooBig := uploadTooLarge("an import", maxBytes)
	if c.Request.ContentLength > maxBytes {
		h.abort(c, tooBig)
		return
	}
	if !h.uploads.take(tenantID) {
		h.abort(c, tooManyUploads(c))
		return
	}
	defer h.uploads.give(tenantID)
	extendUploadDeadlines(c, maxBytes)
	f, err := os.CreateTemp("", "herald-user-import-*")
	if err != nil {
		h.abort(c, err)
		return
	}
	defer func() {
		_ = f.Close()
		_ = os.Remove(f.Name())
	}()
	maxTokens := h.pushTokensPerUser
	if maxTokens <= 0 {
		maxTokens = providers.DefaultPushTokensPerUser
	}
	// The body goes to the spool as it comes, read by the import at the same
	// time; the handler returns only once the body has been read to its end.
	spool := newImportSpool(f)
	filled := make(chan struct{})
	go func() {
		defer close(filled)
		spool.fill(http.MaxBytesReader(c.Writer, c.Request.Body, maxBytes))
	}()
	defer func() {
		spool.discard.Store(true)
		<-filled
	}()
	spool.waitFor(importStartBytes)
	res, err := h.importFrom(c, tenantID, spool, maxTokens, importMaxWait)
	if errors.Is(err, errSlowUpload) {
		// The client did not keep up: the attempt was rolled back; the import
		// starts again once the whole body is on disk.
		if spool.ended() == nil {
			res, err = h.importFrom(c, tenantID, spool, maxTokens, 0)
		}
	}
	if err != nil {
		// What is wrong with the body itself (too large, unreadable) comes
		// first, as when the body was read to its end before the import.
		spool.discard.Store(true)
		if uerr := spool.ended(); uerr != nil {
			var mbe *http.MaxBytesError
			if errors.As(uerr, &mbe) {
				h.abort(c, tooBig)
				return
			}
			h.abort(c, &httpError{Status: http.StatusBadRequest, Code: "unreadable_body", Message: "could not read request body"})
			return
		}
	}
	var bad *importLineError
	switch {
	case errors.As(err, &bad):
		h.abort(c, bad.httpError())
		return
	case err != nil:
		h.abort(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"lines": res.Lines, "users": res.Users, "created": res.Created, "updated": res.Updated, "unchanged": res.Unchanged})
}

// An upload's deadlines: the server's ReadTimeout and WriteTimeout (30 s and
// 60 s, counted from the request's headers) would cut a large body, or an
// import that commits but cannot answer. A request whose body may be up to
// maxBytes gets instead the time to send them at minUploadRate plus
// uploadDeadlineMargin (a body of 256 MiB: 5 min 16 s), and as long again to
// be applied and answered: bounded, as the tenant's MaxListBytes is.
const (
	minUploadRate        = 1 << 20 // bytes per second
	uploadDeadlineMargin = time.Minute
)

// extendUploadDeadlines sets the connection's read and write deadlines of an
// upload whose body may be up to maxBytes.
func extendUploadDeadlines(c *gin.Context, maxBytes int64) {
	send := time.Duration(min(max(maxBytes, 0), store.MaxListBytesCap)/minUploadRate)*time.Second + uploadDeadlineMargin
	now := time.Now()
	rc := http.NewResponseController(c.Writer)
	// A writer without deadlines (a test recorder) has nothing to extend.
	_ = rc.SetReadDeadline(now.Add(send))
	_ = rc.SetWriteDeadline(now.Add(2 * send))
}

// importFrom runs one attempt of an import from its spool, waiting for the
// body at most wait in all.
func (h *usersRoom) importFrom(c *gin.Context, tenantID string, spool *importSpool, maxTokens int, wait time.Duration) (store.ImportResult, error) {
	mt, _, _ := mime.ParseMediaType(c.GetHeader("Content-Type"))
	ir := &importReader{spool: spool, wait: wait, ndjson: mt == contentTypeNDJSON, maxTokens: maxTokens}
	if err := ir.Rewind(); err != nil {
		return store.ImportResult{}, err
	}
	return h.store.ImportUsers(c.Request.Context(), tenantID, ir, maxTokens)
}
