package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/flows"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
)

// The accept path of a flow event: POST /v1/notifications with flow_id instead
// of template_id. It is the notification accept path with the flow in the
// template's place: the same validation of the shared fields, the same Layer-1
// dedup (the workflow ID derives from the idempotency key, or from user, flow
// and data; the start is the acceptance; a duplicate inside the window answers
// the original's id, from the ledger or the start), the same body hash (with
// flow_id in it), the same answers. The event's run is pinned to the flow's
// latest version at acceptance.

// flowContentTarget is what a content-derived dedup key hashes in the
// template's place for a flow event: "flow:" cannot begin a template id, so an
// event and a notification never share a key.
func flowContentTarget(flowID string) string { return "flow:" + flowID }

// acceptedFlowEvent is a validated flow event, ready to start.
type acceptedFlowEvent struct {
	acceptedNotification // the shared fields: key, lane, client key, tenant, user, body hash
	flowID               string
	data                 map[string]any
	window               time.Duration
}

// validateFlowEvent checks a flow event's fields; the user and the flow are
// checked against the store after the ledger had its say.
func (h *notificationsRoom) validateFlowEvent(c *gin.Context, req createNotificationRequest) (acceptedFlowEvent, *httpError) {
	var out acceptedFlowEvent
	switch {
	case req.TemplateID != nil:
		return out, badField("flow_id", "conflicting_field", "give template_id (one notification) or flow_id (an event of a flow), not both")
	case req.UserID == nil:
		return out, badField("user_id", "missing_field", "user_id is required")
	case req.Channels != nil:
		return out, badField("channels", "invalid_field", "a flow's send steps name their channels; leave channels out with flow_id")
	case req.SendAt != nil:
		return out, badField("send_at", "invalid_field", "a flow event starts at once; give the flow a delay step to wait")
	case req.OrderingKey != nil:
		return out, badField("ordering_key", "invalid_field", "ordering_key applies to template notifications; leave it out with flow_id")
	}
	if err := validID("user_id", *req.UserID); err != nil {
		return out, err
	}
	if err := validFlowID(*req.FlowID); err != nil {
		return out, err
	}
	window, err := h.dedupWindow(req.DedupTTLSec)
	if err != nil {
		return out, err
	}
	data, err := decodeData(req.Data)
	if err != nil {
		return out, err
	}
	if out.key, out.clientKey, err = dedupKey(c, req, data); err != nil {
		return out, err
	}
	if out.lane, err = requestedLane(req.Priority); err != nil {
		return out, err
	}
	hash := append([]byte(nil), out.key[:]...) // content-derived: the key is the body (see validateNotification)
	if out.clientKey != "" {
		h, herr := bodyHash(*req.UserID, target{flowID: *req.FlowID}, data, nil, false, false, time.Time{}, nil)
		if herr != nil {
			return out, badField("data", "invalid_field", "data cannot be encoded: %v", herr)
		}
		hash = h
	}
	out.input.TenantID, out.input.UserID, out.input.BodyHash = tenantOf(c).ID, *req.UserID, hash
	out.flowID, out.data, out.window = *req.FlowID, data, window
	return out, nil
}

