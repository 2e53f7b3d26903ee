package api

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/workflows"
)

// maxBulkRedrive bounds one bulk redrive request.
const maxBulkRedrive = 1000

// deadLetterFilter reads channel, template_id, since, until (RFC 3339), status,
// limit (defaultPageLimit, at most maxPageLimit) and cursor from the query string.
func deadLetterFilter(c *gin.Context, tenantID string) (store.DeadLetterFilter, error) {
	f := store.DeadLetterFilter{TenantID: tenantID, TemplateID: c.Query("template_id"),
		Status: c.DefaultQuery("status", store.DeadLetterOpen)}
	var herr *httpError
	if f.Channel, herr = filterChannel(c.Query("channel")); herr != nil {
		return f, herr
	}
	switch f.Status {
	case store.DeadLetterOpen, store.DeadLetterRedriving, store.DeadLetterRedriven:
	case "all":
		f.Status = ""
	default:
		return f, badField("status", "invalid_field", "status must be open, redriving, redriven or all")
	}
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := c.Query(p.name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return f, badField(p.name, "invalid_field", "%s must be an RFC 3339 time", p.name)
			}
			*p.dst = t
		}
	}
	limit, verr := pageLimit(c)
	if verr != nil {
		return f, verr
	}
	f.Limit = limit
	cur, ok, verr := readPageCursor(c, "dead-letters")
	if verr != nil {
		return f, verr
	}
	if ok {
		f.After = &store.DeadLetterCursor{CreatedAt: time.UnixMicro(cur.At), ID: cur.ID}
	}
	return f, nil
}

// listDeadLetters pages dead letters with their attempt counts and last errors,
// newest first; next_cursor (null on the last page) continues with the same
// filter.
func (h *notificationsRoom) listDeadLetters(c *gin.Context) {
	f, err := deadLetterFilter(c, tenantOf(c).ID)
	if err != nil {
		h.abort(c, err)
		return
	}
	limit := f.Limit
	f.Limit++ // one more says whether another page follows
	items, err := h.store.ListDeadLetters(c.Request.Context(), f)
	if err != nil {
		h.abort(c, err)
		return
	}
	items, next := onePage(items, limit, func(last store.DeadLetter) pageCursor {
		return pageCursor{List: "dead-letters", At: last.CreatedAt.UnixMicro(), ID: last.ID}
	})
	c.JSON(http.StatusOK, gin.H{"items": items, "next_cursor": next})
}

// redriveDeadLetter starts a redrive of one dead letter.
func (h *notificationsRoom) redriveDeadLetter(c *gin.Context) {
	id, err := strconv.ParseInt(c.Param("dead_letter_id"), 10, 64)
	if err != nil || id < 1 {
		h.abort(c, badField("dead_letter_id", "invalid_field", "dead_letter_id must be a positive integer"))
		return
	}
	tenantID := tenantOf(c).ID
	d, err := h.store.GetDeadLetter(c.Request.Context(), tenantID, id)
	if errors.Is(err, herald.ErrNotFound) {
		h.abort(c, notFound("dead letter"))
		return
	}
	if err != nil {
		h.abort(c, err)
		return
	}
	if d.Status != store.DeadLetterOpen {
		c.AbortWithStatusJSON(http.StatusConflict, gin.H{"error": &httpError{Code: "not_redrivable",
			Message: "dead letter is " + d.Status + "; only open dead letters can be redriven"}, "dead_letter": d})
		return
	}
	if gone, err := h.notificationGone(c, d); err != nil {
		h.abort(c, err)
		return
	} else if gone {
		c.AbortWithStatusJSON(http.StatusGone, gin.H{"error": notificationExpired(d), "dead_letter": d})
		return
	}
	workflowID, err := h.workflows.StartRedrive(c.Request.Context(), tenantID, id)
	if errors.Is(err, workflows.ErrAlreadyStarted) {
		// Another request started this dead letter's redrive a moment ago.
		d.Status = store.DeadLetterRedriving
		c.AbortWithStatusJSON(http.StatusConflict, gin.H{"error": &httpError{Code: "not_redrivable",
			Message: "a redrive of this dead letter is already running"}, "dead_letter": d})
		return
	}
	if err != nil {
		h.abort(c, temporalError(c, err))
		return
	}
	c.JSON(http.StatusAccepted, gin.H{"dead_letter_id": id, "redrive_workflow_id": workflowID, "status": store.DeadLetterRedriving})
}

