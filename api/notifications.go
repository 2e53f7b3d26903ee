package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/internal/metrics"
	"github.com/herald-notify/herald/internal/retention"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/workflows"
)

// notificationsRoom holds the notifications: the accept path (accept.go),
// their status, cancel (cancel.go), dead letters and their redrive
// (dead_letters.go) and the support view (support.go).
type notificationsRoom struct {
	responder
	store     *store.Store
	workflows *workflows.Client
	users     *userDirectory
	templates *templateCache
	settings  *settingsCache
	// flows and engine serve the events of flows (flow_accept.go) and their
	// runs in the status view.
	flows  *flowCache
	engine flowEngine
	// defaultDedupWindow is Config.DefaultDedupWindow.
	defaultDedupWindow time.Duration
	metrics            *metrics.Metrics
	// numberDue: a notification due now is numbered in its user's due sequence
	// before its 202 (always, but in the due-order bench's floor).
	numberDue bool
	// retention is the operator's retention policy (Config.Retention).
	retention retention.Policy
	// ordering bounds the tenants' max_hold (Config.Ordering).
	ordering OrderingConfig
}

func (h *notificationsRoom) register(v1, public gin.IRouter, mw *middleware) {
	cost := mw.limits.Cost
	v1.POST("/notifications", h.countSubmission, mw.limitTenant, h.createNotification)
	v1.GET("/notifications", h.findNotifications)
	v1.GET("/notifications/:notification_id", h.getNotification)
	v1.DELETE("/notifications/:notification_id", mw.audited(auditNotificationCancel, auditFields), h.cancelNotification)
	v1.GET("/dead-letters", h.listDeadLetters)
	v1.POST("/dead-letters/redrive", mw.limitCost("tenant-bulk-redrive:", cost.BulkRedrive, "bulk redrives"),
		mw.audited(auditDeadLetterBulkRedrive, auditFields), h.bulkRedrive)
	v1.POST("/dead-letters/:dead_letter_id/redrive", mw.limitCost("tenant-redrive:", cost.Redrive, "redrives"),
		mw.audited(auditDeadLetterRedrive, auditFields), h.redriveDeadLetter)
	v1.GET("/users/:user_id/notifications", h.listUserNotifications)
}

// channelView is a channel's delivery record with its provider attempts.
type channelView struct {
	store.Delivery
	// History is every provider attempt with its outcome and error, oldest first.
	History []store.Attempt `json:"history"`
	// Ordering is the channel's place in its order lane (an ordered provider
	// channel only): seq, whether and how long it waited, behind which
	// notification, and whether the hold bound ran out (docs/ordering.md).
	Ordering *store.OrderInfo `json:"ordering,omitempty"`
}

// notificationHeader is what the status view and the support view say first
// about a notification.
type notificationHeader struct {
	NotificationID string                    `json:"notification_id"`
	UserID         string                    `json:"user_id"`
	TemplateID     string                    `json:"template_id"`
	Status         herald.NotificationStatus `json:"status"`
	AcceptedAt     time.Time                 `json:"accepted_at"`
	UpdatedAt      time.Time                 `json:"updated_at"`
	WorkflowID     string                    `json:"workflow_id"`
	RunID          string                    `json:"run_id"`
}

// headerOf is the header of a recorded notification.
func headerOf(n store.Notification) notificationHeader {
	return notificationHeader{NotificationID: n.ID, UserID: n.UserID, TemplateID: n.TemplateID, Status: n.Status,
		AcceptedAt: n.AcceptedAt.UTC(), UpdatedAt: n.UpdatedAt.UTC(), WorkflowID: n.WorkflowID, RunID: n.RunID}
}

type notificationView struct {
	notificationHeader
	// Sequence is the notification's number in its user's due sequence (null
	// until it is due: a scheduled one before send_at, one not yet recorded).
	Sequence *int64        `json:"sequence"`
	Channels []channelView `json:"channels"`
	dedupView
	// Flow is the run of a flow event: its steps and the digest it joined.
	Flow *flowRunView `json:"flow,omitempty"`
}

