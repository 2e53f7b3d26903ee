package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/internal/templates"
)

// NotificationInput is what the API accepted.
type NotificationInput struct {
	TenantID   string
	UserID     string
	TemplateID string
	Channels   []herald.Channel
	// Data is the template data with every number as the client wrote it
	// (templates.Data decodes with UseNumber; a plain map would turn numbers into
	// float64 on the way through Temporal).
	Data        templates.Data
	DedupWindow time.Duration
	// TemplateVersion is the template version accepted with the notification; it
	// renders with that version even if the template changes meanwhile.
	TemplateVersion int
	// Category and Critical are the template's, for preferences and caps.
	Category string
	Critical bool
	// SendAt delays delivery to that time (zero: now); the notification is
	// "scheduled" until then and can be cancelled.
	SendAt time.Time
	// BodyHash is the canonical hash of the submitted body (user, template, data,
	// channels, send_at; the key itself for content-derived keys). The first
	// activity records it in the dedup ledger, from which the API answers the
	// key's later submissions: the same body a duplicate, another one 422.
	BodyHash []byte
	// OrderingKey puts each provider channel in the lane (tenant, user, channel,
	// key): handed to the provider in the order the lane's notifications became
	// due, each waiting for an earlier one still pending up to OrderMaxHold (0:
	// herald.DefaultOrderMaxHold). "": never held (docs/ordering.md).
	OrderingKey  string
	OrderMaxHold time.Duration
}

// ChannelState is one channel's progress as the workflow knows it.
type ChannelState struct {
	Status    herald.DeliveryStatus
	Attempts  int
	LastError string
	Reason    herald.Reason
	UpdatedAt time.Time
}

// NotificationState answers QueryStatus and is the workflow's result.
type NotificationState struct {
	NotificationID string
	UserID         string
	TemplateID     string
	Status         herald.NotificationStatus
	AcceptedAt     time.Time
	DedupUntil     time.Time
	Channels       map[herald.Channel]*ChannelState
}

// NotificationResult is the workflow's result.
type NotificationResult = NotificationState

// NotificationWorkflow is one accepted notification. Its workflow ID is the
// Layer-1 dedup key: it records the notification, waits for send_at, delivers
// every channel on its own (preferences, quiet hours and caps first, then render,
// then the channel's guarded delivery), records the overall status and then stays
// open until the dedup window ends, so that a duplicate start is rejected by
// Temporal itself.
func NotificationWorkflow(ctx workflow.Context, in NotificationInput) (NotificationResult, error) {
	w, err := setupNotification(ctx, in)
	if err != nil {
		return NotificationResult{}, err
	}
	return w.run(ctx)
}

type notification struct {
	in        NotificationInput
	info      *workflow.Info
	state     NotificationState
	keyHex    string
	recipient contract.Recipient
	// retry holds the tenant's per-channel retry overrides.
	retry map[herald.Channel]herald.RetryPolicy

	// deliveryCtx is cancelled by the cancel update: waits end and nothing more is
	// scheduled for delivery.
	deliveryCtx    workflow.Context
	cancelDelivery workflow.CancelFunc
	cancelled      bool
	// recorded: the notification and delivery rows exist (RecordAccepted ran).
	recorded bool
	// cancelling: the cancel update is still recording; the final status waits for it.
	cancelling bool

	// lanes are the ordered channels' places (ordering.go); released marks the
	// channels an ordering-released signal let go; listening: the signal is read.
	lanes     map[herald.Channel]*orderSlot
	released  map[herald.Channel]bool
	listening bool
}

