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
	"strings"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
)

// List upload bounds: a line (one recipient with their data) is at most
// maxListLineBytes; the list itself is unbounded (it streams into PostgreSQL).
const (
	maxListLineBytes = 16 << 10
	maxListNameBytes = 200
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
		if err := dec.Decode(&rec); err != nil || dec.More() {
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

// createList uploads a recipient list, streamed into PostgreSQL (COPY):
// Content-Type text/csv or application/x-ndjson, ?name= optional. 201 with the
// summary (lines, members, unknown users); a bad line is a 400 naming it and
// stores nothing.
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
	src := &lineReader{r: bufio.NewReaderSize(c.Request.Body, maxListLineBytes), ndjson: mt == contentTypeNDJSON}
	l, err := h.store.UploadList(c.Request.Context(), tenantOf(c).ID, id, name, src)
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
	limit, verr := pageLimit(c)
	var cur pageCursor
	if verr == nil {
		cur, _, verr = readPageCursor(c, "topic_subscribers")
	}
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