// dedupView is what Layer 1 saw of a notification's key during its window (the
// dedup ledger): how many submissions it suppressed, the first and the latest.
type dedupView struct {
	DedupKeyHash         string     `json:"dedup_key_hash"`
	DedupUntil           *time.Time `json:"dedup_until"`
	DuplicatesSuppressed int        `json:"duplicates_suppressed"`
	FirstSeenAt          time.Time  `json:"first_seen_at"`
	LastSeenAt           time.Time  `json:"last_seen_at"`
}

// newDedupView is d's view; a notification without a ledger row (started by a
// redrive, or accepted before the ledger existed) was seen once, when accepted.
func newDedupView(keyHash string, d *store.Dedup, acceptedAt time.Time) dedupView {
	if d == nil {
		return dedupView{DedupKeyHash: keyHash, FirstSeenAt: acceptedAt.UTC(), LastSeenAt: acceptedAt.UTC()}
	}
	v := dedupView{DedupKeyHash: keyHash, DuplicatesSuppressed: d.Duplicates, FirstSeenAt: d.FirstSeenAt.UTC(), LastSeenAt: d.LastSeenAt.UTC()}
	if d.DedupUntil != nil {
		u := d.DedupUntil.UTC()
		v.DedupUntil = &u
	}
	return v
}

// getNotification reads the status from PostgreSQL; for a notification accepted a
// moment ago whose first activity has not run yet, it asks the workflow instead, so
// an id returned by a 202 is never a 404.
func (h *notificationsRoom) getNotification(c *gin.Context) {
	id := c.Param("notification_id")
	key, runID, err := ids.ParseNotificationID(id)
	if err != nil {
		h.abort(c, badField("notification_id", "invalid_field", "notification_id is not a Herald notification id"))
		return
	}
	tenantID := tenantOf(c).ID
	n, err := h.store.GetNotification(c.Request.Context(), tenantID, id)
	if err == nil {
		v, herr := h.withHistory(c.Request.Context(), tenantID, viewFromStore(n))
		if herr == nil {
			v, herr = h.withOrdering(c.Request.Context(), tenantID, v)
		}
		if herr == nil && n.TemplateID == "" {
			v, herr = h.withFlowRun(c.Request.Context(), tenantID, v)
		}
		if herr != nil {
			h.abort(c, herr)
			return
		}
		c.JSON(http.StatusOK, v)
		return
	}
	if !errors.Is(err, herald.ErrNotFound) {
		h.abort(c, err)
		return
	}
	workflowID := ids.NotificationWorkflowID(tenantID, key)
	view, err := h.viewFromWorkflow(c.Request.Context(), workflowID, runID, id)
	if err == nil && h.pastRetention(c.Request.Context(), tenantID, view.AcceptedAt) {
		// The row is not missing yet but gone: maintenance deleted it with
		// the notification's history (its run may still be open, holding its
		// dedup window).
		err = workflows.ErrRunNotFound
	}
	if err == nil {
		// The accept path numbers a notification due at once before its 202.
		if view.Sequence, err = h.store.DueSequence(c.Request.Context(), tenantID, id); err != nil {
			h.abort(c, err)
			return
		}
		d, derr := h.store.GetDedup(c.Request.Context(), tenantID, id)
		switch {
		case derr == nil:
			view.dedupView = newDedupView(key.String(), &d, view.AcceptedAt)
		case errors.Is(derr, herald.ErrNotFound):
			view.dedupView = newDedupView(key.String(), nil, view.AcceptedAt)
		default:
			h.abort(c, derr)
			return
		}
	}
	if errors.Is(err, workflows.ErrRunNotFound) {
		h.abort(c, notFound("notification"))
		return
	}
	if err != nil {
		h.abort(c, temporalError(c, err))
		return
	}
	c.JSON(http.StatusOK, view)
}

