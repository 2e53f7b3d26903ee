package api

import (
	"encoding/hex"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/workflows"
)

// The support view answers "why didn't user X get notification Y" without SQL or
// the Temporal UI: every notification with its dedup key hash, window, duplicate
// count and every channel's outcome with its reason.

// notificationStatuses are the overall statuses the support view filters by.
var notificationStatuses = []herald.NotificationStatus{
	herald.NotificationQueued, herald.NotificationScheduled, herald.NotificationSending, herald.NotificationSent,
	herald.NotificationDelivered, herald.NotificationPartiallyFailed, herald.NotificationFailed,
	herald.NotificationSuppressed, herald.NotificationCancelled,
}

// undelivered are the channel statuses that end without the user getting it.
var undelivered = []herald.DeliveryStatus{herald.DeliverySuppressed, herald.DeliveryCancelled, herald.DeliveryFailed}

// supportItem is one notification of the support view.
type supportItem struct {
	notificationHeader
	Channels []store.Delivery `json:"channels"`
	// NotDelivered lists the channels that ended without reaching the user, with
	// the reason (opted out, quiet hours, cap, no address, cancelled, no provider,
	// dead-lettered, ...).
	NotDelivered []notDelivered `json:"not_delivered"`
	dedupView
}

type notDelivered struct {
	Channel herald.Channel        `json:"channel"`
	Status  herald.DeliveryStatus `json:"status"`
	Reason  *herald.Reason        `json:"reason"`
}

func newSupportItem(n store.SupportNotification) supportItem {
	it := supportItem{notificationHeader: notificationHeader{NotificationID: n.ID, UserID: n.UserID, TemplateID: n.TemplateID,
		Status: n.Status, AcceptedAt: n.AcceptedAt.UTC(), UpdatedAt: n.UpdatedAt.UTC(), WorkflowID: n.WorkflowID, RunID: n.RunID},
		Channels: n.Deliveries, NotDelivered: []notDelivered{}, dedupView: newDedupView(n.DedupKeyHash, n.Dedup, n.AcceptedAt)}
	if it.Channels == nil {
		it.Channels = []store.Delivery{}
	}
	for _, d := range it.Channels {
		if contains(undelivered, d.Status) {
			it.NotDelivered = append(it.NotDelivered, notDelivered{Channel: d.Channel, Status: d.Status, Reason: d.Reason})
		}
	}
	return it
}

// supportFilter reads from, until (RFC 3339), template_id, status, limit and
// cursor.
func supportFilter(c *gin.Context, list string) (store.UserNotificationFilter, *httpError) {
	var f store.UserNotificationFilter
	for _, p := range []struct {
		name string
		dst  **time.Time
	}{{"since", &f.From}, {"until", &f.To}} {
		if v := c.Query(p.name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return f, badField(p.name, "invalid_field", "%s must be an RFC 3339 time", p.name)
			}
			*p.dst = &t
		}
	}
	if v := c.Query("template_id"); v != "" {
		if err := validTemplateID(v); err != nil {
			return f, err
		}
		f.TemplateID = v
	}
	if v := herald.NotificationStatus(c.Query("status")); v != "" {
		if !contains(notificationStatuses, v) {
			return f, badField("status", "invalid_field", "status must be one of %v", notificationStatuses)
		}
		f.Status = v
	}
	limit, err := pageLimit(c)
	if err != nil {
		return f, err
	}
	f.Limit = limit
	cur, ok, err := readPageCursor(c, list)
	if err != nil {
		return f, err
	}
	if ok {
		// The cursor's key is the last notification id of the previous page.
		if _, _, perr := ids.ParseNotificationID(cur.Key); perr != nil {
			return f, badCursor()
		}
		t := time.UnixMicro(cur.At)
		f.Before, f.BeforeID = &t, cur.Key
	}
	return f, nil
}

// listSupport answers one page of f, newest first.
func (h *notificationsRoom) listSupport(c *gin.Context, list string, f store.UserNotificationFilter) {
	limit := f.Limit
	f.Limit++ // one more says whether another page follows
	rows, err := h.store.ListUserNotifications(c.Request.Context(), tenantOf(c).ID, f)
	if err != nil {
		h.abort(c, err)
		return
	}
	rows, next := onePage(rows, limit, func(last store.SupportNotification) pageCursor {
		return pageCursor{List: list, At: last.AcceptedAt.UnixMicro(), Key: last.ID}
	})
	items := make([]supportItem, 0, len(rows))
	for _, n := range rows {
		items = append(items, newSupportItem(n))
	}
	c.JSON(http.StatusOK, gin.H{"items": items, "next_cursor": next})
}

// listUserNotifications is GET /v1/users/{user_id}/notifications: the user's
// notifications, newest first.
func (h *notificationsRoom) listUserNotifications(c *gin.Context) {
	userID := c.Param("user_id")
	if err := validID("user_id", userID); err != nil {
		h.abort(c, err)
		return
	}
	f, verr := supportFilter(c, "user-notifications")
	if verr != nil {
		h.abort(c, verr)
		return
	}
	_, exists, err := h.users.userLocale(c, tenantOf(c).ID, userID)
	if err != nil {
		h.abort(c, err)
		return
	}
	if !exists {
		h.abort(c, notFound("user"))
		return
	}
	f.UserID = userID
	h.listSupport(c, "user-notifications", f)
}

