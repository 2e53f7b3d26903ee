package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/workflows"
)

// cancelNotification cancels a notification not yet sent on any channel, through
// the workflow's cancel update: the workflow itself decides, so a cancel can never
// race a send. Once any channel is sending or sent the answer is 409 with the
// current state.
func (s *Server) cancelNotification(c *gin.Context) {
	id := c.Param("notification_id")
	key, runID, err := ids.ParseNotificationID(id)
	if err != nil {
		s.abort(c, badField("notification_id", "invalid_field", "notification_id is not a Herald notification id"))
		return
	}
	tenantID := tenantOf(c).ID
	workflowID := ids.NotificationWorkflowID(tenantID, key)
	ctx, cancel := context.WithTimeout(c.Request.Context(), 10*time.Second)
	defer cancel()
	handle, err := s.temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: workflowID, RunID: runID, UpdateName: workflows.UpdateCancel, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		var st workflows.NotificationState
		err = handle.Get(ctx, &st)
	}
	var appErr *temporal.ApplicationError
	var nf *serviceerror.NotFound
	var invalid *serviceerror.InvalidArgument
	switch {
	case err == nil:
		s.respondNotification(c, http.StatusOK, tenantID, id, workflowID, runID)
	case errors.As(err, &appErr) && appErr.Type() == herald.ErrTypeAlreadySent:
		s.conflict(c, tenantID, id, workflowID, runID, appErr.Message())
	case errors.As(err, &nf) || errors.As(err, &invalid):
		// No open run: either no such notification, or its run has closed (sent and
		// past its dedup window) and nothing is left to cancel.
		if _, gerr := s.store.GetNotification(c.Request.Context(), tenantID, id); gerr == nil {
			s.conflict(c, tenantID, id, workflowID, runID, "the notification has completed")
			return
		}
		s.abort(c, notFound("notification"))
	default:
		s.abort(c, temporalError(c, err))
	}
}

func (s *Server) respondNotification(c *gin.Context, status int, tenantID, id, workflowID, runID string) {
	n, err := s.store.GetNotification(c.Request.Context(), tenantID, id)
	if errors.Is(err, herald.ErrNotFound) {
		view, verr := s.viewFromWorkflow(c.Request.Context(), workflowID, runID, id)
		if verr != nil {
			s.abort(c, temporalError(c, verr))
			return
		}
		c.JSON(status, view)
		return
	}
	if err != nil {
		s.abort(c, err)
		return
	}
	c.JSON(status, viewFromStore(n))
}

// conflict answers 409 with the notification's current state.
func (s *Server) conflict(c *gin.Context, tenantID, id, workflowID, runID, why string) {
	n, err := s.store.GetNotification(c.Request.Context(), tenantID, id)
	if err != nil && !errors.Is(err, herald.ErrNotFound) {
		s.abort(c, err)
		return
	}
	body := gin.H{"error": &Error{Code: "not_cancellable", Message: "cannot cancel: " + why}}
	if err == nil {
		body["notification"] = viewFromStore(n)
	}
	c.AbortWithStatusJSON(http.StatusConflict, body)
}
