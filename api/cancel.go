package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/workflows"
)

// cancelNotification cancels a notification not yet sent on any channel, through
// the workflow's cancel update: the workflow itself decides, so a cancel can never
// race a send. Once any channel is sending or sent the answer is 409 with the
// current state.
func (h *notificationsRoom) cancelNotification(c *gin.Context) {
	id := c.Param("notification_id")
	key, runID, err := ids.ParseNotificationID(id)
	if err != nil {
		h.abort(c, badField("notification_id", "invalid_field", "notification_id is not a Herald notification id"))
		return
	}
	tenantID := tenantOf(c).ID
	workflowID := ids.NotificationWorkflowID(tenantID, key)
	ctx, cancel := context.WithTimeout(c.Request.Context(), 10*time.Second)
	defer cancel()
	err = h.workflows.CancelNotification(ctx, workflowID, runID)
	switch {
	case err == nil:
		h.respondNotification(c, http.StatusOK, tenantID, id, workflowID, runID)
	case errors.Is(err, workflows.ErrAlreadySent):
		h.conflict(c, tenantID, id, workflowID, runID, err.Error())
	case errors.Is(err, workflows.ErrRunNotFound):
		// No open run: either no such notification, or its run has closed (sent and
		// past its dedup window) and nothing is left to cancel — unless it is a flow
		// event waiting in a digest that has not closed (its run ends with its dedup
		// window, the digest may stay open longer): the row leaves the digest.
		if handled := h.cancelDigestedEvent(c, tenantID, id, workflowID, runID); handled {
			return
		}
		if _, gerr := h.store.GetNotification(c.Request.Context(), tenantID, id); gerr == nil {
			h.conflict(c, tenantID, id, workflowID, runID, "the notification has completed")
			return
		}
		h.abort(c, notFound("notification"))
	default:
		h.abort(c, temporalError(c, err))
	}
}

func (h *notificationsRoom) respondNotification(c *gin.Context, status int, tenantID, id, workflowID, runID string) {
	n, err := h.store.GetNotification(c.Request.Context(), tenantID, id)
	if errors.Is(err, herald.ErrNotFound) {
		view, verr := h.viewFromWorkflow(c.Request.Context(), workflowID, runID, id)
		if verr != nil {
			h.abort(c, temporalError(c, verr))
			return
		}
		c.JSON(status, view)
		return
	}
	if err != nil {
		h.abort(c, err)
		return
	}
	v := viewFromStore(n)
	if n.TemplateID == "" { // an event of a flow: its run, as the status view shows it
		if v, err = h.withFlowRun(c.Request.Context(), tenantID, v); err != nil {
			h.abort(c, err)
			return
		}
	}
	c.JSON(status, v)
}

// conflict answers 409 with the notification's current state.
func (h *notificationsRoom) conflict(c *gin.Context, tenantID, id, workflowID, runID, why string) {
	n, err := h.store.GetNotification(c.Request.Context(), tenantID, id)
	if err != nil && !errors.Is(err, herald.ErrNotFound) {
		h.abort(c, err)
		return
	}
	body := gin.H{"error": &httpError{Code: "not_cancellable", Message: "cannot cancel: " + why}}
	if err == nil {
		body["notification"] = viewFromStore(n)
	}
	c.AbortWithStatusJSON(http.StatusConflict, body)
}

// cancelDigestedEvent cancels a flow event whose run has closed while its
// digest is still open: it takes the event's row out of the digest (under the
// row lock the digest's close takes too, so the two never both win). It
// reports whether the event was a digested one (and so answered).
func (h *notificationsRoom) cancelDigestedEvent(c *gin.Context, tenantID, id, workflowID, runID string) bool {
	ctx := c.Request.Context()
	removed, digestID, err := h.store.RemoveDigestEvent(ctx, tenantID, id)
	switch {
	case errors.Is(err, herald.ErrNotFound):
		return false
	case err != nil:
		h.abort(c, err)
	case !removed:
		h.conflict(c, tenantID, id, workflowID, runID, "the digest the event joined has closed ("+digestID+")")
	default:
		if err := h.store.SetNotificationStatus(ctx, tenantID, id, herald.NotificationCancelled); err != nil {
			h.abort(c, err)
			return true
		}
		h.respondNotification(c, http.StatusOK, tenantID, id, workflowID, runID)
	}
	return true
}
