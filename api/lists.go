package api

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/jsondecode"
	"github.com/herald-notify/herald/internal/store"
)

// List upload bounds: a line (one recipient with their data) is at most
// maxListLineBytes; the whole body at most the tenant's MaxListBytes
// (DefaultMaxListBytes unless the operator set another).
const (
	maxListLineBytes = 16 << 10
	// DefaultMaxListBytes is HERALD_LIST_MAX_BYTES's default: 256 MiB, about
	// 2.5 million lines of a user id and a few data columns.
	DefaultMaxListBytes = 256 << 20
	// maxUploadsPerTenant bounds one API process's list uploads in progress per
	// tenant, so one tenant cannot fill the process's disk with spool files
	// (at most this many times its MaxListBytes).
	maxUploadsPerTenant = 4
	maxListNameBytes    = 200
	// maxTopicBatch bounds the user ids of one POST /v1/topics/{topic}/subscribers.
	maxTopicBatch = 1000
)

// Upload formats.
const (
	contentTypeCSV    = "text/csv"
	contentTypeNDJSON = "application/x-ndjson"
)

// listLineError is a bad line of an upload: 400 naming the line.
type listLineError struct {
	line int64
	msg  string
}

func (e *listLineError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.msg) }

// lineReader streams an upload's members: CSV (a header naming user_id and any
// data columns, each data value a string) or NDJSON ({"user_id": "...",
// "data": {...}} per line). It stops at the first bad line.
type lineReader struct {
	r      *bufio.Reader
	ndjson bool
	header []string
	userAt int
	line   int64
	user   string
	data   json.RawMessage
	err    error
}

func (l *lineReader) Lines() int64 { return l.line }
func (l *lineReader) Err() error   { return l.err }
func (l *lineReader) Member() (string, json.RawMessage) {
	return l.user, l.data
}

func (l *lineReader) fail(format string, args ...any) bool {
	l.err = &listLineError{line: l.line, msg: fmt.Sprintf(format, args...)}
	return false
}

// readLine returns the next non-empty line without its line ending.
func (l *lineReader) readLine() ([]byte, bool) {
	for {
		raw, err := l.r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			l.line++
			l.fail("longer than %d bytes", maxListLineBytes)
			return nil, false
		}
		if len(raw) == 0 && err != nil {
			if !errors.Is(err, io.EOF) {
				l.err = err
			}
			return nil, false
		}
		l.line++
		line := bytes.TrimRight(raw, "\r\n")
		if len(bytes.TrimSpace(line)) == 0 {
			if err != nil {
				return nil, false
			}
			continue
		}
		return line, true
	}
}

func (l *lineReader) Next() bool {
	if l.err != nil {
		return false
	}
	line, ok := l.readLine()
	if !ok {
		return false
	}
	if !utf8.Valid(line) || bytes.IndexByte(line, 0) >= 0 {
		return l.fail("not valid UTF-8 text")
	}
	if l.ndjson {
		var rec struct {
			UserID *string         `json:"user_id"`
			Data   json.RawMessage `json:"data"`
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rec); err != nil || !jsondecode.OnlySpaceLeft(dec, line) {
			return l.fail(`not a JSON object {"user_id": "...", "data": {...}}`)
		}
		if rec.UserID == nil {
			return l.fail("user_id is missing")
		}
		if e := validID("user_id", *rec.UserID); e != nil {
			return l.fail("%s", e.Message)
		}
		l.user, l.data = *rec.UserID, nil
		if d := bytes.TrimSpace(rec.Data); len(d) > 0 && string(d) != "null" {
			if d[0] != '{' {
				return l.fail("data must be an object")
			}
			if _, e := decodeData(d); e != nil {
				return l.fail("%s", e.Message)
			}
			l.data = d
		}
		return true
	}
	rec, err := csv.NewReader(bytes.NewReader(line)).Read()
	if err != nil {
		return l.fail("not a CSV record: %v", err)
	}
	if l.header == nil {
		l.header, l.userAt = rec, -1
		for i, h := range rec {
			if strings.TrimSpace(h) == "user_id" {
				l.userAt = i
			}
		}
		if l.userAt < 0 {
			return l.fail("the header must name a user_id column")
		}
		return l.Next()
	}
	if len(rec) != len(l.header) {
		return l.fail("has %d fields; the header has %d", len(rec), len(l.header))
	}
	l.user = rec[l.userAt]
	if e := validID("user_id", l.user); e != nil {
		return l.fail("%s", e.Message)
	}
	l.data = nil
	if len(rec) > 1 {
		m := make(map[string]string, len(rec)-1)
		for i, v := range rec {
			if i != l.userAt {
				m[strings.TrimSpace(l.header[i])] = v
			}
		}
		l.data, _ = json.Marshal(m)
	}
	return true
}

