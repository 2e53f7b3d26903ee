package api

import (
	"encoding/base64"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/internal/store"
)

// Inbox page sizes.
const (
	DefaultInboxLimit = 20
	MaxInboxLimit     = 100
)

// listInbox pages a user's inbox newest first with an opaque keyset cursor, with
// the user's counts. Filters: read, seen, archived (default false: the feed;
// true: the archive) and category.
func (s *Server) listInbox(c *gin.Context) {
	tenantID, userID, ok := s.knownUser(c)
	if !ok {
		return
	}
	q := store.InboxQuery{TenantID: tenantID, UserID: userID, Limit: DefaultInboxLimit}
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxInboxLimit {
			s.abort(c, badField("limit", "invalid_field", "limit must be an integer from 1 to %d", MaxInboxLimit))
			return
		}
		q.Limit = n
	}
	for _, f := range []struct {
		name string
		dst  **bool
		not  bool
	}{{"read", &q.Read, false}, {"unread", &q.Read, true}, {"seen", &q.Seen, false}, {"archived", &q.Archived, false}} {
		v := c.Query(f.name)
		if v == "" {
			continue
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			s.abort(c, badField(f.name, "invalid_field", "%s must be true or false", f.name))
			return
		}
		if f.not {
			b = !b
		}
		if *f.dst != nil && **f.dst != b {
			s.abort(c, badField(f.name, "invalid_field", "read and unread contradict each other"))
			return
		}
		*f.dst = &b
	}
	if v, ok := c.GetQuery("category"); ok {
		if len(v) > 128 {
			s.abort(c, badField("category", "invalid_field", "category must be at most 128 bytes"))
			return
		}
		q.Category = &v
	}
	if v := c.Query("cursor"); v != "" {
		cur, err := decodeCursor(v)
		if err != nil {
			s.abort(c, badField("cursor", "invalid_field", "cursor is not one this API returned"))
			return
		}
		q.After = &cur
	}
	items, more, err := s.store.ListInbox(c.Request.Context(), q)
	if err != nil {
		s.abort(c, err)
		return
	}
	counts, _, err := s.store.GetInboxCounts(c.Request.Context(), tenantID, userID)
	if err != nil {
		s.abort(c, err)
		return
	}
	if items == nil {
		items = []store.InboxItem{}
	}
	var next *string
	if more {
		last := items[len(items)-1]
		cur := encodeCursor(store.InboxCursor{CreatedAt: last.CreatedAt, NotificationID: last.NotificationID})
		next = &cur
	}
	c.JSON(http.StatusOK, gin.H{"items": items, "next_cursor": next, "counts": counts})
}

// getInboxCounts is GET /v1/users/{user_id}/inbox/counts.
func (s *Server) getInboxCounts(c *gin.Context) {
	tenantID, userID, ok := s.knownUser(c)
	if !ok {
		return
	}
	counts, _, err := s.store.GetInboxCounts(c.Request.Context(), tenantID, userID)
	if err != nil {
		s.abort(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"counts": counts})
}

// inboxAction is POST /v1/users/{user_id}/inbox/{notification_id}/{action}
// (herald.InboxActions): the item as it now is. The read answer keeps its
// original shape (the item's fields at the top level) and adds counts.
func (s *Server) inboxAction(c *gin.Context) {
	tenantID, userID, ok := s.knownUser(c)
	if !ok {
		return
	}
	action := c.Param("action")
	if !slices.Contains(herald.InboxActions, action) {
		s.abort(c, notFound("route"))
		return
	}
	id := c.Param("notification_id")
	if _, _, err := ids.ParseNotificationID(id); err != nil {
		s.abort(c, badField("notification_id", "invalid_field", "notification_id is not a Herald notification id"))
		return
	}
	it, counts, err := s.store.UpdateInboxItem(c.Request.Context(), tenantID, userID, id, action)
	if errors.Is(err, herald.ErrNotFound) {
		s.abort(c, notFound("inbox item"))
		return
	}
	if err != nil {
		s.abort(c, err)
		return
	}
	c.JSON(http.StatusOK, struct {
		store.InboxItem
		Counts store.InboxCounts `json:"counts"`
	}{it, counts})
}

// markAll is POST /v1/users/{user_id}/inbox/read-all and .../seen-all.
func (s *Server) markAll(read bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		tenantID, userID, ok := s.knownUser(c)
		if !ok {
			return
		}
		counts, changed, err := s.store.MarkAllInbox(c.Request.Context(), tenantID, userID, read)
		if err != nil {
			s.abort(c, err)
			return
		}
		c.JSON(http.StatusOK, gin.H{"changed": changed, "counts": counts})
	}
}

// knownUser validates the path's user_id and answers 404 for a user the tenant does
// not have (another tenant's user looks exactly like a missing one).
func (s *Server) knownUser(c *gin.Context) (tenantID, userID string, ok bool) {
	userID = c.Param("user_id")
	if err := validID("user_id", userID); err != nil {
		s.abort(c, err)
		return "", "", false
	}
	tenantID = tenantOf(c).ID
	if sub, ok := tokenUser(c); ok && sub != userID {
		// A user token opens its own user's inbox only; another user's looks
		// exactly like a missing one.
		s.abort(c, notFound("user"))
		return "", "", false
	}
	exists, err := s.userExists(c, tenantID, userID)
	if err != nil {
		s.abort(c, err)
		return "", "", false
	}
	if !exists {
		s.abort(c, notFound("user"))
		return "", "", false
	}
	return tenantID, userID, true
}

func encodeCursor(c store.InboxCursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.CreatedAt.UnixMicro(), 10) + ":" + c.NotificationID))
}

func decodeCursor(s string) (store.InboxCursor, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return store.InboxCursor{}, err
	}
	ts, id, ok := strings.Cut(string(raw), ":")
	if !ok {
		return store.InboxCursor{}, errors.New("no separator")
	}
	us, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return store.InboxCursor{}, err
	}
	if _, _, err := ids.ParseNotificationID(id); err != nil {
		return store.InboxCursor{}, err
	}
	return store.InboxCursor{CreatedAt: time.UnixMicro(us), NotificationID: id}, nil
}