// acceptFlowEvent accepts a flow event by starting its run (see the top of
// the file).
func (h *notificationsRoom) acceptFlowEvent(c *gin.Context, req createNotificationRequest, seenAt time.Time) {
	acc, verr := h.validateFlowEvent(c, req)
	if verr != nil {
		h.rejectAccept(c, verr)
		return
	}
	if h.answerFromLedger(c, acc.acceptedNotification, seenAt) {
		return
	}
	ctx := c.Request.Context()
	userLocale, exists, err := h.users.userLocale(c, acc.input.TenantID, acc.input.UserID)
	if err != nil {
		h.rejectAccept(c, err)
		return
	}
	if !exists {
		h.rejectAccept(c, &httpError{Status: http.StatusUnprocessableEntity, Code: "unknown_user", Field: "user_id",
			Message: "user " + acc.input.UserID + " does not exist; create it with PUT /v1/users/{user_id}"})
		return
	}
	rec, err := h.flows.latest(ctx, acc.input.TenantID, acc.flowID)
	if errors.Is(err, herald.ErrNotFound) {
		h.rejectAccept(c, &httpError{Status: http.StatusUnprocessableEntity, Code: "unknown_flow", Field: "flow_id",
			Message: "flow " + acc.flowID + " does not exist; create it with PUT /v1/flows/{flow_id}"})
		return
	}
	if err != nil {
		h.rejectAccept(c, err)
		return
	}
	if err := checkFlowKeys(rec.Definition, acc.data); err != nil {
		h.rejectAccept(c, err)
		return
	}
	if err := h.checkFlowContent(ctx, acc.input.TenantID, rec.Definition, userLocale, acc.data); err != nil {
		h.rejectAccept(c, err)
		return
	}
	ev := flowEvent{TenantID: acc.input.TenantID, UserID: acc.input.UserID, FlowID: acc.flowID, FlowVersion: rec.Version,
		Flow: rec.Definition, Data: acc.data, DedupWindow: acc.window, BodyHash: acc.input.BodyHash}
	if n := contract.PayloadSize(ev); n < 0 || n > contract.MaxWorkflowInputBytes {
		h.rejectAccept(c, &httpError{Status: http.StatusUnprocessableEntity, Code: "content_too_large", Field: "data",
			Message: fmt.Sprintf("the event is %d bytes as its workflow carries it (JSON-encoded, with its flow); the limit is %d bytes (%d KiB)",
				n, contract.MaxWorkflowInputBytes, contract.MaxWorkflowInputBytes>>10)})
		return
	}
	if len(rec.Definition.Steps) > 0 && rec.Definition.Steps[0].Type == flows.StepDigest {
		h.acceptDigestEvent(c, acc, ev, seenAt)
		return
	}
	h.startFlowEvent(c, acc, ev, seenAt)
}

// acceptDigestEvent accepts an event of a flow whose first step is a digest
// without a run of its own (docs/digests.md, "Accepting a digest event"): the
// event's rows commit in one transaction whose first statement takes the
// Layer-1 key (a key inside its window answers as any duplicate, with the
// original's id), then its digest is signalled; 202 only once the signal
// succeeded. A signal that failed is 503 (retry with the same key: the retry
// answers the same id) and the sweeper signals the digest later, so the event
// ends in a digest whether or not the client retries.
func (h *notificationsRoom) acceptDigestEvent(c *gin.Context, acc acceptedFlowEvent, ev flowEvent, seenAt time.Time) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 10*time.Second)
	defer cancel()
	res, err := h.engine.AcceptDigestEvent(ctx, acc.key, acc.lane, ev)
	workflowID := ids.NotificationWorkflowID(ev.TenantID, acc.key)
	switch {
	case err == nil && res.Duplicate:
		_, runID, perr := ids.ParseNotificationID(res.NotificationID)
		if perr != nil {
			h.abort(c, perr)
			return
		}
		h.duplicate(c, acc.acceptedNotification, workflowID, runID, seenAt)
	case err != nil || res.SignalErr != nil:
		if err == nil {
			err = res.SignalErr
		}
		h.log.Error("accepting a digest event failed", "workflow_id", workflowID, "notification_id", res.NotificationID, "error", err)
		c.Header("Retry-After", "1")
		h.answerAccept(c, acceptUnavailable, http.StatusServiceUnavailable, &httpError{Status: http.StatusServiceUnavailable, Code: "temporarily_unavailable",
			Message: "the event was not accepted; retry with the same idempotency_key"})
	default:
		c.Set(acceptLaneKey, acc.lane)
		h.answerAccept(c, acceptNew, http.StatusAccepted, gin.H{
			"notification_id": res.NotificationID,
			"status":          herald.NotificationQueued,
			"dedup":           "new",
		})
	}
}