// createList uploads a recipient list: Content-Type text/csv or
// application/x-ndjson, ?name= optional. 201 with the summary (lines, members,
// unknown users); a bad line is a 400 naming it and stores nothing.
//
// The body is spooled to a temporary file first (at most the tenant's
// MaxListBytes: 413 past it, nothing stored), and only then copied into
// PostgreSQL (COPY) from the file. A client sending slowly holds a goroutine
// and a file, never one of the pool's database connections: streaming the body
// straight into COPY held a connection for as long as the client took, and 20
// slow uploads took every connection of the API's pool
// (TestSlowListUploadsHoldNoConnection).
func (h *campaignsRoom) createList(c *gin.Context) {
	mt, _, _ := mime.ParseMediaType(c.GetHeader("Content-Type"))
	if mt != contentTypeCSV && mt != contentTypeNDJSON {
		h.abort(c, &httpError{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type",
			Message: "upload a list as text/csv (a header with user_id) or application/x-ndjson (one {\"user_id\": ...} per line)"})
		return
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	id := "lst_" + hex.EncodeToString(b[:])
	name := c.Query("name")
	if name == "" {
		name = id
	}
	if len(name) > maxListNameBytes || !utf8.ValidString(name) || strings.ContainsRune(name, 0) {
		h.abort(c, badField("name", "invalid_field", "name must be 1 to %d bytes of UTF-8", maxListNameBytes))
		return
	}
	tenantID := tenantOf(c).ID
	limits, err := h.limitsFor(c.Request.Context(), tenantID)
	if err != nil {
		h.abort(c, err)
		return
	}
	if c.Request.ContentLength > limits.MaxListBytes {
		h.abort(c, listTooLarge(limits.MaxListBytes))
		return
	}
	if !h.uploads.take(tenantID) {
		h.abort(c, tooManyUploads(c))
		return
	}
	defer h.uploads.give(tenantID)
	extendUploadDeadlines(c, limits.MaxListBytes)
	spool, err := spoolUpload(c.Request.Body, limits.MaxListBytes)
	if err != nil {
		h.abort(c, err)
		return
	}
	defer spool.Close() //nolint:errcheck // read only; already unlinked
	src := &lineReader{r: bufio.NewReaderSize(spool, maxListLineBytes), ndjson: mt == contentTypeNDJSON}
	l, err := h.store.UploadList(c.Request.Context(), tenantID, id, name, src)
	var bad *listLineError
	if errors.As(err, &bad) {
		h.abort(c, &httpError{Status: http.StatusBadRequest, Code: "invalid_line", Field: fmt.Sprintf("line %d", bad.line), Message: bad.Error()})
		return
	}
	if err != nil {
		h.abort(c, err)
		return
	}
	c.JSON(http.StatusCreated, viewList(l))
}

// listTooLarge is the 413 of an upload over the tenant's MaxListBytes.
func listTooLarge(max int64) *httpError {
	return uploadTooLarge("a list upload", max)
}

// uploadTooLarge is the 413 of an upload (what: "a list upload", "an import")
// over the tenant's MaxListBytes, which lists and imports share.
func uploadTooLarge(what string, max int64) *httpError {
	return &httpError{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large",
		Message: fmt.Sprintf("%s is at most %d bytes (%d MiB) for this tenant; split the file, or ask the operator", what, max, max>>20)}
}

// tooManyUploads is the 429 of an upload when the tenant's upload slots (lists
// and imports share them) are all taken; it sets Retry-After.
func tooManyUploads(c *gin.Context) *httpError {
	c.Header("Retry-After", "5")
	return &httpError{Status: http.StatusTooManyRequests, Code: "too_many_uploads",
		Message: fmt.Sprintf("%d uploads (lists and imports) of this tenant are in progress; retry when one has finished", maxUploadsPerTenant)}
}

// spoolUpload copies body, at most max bytes, to a temporary file (in
// os.TempDir) and returns it open for reading from the start. The file is
// unlinked at once, so it is gone as soon as it is closed, however the request
// ends. More than max bytes is a 413; a body that cannot be read (the client
// went away) a 400.
func spoolUpload(body io.Reader, max int64) (*os.File, error) {
	f, err := os.CreateTemp("", "herald-list-*")
	if err != nil {
		return nil, fmt.Errorf("spool file: %w", err)
	}
	_ = os.Remove(f.Name())
	n, err := io.Copy(f, io.LimitReader(body, max+1))
	switch {
	case err != nil:
		_ = f.Close()
		return nil, &httpError{Status: http.StatusBadRequest, Code: "unreadable_body", Message: "could not read the request body"}
	case n > max:
		_ = f.Close()
		return nil, listTooLarge(max)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("spool file: %w", err)
	}
	return f, nil
}

// uploadSlots counts one process's list uploads in progress per tenant.
type uploadSlots struct {
	mu sync.Mutex
	n  map[string]int
}

// take claims one of the tenant's maxUploadsPerTenant slots (false: none free).
func (u *uploadSlots) take(tenantID string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.n == nil {
		u.n = map[string]int{}
	}
	if u.n[tenantID] >= maxUploadsPerTenant {
		return false
	}
	u.n[tenantID]++
	return true
}

func (u *uploadSlots) give(tenantID string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.n[tenantID]--; u.n[tenantID] <= 0 {
		delete(u.n, tenantID)
	}
}

func viewList(l store.RecipientList) gin.H {
	sample := l.UnknownSample
	if sample == nil {
		sample = []string{}
	}
	return gin.H{"list_id": l.ID, "name": l.Name, "lines": l.LineCount, "members": l.MemberCount,
		"unknown_users": l.UnknownCount, "unknown_sample": sample, "created_at": l.CreatedAt.UTC()}
}

func (h *campaignsRoom) getList(c *gin.Context) {
	l, err := h.store.GetList(c.Request.Context(), tenantOf(c).ID, c.Param("list_id"))
	if errors.Is(err, herald.ErrNotFound) || (err == nil && l.Kind != herald.ListUploaded) {
		h.abort(c, notFound("list"))
		return
	}
	if err != nil {
		h.abort(c, err)
		return
	}
	c.JSON(http.StatusOK, viewList(l))
}

func (h *campaignsRoom) deleteList(c *gin.Context) {
	ok, err := h.store.DeleteList(c.Request.Context(), tenantOf(c).ID, c.Param("list_id"))
	if err != nil {
		h.abort(c, err)
		return
	}
	if !ok {
		h.abort(c, notFound("list"))
		return
	}
	c.Status(http.StatusNoContent)
}

// validTopic checks a topic name (an id: no whitespace, control characters or '/').
func validTopic(field, v string) *httpError { return validID(field, v) }

type topicSubscribersRequest struct {
	UserIDs []string `json:"user_ids"`
}

// addTopicSubscribers subscribes up to maxTopicBatch users (the topic is created
// on first use); ids that name no user are reported, not subscribed.
func (h *campaignsRoom) addTopicSubscribers(c *gin.Context) {
	topic := c.Param("topic")
	if err := validTopic("topic", topic); err != nil {
		h.abort(c, err)
		return
	}
	var req topicSubscribersRequest
	if err := decodeJSONLimit(c, &req, 512<<10); err != nil {
		h.abort(c, err)
		return
	}
	switch {
	case len(req.UserIDs) == 0:
		h.abort(c, badField("user_ids", "missing_field", "user_ids must name at least one user"))
		return
	case len(req.UserIDs) > maxTopicBatch:
		h.abort(c, badField("user_ids", "invalid_field", "at most %d user_ids per request", maxTopicBatch))
		return
	}
	for i, u := range req.UserIDs {
		if err := validID("user_ids["+itoa(i)+"]", u); err != nil {
			h.abort(c, err)
			return
		}
	}
	added, unknown, err := h.store.AddTopicSubscribers(c.Request.Context(), tenantOf(c).ID, topic, req.UserIDs)
	if err != nil {
		h.abort(c, err)
		return
	}
	if unknown == nil {
		unknown = []string{}
	}
	c.JSON(http.StatusOK, gin.H{"topic": topic, "added": added, "unknown_users": unknown})
}

func (h *campaignsRoom) removeTopicSubscriber(c *gin.Context) {
	ok, err := h.store.RemoveTopicSubscriber(c.Request.Context(), tenantOf(c).ID, c.Param("topic"), c.Param("user_id"))
	if err != nil {
		h.abort(c, err)
		return
	}
	if !ok {
		h.abort(c, notFound("subscription"))
		return
	}
	c.Status(http.StatusNoContent)
}

// listTopicSubscribers pages a topic's subscribers by user id (?limit, ?cursor).
func (h *campaignsRoom) listTopicSubscribers(c *gin.Context) {
	limit, cur, _, verr := pageRequest(c, "topic_subscribers")
	if verr != nil {
		h.abort(c, verr)
		return
	}
	tenantID, topic := tenantOf(c).ID, c.Param("topic")
	if _, err := h.store.CountTopicSubscribers(c.Request.Context(), tenantID, topic); errors.Is(err, herald.ErrNotFound) {
		h.abort(c, notFound("topic"))
		return
	} else if err != nil {
		h.abort(c, err)
		return
	}
	subs, more, err := h.store.ListTopicSubscribers(c.Request.Context(), tenantID, topic, cur.Key, limit)
	if err != nil {
		h.abort(c, err)
		return
	}
	if subs == nil {
		subs = []store.TopicSubscriber{}
	}
	var next *string
	if more {
		next = encodePageCursor(pageCursor{List: "topic_subscribers", Key: subs[len(subs)-1].UserID})
	}
	c.JSON(http.StatusOK, gin.H{"items": subs, "next_cursor": next})
}