// setupNotification derives the notification id from the workflow and run IDs and
// registers the status query and the cancel update.
func setupNotification(ctx workflow.Context, in NotificationInput) (*notification, error) {
	info := workflow.GetInfo(ctx)
	key, err := ids.KeyHashFromWorkflowID(info.WorkflowExecution.ID)
	if err != nil {
		return nil, contract.BadWorkflowID.New(err.Error(), err)
	}
	w := &notification{in: in, info: info, keyHex: key.String(),
		lanes: map[herald.Channel]*orderSlot{}, released: map[herald.Channel]bool{}}
	w.state = NotificationState{
		NotificationID: ids.NotificationID(key, info.WorkflowExecution.RunID),
		UserID:         in.UserID,
		TemplateID:     in.TemplateID,
		Status:         herald.NotificationQueued,
		AcceptedAt:     info.WorkflowStartTime,
		DedupUntil:     info.WorkflowStartTime.Add(in.DedupWindow),
		Channels:       map[herald.Channel]*ChannelState{},
	}
	for _, ch := range in.Channels {
		w.state.Channels[ch] = &ChannelState{Status: herald.DeliveryPending, UpdatedAt: info.WorkflowStartTime}
	}
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (NotificationState, error) {
		return w.state, nil
	}); err != nil {
		return nil, err
	}
	w.deliveryCtx, w.cancelDelivery = workflow.WithCancel(ctx)
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateCancel, w.cancel, workflow.UpdateHandlerOptions{
		Validator: w.validateCancel,
	}); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *notification) run(ctx workflow.Context) (NotificationResult, error) {
	if err := workflow.UpsertTypedSearchAttributes(ctx, SearchAttrNotificationID.ValueSet(w.state.NotificationID)); err != nil {
		return w.state, err
	}
	var accepted contract.RecordAcceptedResult
	if err := w.db(ctx, contract.RecordAccepted, contract.RecordAcceptedInput{
		TenantID: w.in.TenantID, NotificationID: w.state.NotificationID, UserID: w.in.UserID,
		TemplateID: w.in.TemplateID, Channels: w.in.Channels, WorkflowID: w.info.WorkflowExecution.ID,
		RunID: w.info.WorkflowExecution.RunID, DedupKeyHash: w.keyHex, AcceptedAt: w.state.AcceptedAt,
		TemplateVersion: w.in.TemplateVersion, Category: w.in.Category, Scheduled: w.scheduled(),
		BodyHash: w.in.BodyHash, DedupUntil: w.state.DedupUntil, OrderingKey: w.in.OrderingKey, Ordered: w.dueOrdered(),
	}).Get(ctx, &accepted); err != nil {
		return w.state, err
	}
	w.recorded = true
	w.takePlaces(ctx, accepted.Places)
	// A run that ends early (an activity's retries ran out) still gives its
	// places up, or every later notification in its lanes would wait its hold
	// bound; the normal path has left them already (leaveLane runs once).
	defer w.leaveLanes(ctx)

	if wait := w.in.SendAt.Sub(workflow.Now(ctx)); !w.in.SendAt.IsZero() && wait > 0 && !w.cancelled {
		w.scheduleAll(ctx)
		_ = workflow.Sleep(w.deliveryCtx, wait) // a cancel ends the wait early
	}
	if w.scheduled() && !w.cancelled {
		// Due now: take the next number in the user's due sequence (one due at
		// once got it on acceptance).
		if err := w.db(ctx, contract.AssignDue, contract.AssignDueInput{TenantID: w.in.TenantID,
			NotificationID: w.state.NotificationID, UserID: w.in.UserID}).Get(ctx, nil); err != nil {
			return w.state, err
		}
	}
	if !w.cancelled {
		if err := w.deliver(w.deliveryCtx); err != nil && !w.cancelled {
			return w.state, err
		}
	}
	if w.cancelled {
		// Let the cancel update finish recording before the final status.
		if err := workflow.Await(ctx, func() bool { return !w.cancelling }); err != nil {
			return w.state, err
		}
	}
	w.leaveLanes(ctx)
	if err := w.recordStatus(ctx); err != nil {
		return w.state, err
	}

	// Hold the workflow ID for the rest of the dedup window: while this run is open a
	// start with the same ID is rejected, which is the duplicate check.
	if wait := w.state.DedupUntil.Sub(workflow.Now(ctx)); wait > 0 {
		if err := workflow.Sleep(ctx, wait); err != nil {
			return w.state, err
		}
	}
	return w.state, nil
}

// scheduled: the notification waits for send_at (it becomes due then).
func (w *notification) scheduled() bool { return w.in.SendAt.After(w.state.AcceptedAt) }

// scheduleAll marks every channel scheduled until SendAt (RecordAccepted already
// wrote them so, in the same transaction as the notification).
func (w *notification) scheduleAll(ctx workflow.Context) {
	for _, ch := range w.in.Channels {
		cs := w.state.Channels[ch]
		cs.Status, cs.Reason, cs.UpdatedAt = herald.DeliveryScheduled, herald.ReasonSendAt, workflow.Now(ctx)
	}
	w.setStatus(ctx, herald.NotificationScheduled)
}

// deliver loads the recipient and delivers every channel.
func (w *notification) deliver(ctx workflow.Context) error {
	w.setStatus(ctx, herald.NotificationSending)
	if err := w.db(ctx, contract.LoadRecipient, contract.LoadRecipientInput{
		TenantID: w.in.TenantID, UserID: w.in.UserID, NotificationID: w.state.NotificationID,
	}).Get(ctx, &w.recipient); err != nil {
		w.endAll(ctx, err)
		return nil
	}
	return w.gateAndDeliver(ctx)
}

// endAll ends every channel after the recipient could not be read: suppressed
// with herald.ReasonUserDeleted when the user was erased after acceptance,
// failed with the error otherwise.
func (w *notification) endAll(ctx workflow.Context, err error) {
	for _, ch := range w.in.Channels {
		if contract.UnknownUser.Is(err) {
			w.suppress(ctx, ch, herald.ReasonUserDeleted)
		} else {
			w.finishChannel(ctx, ch, herald.DeliveryFailed, err, "")
		}
	}
}

// recordStatus records the overall status. The deliveries table has the last
// word (receipts may have arrived meanwhile); the workflow's own view is the
// fallback. The search attribute follows what was recorded.
func (w *notification) recordStatus(ctx workflow.Context) error {
	status := herald.OverallStatus(w.channelStatuses())
	if err := w.db(ctx, contract.RecordStatus, contract.RecordStatusInput{
		TenantID: w.in.TenantID, NotificationID: w.state.NotificationID, Status: status,
	}).Get(ctx, &status); err != nil {
		return err
	}
	w.setStatus(ctx, status)
	return nil
}

// channelStatuses lists the channels' statuses in the order they were requested.
func (w *notification) channelStatuses() []herald.DeliveryStatus {
	out := make([]herald.DeliveryStatus, 0, len(w.in.Channels))
	for _, ch := range w.in.Channels {
		out = append(out, w.state.Channels[ch].Status)
	}
	return out
}

func (w *notification) setStatus(ctx workflow.Context, status herald.NotificationStatus) {
	w.state.Status = status
	if err := workflow.UpsertTypedSearchAttributes(ctx, SearchAttrStatus.ValueSet(string(status))); err != nil {
		workflow.GetLogger(ctx).Warn("upserting status search attribute failed", "error", err)
	}
}