// checkFlowKeys renders the event's digest and throttle keys now, so an event
// whose key cannot be rendered (over flows.MaxRenderedKeyBytes) is a 422 here
// rather than a run that fails at its digest.
func checkFlowKeys(def flows.Definition, data map[string]any) error {
	var walk func(steps []flows.Step, path string) error
	walk = func(steps []flows.Step, path string) error {
		for i, s := range steps {
			at := path + "[" + itoa(i) + "]"
			if s.Key != "" {
				if _, err := flows.RenderKey(s.Key, data); err != nil {
					return &httpError{Status: http.StatusUnprocessableEntity, Code: "render_failed", Field: "data",
						Message: fmt.Sprintf("the key of the flow's %s (%s) cannot be rendered from data: %v", at, s.Key, err)}
				}
			}
			for j, cs := range s.Cases {
				if err := walk(cs.Steps, at+".cases["+itoa(j)+"].steps"); err != nil {
					return err
				}
			}
			if err := walk(s.Else, at+".else"); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(def.Steps, "steps")
}

// checkFlowContent renders, as the notification accept path does, the send
// steps that run on the event's own data whatever happens: those at the top
// level before the flow's digest (a step inside a branch may be the case that
// data without a field never takes, and the steps after a digest render the
// digest). Data that lacks a variable such a template needs, or that it cannot
// render, is a 422 now rather than a failed step later; the message names the
// step. The send renders again when it runs (the template's latest version, the
// user's locale then).
func (h *notificationsRoom) checkFlowContent(ctx context.Context, tenantID string, def flows.Definition, userLocale string, data map[string]any) error {
	for i, s := range def.Steps {
		if s.Type == flows.StepDigest {
			return nil
		}
		if s.Type != flows.StepSend {
			continue
		}
		t, err := h.templates.forSend(ctx, tenantID, s.TemplateID)
		if err == nil {
			_, err = templateChannels(t, s.Channels)
		}
		if err == nil {
			err = checkContent(ctx, h.settings, tenantID, t, s.Channels, userLocale, data)
		}
		var he *httpError
		if errors.As(err, &he) {
			named := *he
			named.Message = fmt.Sprintf("the flow's steps[%d] (template %s): %s", i, s.TemplateID, he.Message)
			if named.Field == "template_id" || strings.HasPrefix(named.Field, "channels") {
				named.Field = "flow_id" // the flow's template changed since it was saved
			}
			return &named
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// startFlowEvent starts the event's run and answers as start does for a
// notification: 202 for a new one, the duplicate's answer for a run already
// open, 503 when Temporal did not take it.
func (h *notificationsRoom) startFlowEvent(c *gin.Context, acc acceptedFlowEvent, ev flowEvent, seenAt time.Time) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 10*time.Second)
	defer cancel()
	workflowID := ids.NotificationWorkflowID(ev.TenantID, acc.key)
	run, err := h.engine.StartFlow(ctx, workflowID, acc.lane, ev)
	switch {
	case err != nil:
		h.log.Error("starting flow workflow failed", "workflow_id", workflowID, "error", err)
		c.Header("Retry-After", "1")
		h.answerAccept(c, acceptUnavailable, http.StatusServiceUnavailable, &httpError{Status: http.StatusServiceUnavailable, Code: "temporarily_unavailable",
			Message: "the event was not accepted; retry with the same idempotency_key"})
	case run.Existing:
		h.duplicate(c, acc.acceptedNotification, workflowID, run.RunID, seenAt)
	default:
		c.Set(acceptLaneKey, acc.lane)
		h.answerAccept(c, acceptNew, http.StatusAccepted, gin.H{
			"notification_id": ids.NotificationID(acc.key, run.RunID),
			"status":          herald.NotificationQueued,
			"dedup":           "new",
		})
	}
}