type bulkRedriveRequest struct {
	Channel    string  `json:"channel"`
	TemplateID string  `json:"template_id"`
	Since      *string `json:"since"`
	Until      *string `json:"until"`
	Limit      int     `json:"limit"`
}

// bulkRedrive redrives every open dead letter matching a filter (at most limit).
func (h *notificationsRoom) bulkRedrive(c *gin.Context) {
	var req bulkRedriveRequest
	if err := decodeJSON(c, &req); err != nil {
		h.abort(c, err)
		return
	}
	f := store.DeadLetterFilter{TenantID: tenantOf(c).ID, TemplateID: req.TemplateID,
		Status: store.DeadLetterOpen, Limit: maxBulkRedrive}
	var herr *httpError
	if f.Channel, herr = filterChannel(req.Channel); herr != nil {
		h.abort(c, herr)
		return
	}
	if req.Limit != 0 {
		if req.Limit < 1 || req.Limit > maxBulkRedrive {
			h.abort(c, badField("limit", "invalid_field", "limit must be from 1 to %d", maxBulkRedrive))
			return
		}
		f.Limit = req.Limit
	}
	for _, p := range []struct {
		name string
		v    *string
		dst  *time.Time
	}{{"since", req.Since, &f.Since}, {"until", req.Until, &f.Until}} {
		if p.v != nil {
			t, err := time.Parse(time.RFC3339, *p.v)
			if err != nil {
				h.abort(c, badField(p.name, "invalid_field", "%s must be an RFC 3339 time", p.name))
				return
			}
			*p.dst = t
		}
	}
	items, err := h.store.ListDeadLetters(c.Request.Context(), f)
	if err != nil {
		h.abort(c, err)
		return
	}
	started, expired := []int64{}, []int64{}
	for _, d := range items {
		if gone, err := h.notificationGone(c, d); err != nil {
			h.abort(c, err)
			return
		} else if gone {
			expired = append(expired, d.ID)
			continue
		}
		if _, err := h.workflows.StartRedrive(c.Request.Context(), f.TenantID, d.ID); err != nil {
			if errors.Is(err, workflows.ErrAlreadyStarted) {
				continue
			}
			h.abort(c, temporalError(c, err))
			return
		}
		started = append(started, d.ID)
	}
	c.JSON(http.StatusAccepted, gin.H{"matched": len(items), "started": started, "expired": expired})
}

// notificationGone reports whether the dead letter's notification is gone: its
// history expired (its day partition dropped once the dead letter was older
// than the dead-letter retention, docs/retention.md#a-notification-that-outlives-its-partition),
// so nothing is left to redrive (the redrive would find no delivery to reopen).
func (h *notificationsRoom) notificationGone(c *gin.Context, d store.DeadLetter) (bool, error) {
	_, _, err := h.store.NotificationStatus(c.Request.Context(), d.TenantID, d.NotificationID)
	if errors.Is(err, herald.ErrNotFound) {
		return true, nil
	}
	return false, err
}

// notificationExpired is the 410 of a redrive whose notification is gone.
func notificationExpired(d store.DeadLetter) *httpError {
	return &httpError{Status: http.StatusGone, Code: "notification_expired",
		Message: "notification " + d.NotificationID + " is past its retention and its history is deleted; the dead letter cannot be redriven (it is deleted by the next maintenance run)"}
}