// findNotifications is GET /v1/notifications?dedup_key=K (a client's idempotency
// key) or ?dedup_key_hash=H (the hash the views show, also for content-derived
// keys): the notifications accepted with that key, one per dedup window, newest
// first. A notification whose workflow has not recorded it yet is answered from
// the workflow, as GET /v1/notifications/{id} does.
func (h *notificationsRoom) findNotifications(c *gin.Context) {
	rawKey, byKey := c.GetQuery("dedup_key")
	rawHash, byHash := c.GetQuery("dedup_key_hash")
	var key ids.KeyHash
	switch {
	case byKey && byHash:
		h.abort(c, badField("dedup_key_hash", "invalid_field", "give dedup_key or dedup_key_hash, not both"))
		return
	case byKey:
		if err := validID("dedup_key", rawKey); err != nil {
			h.abort(c, err)
			return
		}
		key = ids.IdempotencyKeyHash(rawKey)
	case byHash:
		raw, err := hex.DecodeString(rawHash)
		if err != nil || len(raw) != ids.KeyHashLen || hex.EncodeToString(raw) != rawHash {
			h.abort(c, badField("dedup_key_hash", "invalid_field", "dedup_key_hash must be %d lowercase hex digits", 2*ids.KeyHashLen))
			return
		}
		copy(key[:], raw)
	default:
		h.abort(c, badField("dedup_key", "missing_field", "dedup_key (a client idempotency key) or dedup_key_hash is required"))
		return
	}
	f, verr := supportFilter(c, "key-notifications")
	if verr != nil {
		h.abort(c, verr)
		return
	}
	f.KeyHash = key.String()
	if _, paging := c.GetQuery("cursor"); paging || f.From != nil || f.To != nil || f.TemplateID != "" || f.Status != "" {
		h.listSupport(c, "key-notifications", f)
		return
	}
	// First page, no filter: a run that is only a workflow start so far is
	// listed too.
	h.listWithRun(c, key, f)
}

// listWithRun answers the first page of a key's notifications with, first, its
// latest run when that run has not recorded its notification yet.
func (h *notificationsRoom) listWithRun(c *gin.Context, key ids.KeyHash, f store.UserNotificationFilter) {
	tenantID := tenantOf(c).ID
	limit := f.Limit
	f.Limit++
	rows, err := h.store.ListUserNotifications(c.Request.Context(), tenantID, f)
	if err != nil {
		h.abort(c, err)
		return
	}
	items := make([]supportItem, 0, len(rows)+1)
	workflowID := ids.NotificationWorkflowID(tenantID, key)
	run, err := h.workflows.DescribeNotification(c.Request.Context(), workflowID, "")
	switch {
	case errors.Is(err, workflows.ErrRunNotFound):
	case err != nil:
		h.abort(c, temporalError(c, err))
		return
	default:
		if id := ids.NotificationID(key, run.RunID); !hasID(rows, id) {
			it, err := h.unrecordedItem(c, key, run, workflowID, id)
			if err != nil {
				h.abort(c, err)
				return
			}
			items = append(items, it)
		}
	}
	var next *string
	if room := limit - len(items); len(rows) > room {
		rows = rows[:room]
		if room > 0 {
			last := rows[room-1]
			next = encodePageCursor(pageCursor{List: "key-notifications", At: last.AcceptedAt.UnixMicro(), Key: last.ID})
		} else { // the page is the unrecorded run alone; it is newer than every row
			next = encodePageCursor(pageCursor{List: "key-notifications", At: items[0].AcceptedAt.UnixMicro(), Key: items[0].NotificationID})
		}
	}
	for _, n := range rows {
		items = append(items, newSupportItem(n))
	}
	c.JSON(http.StatusOK, gin.H{"items": items, "next_cursor": next})
}

// unrecordedItem is the support view of a run whose notification is not
// recorded yet, with what the dedup ledger saw of its key.
func (h *notificationsRoom) unrecordedItem(c *gin.Context, key ids.KeyHash, run workflows.NotificationRun, workflowID, id string) (supportItem, error) {
	v := viewFromRun(run, workflowID, id)
	it := supportItem{notificationHeader: v.notificationHeader, Channels: []store.Delivery{}, NotDelivered: []notDelivered{}}
	for _, ch := range v.Channels {
		it.Channels = append(it.Channels, ch.Delivery)
	}
	d, err := h.store.GetDedup(c.Request.Context(), tenantOf(c).ID, id)
	switch {
	case err == nil:
		it.dedupView = newDedupView(key.String(), &d, v.AcceptedAt)
	case errors.Is(err, herald.ErrNotFound):
		it.dedupView = newDedupView(key.String(), nil, v.AcceptedAt)
	default:
		return it, err
	}
	return it, nil
}

func hasID(rows []store.SupportNotification, id string) bool {
	for _, r := range rows {
		if r.ID == id {
			return true
		}
	}
	return false
}