func viewFromStore(n store.Notification) notificationView {
	v := notificationView{notificationHeader: headerOf(n), Sequence: n.DueSeq, Channels: []channelView{},
		dedupView: newDedupView(n.DedupKeyHash, n.Dedup, n.AcceptedAt)}
	for _, d := range n.Deliveries {
		v.Channels = append(v.Channels, channelView{Delivery: d, History: []store.Attempt{}})
	}
	return v
}

// withHistory adds each channel's provider attempts.
func (h *notificationsRoom) withHistory(ctx context.Context, tenantID string, v notificationView) (notificationView, error) {
	hist, err := h.store.ListAttemptsOf(ctx, tenantID, v.NotificationID, v.AcceptedAt)
	if err != nil {
		return v, err
	}
	for i := range v.Channels {
		if h := hist[v.Channels[i].Channel]; h != nil {
			v.Channels[i].History = h
		}
	}
	return v, nil
}

// withOrdering adds the ordered channels' places in their lanes.
func (h *notificationsRoom) withOrdering(ctx context.Context, tenantID string, v notificationView) (notificationView, error) {
	places, err := h.store.ListOrderHandoffs(ctx, tenantID, v.NotificationID)
	if err != nil {
		return v, err
	}
	for i := range v.Channels {
		if o, ok := places[v.Channels[i].Channel]; ok {
			v.Channels[i].Ordering = &o
		}
	}
	return v, nil
}

// withFlowRun adds the run of a flow event (a notification with no template of
// its own): each step with its outcome and times, and the digest it joined.
func (h *notificationsRoom) withFlowRun(ctx context.Context, tenantID string, v notificationView) (notificationView, error) {
	run, err := h.engine.FlowRun(ctx, tenantID, v.NotificationID)
	switch {
	case err == nil:
		v.Flow = &run
	case !errors.Is(err, herald.ErrNotFound):
		return v, err
	}
	return v, nil
}

// pastRetention reports whether a notification accepted at acceptedAt is older
// than the tenant's notification history retention (an unreadable setting
// counts as not past: the view is shown).
func (h *notificationsRoom) pastRetention(ctx context.Context, tenantID string, acceptedAt time.Time) bool {
	ts, err := h.settings.get(ctx, tenantID)
	if err != nil {
		return false
	}
	return time.Since(acceptedAt) > ts.Retention.Policy(operatorRetention(h.retention)).Notifications
}

// viewFromWorkflow describes a notification whose first activity has not written
// its row yet: it is queued, and the start's memo says for whom and on which channels.
func (h *notificationsRoom) viewFromWorkflow(ctx context.Context, workflowID, runID, id string) (notificationView, error) {
	run, err := h.workflows.DescribeNotification(ctx, workflowID, runID)
	if err != nil {
		return notificationView{}, err
	}
	return viewFromRun(run, workflowID, id), nil
}

// viewFromRun is the view of a notification that is so far only its run.
func viewFromRun(run workflows.NotificationRun, workflowID, id string) notificationView {
	started := run.StartedAt.UTC().Truncate(time.Microsecond)
	v := notificationView{notificationHeader: notificationHeader{
		NotificationID: id, UserID: run.UserID, TemplateID: run.TemplateID, Status: herald.NotificationQueued,
		AcceptedAt: started, UpdatedAt: started, WorkflowID: workflowID, RunID: run.RunID,
	}, Channels: []channelView{}}
	for _, ch := range run.Channels {
		v.Channels = append(v.Channels, channelView{Delivery: store.Delivery{Channel: ch, Status: herald.DeliveryPending, UpdatedAt: started},
			History: []store.Attempt{}})
	}
	return v
}

// temporalError turns "Temporal is unreachable" into a 503 the client can retry.
func temporalError(c *gin.Context, err error) error {
	if workflows.IsUnavailable(err) {
		c.Header("Retry-After", "1")
		return &httpError{Status: http.StatusServiceUnavailable, Code: "temporarily_unavailable", Message: "Temporal is unreachable; retry shortly"}
	}
	return err
}
