package api

import (
	"encoding/base64"
	"errors"
	"net/http"
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

// listInbox pages a user's inbox newest first with an opaque keyset cursor.
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
	if v := c.Query("unread"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			s.abort(c, badField("unread", "invalid_field", "unread must be true or false"))
			return
		}
		q.UnreadOnly = b
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
	if items == nil {
		items = []store.InboxItem{}
	}
	var next *string
	if more {
		last := items[len(items)-1]
		cur := encodeCursor(store.InboxCursor{CreatedAt: last.CreatedAt, NotificationID: last.NotificationID})
		next = &cur
	}
	c.JSON(http.StatusOK, gin.H{"items": items, "next_cursor": next})
}

func (s *Server) markRead(c *gin.Context) {
	tenantID, userID, ok := s.knownUser(c)
	if !ok {
		return
	}
	id := c.Param("notification_id")
	if _, _, err := ids.ParseNotificationID(id); err != nil {
		s.abort(c, badField("notification_id", "invalid_field", "notification_id is not a Herald notification id"))
		return
	}
	it, err := s.store.MarkInboxRead(c.Request.Context(), tenantID, userID, id)
	if errors.Is(err, herald.ErrNotFound) {
		s.abort(c, notFound("inbox item"))
		return
	}
	if err != nil {
		s.abort(c, err)
		return
	}
	c.JSON(http.StatusOK, it)
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
