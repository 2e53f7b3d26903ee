package api

import (
	"encoding/base64"
	"encoding/json"
	"strconv"

	"github.com/gin-gonic/gin"
)

// Page sizes of the keyset-paginated lists (templates, dead letters, push tokens).
// The inbox keeps its own (defaultInboxLimit, maxInboxLimit).
const (
	defaultPageLimit = 50
	maxPageLimit     = 200
)

// maxCursorBytes bounds a cursor query value (a push token cursor carries the
// token, up to maxPushTokenBytes).
const maxCursorBytes = 8 << 10

// pageLimit reads ?limit= (defaultPageLimit when absent): 400 naming limit unless it
// is an integer from 1 to maxPageLimit.
func pageLimit(c *gin.Context) (int, *httpError) {
	v, ok := c.GetQuery("limit")
	if !ok {
		return defaultPageLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxPageLimit {
		return 0, badField("limit", "invalid_field", "limit must be an integer from 1 to %d", maxPageLimit)
	}
	return n, nil
}

// pageCursor is what an opaque cursor holds: the list it belongs to and the keyset
// position of the last item of the page before. Clients must not look inside; a
// tenant that crafts one only moves within its own rows (every query filters by
// tenant), so it is not signed.
type pageCursor struct {
	List string `json:"l"`
	// The position: a time (Unix microseconds, PostgreSQL's resolution), an id
	// and/or a key, as the list needs.
	At  int64  `json:"t,omitempty"`
	ID  int64  `json:"i,omitempty"`
	Key string `json:"k,omitempty"`
}

// onePage cuts rows read with limit+1 to the page: the extra row only says that
// another page follows, and the cursor to it is taken from the page's last row.
// A page is never null in JSON: no rows is [].
func onePage[T any](rows []T, limit int, cursorOf func(last T) pageCursor) ([]T, *string) {
	if len(rows) <= limit {
		if rows == nil {
			rows = []T{}
		}
		return rows, nil
	}
	rows = rows[:limit]
	return rows, encodePageCursor(cursorOf(rows[limit-1]))
}

func encodePageCursor(p pageCursor) *string {
	raw, _ := json.Marshal(p) // a struct of strings and integers always encodes
	s := base64.RawURLEncoding.EncodeToString(raw)
	return &s
}

// pageRequest reads a list's ?limit= and ?cursor= (ok: a cursor was given);
// the error names the first field that is wrong.
func pageRequest(c *gin.Context, list string) (limit int, cur pageCursor, ok bool, e *httpError) {
	if limit, e = pageLimit(c); e != nil {
		return 0, cur, false, e
	}
	cur, ok, e = readPageCursor(c, list)
	return limit, cur, ok, e
}

// badCursor answers a cursor no list returned.
func badCursor() *httpError {
	return badField("cursor", "invalid_field", "cursor is not one this list returned; pass next_cursor of the previous page unchanged")
}

// readPageCursor reads ?cursor= for the named list: ok false and no error when
// absent; 400 naming cursor when it is not one this list returned.
func readPageCursor(c *gin.Context, list string) (p pageCursor, ok bool, e *httpError) {
	v, present := c.GetQuery("cursor")
	if !present {
		return p, false, nil
	}
	bad := badCursor()
	if v == "" || len(v) > maxCursorBytes {
		return p, false, bad
	}
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || json.Unmarshal(raw, &p) != nil || p.List != list {
		return p, false, bad
	}
	return p, true, nil
}
