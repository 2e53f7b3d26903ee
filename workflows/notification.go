package workflows

import (
	"errors"
	"fmt"
	"html"
	"sort"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/herald-notify/herald/activities"
	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
)

// NotificationInput is what the API accepted.
type NotificationInput struct {
	TenantID    string
	UserID      string
	TemplateID  string
	Channels    []string
	Data        map[string]any
	DedupWindow time.Duration
	// TemplateVersion is the template version accepted with the notification; 0
	// means a notification from before templates (rendered from data alone).
	TemplateVersion int
	// Category and Critical are the template's, for preferences and caps.
	Category string
	Critical bool
	// SendAt delays delivery to that time (zero: now); the notification is
	// "scheduled" until then and can be cancelled.
	SendAt time.Time
}

// ChannelState is one channel's progress as the workflow knows it.
type ChannelState struct {
	Status    string
	Attempts  int
	LastError string
	Reason    string
	UpdatedAt time.Time
}

// NotificationState answers QueryStatus and is the workflow's result.
type NotificationState struct {
	NotificationID string
	UserID         string
	TemplateID     string
	Status         string
	AcceptedAt     time.Time
	DedupUntil     time.Time
	Channels       map[string]*ChannelState
}

// NotificationResult is the workflow's result.
type NotificationResult = NotificationState

var a *activities.Activities

// NotificationWorkflow delivers one notification on each requested channel, records
// per-channel and overall status, then holds the dedup window open.
func NotificationWorkflow(ctx workflow.Context, in NotificationInput) (NotificationResult, error) {
	w, err := newNotification(ctx, in)
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

	// deliveryCtx is cancelled by the cancel update: waits end and nothing more is
	// scheduled for delivery.
	deliveryCtx    workflow.Context
	cancelDelivery workflow.CancelFunc
	cancelled      bool
	// recorded: the notification and delivery rows exist (RecordAccepted ran).
	recorded bool
	// cancelling: the cancel update is still recording; the final status waits for it.
	cancelling bool
	// local: database activities run as local activities (runs started since
	// changeLocalActivities); earlier runs keep their regular activities.
	local bool
	// retry holds the tenant's per-channel retry overrides.
	retry map[string]herald.RetryPolicy
}

// setup derives the notification id and registers the status query.
func newNotification(ctx workflow.Context, in NotificationInput) (*notification, error) {
	info := workflow.GetInfo(ctx)
	key, err := ids.KeyHashFromWorkflowID(info.WorkflowExecution.ID)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), "BadWorkflowID", err)
	}
	w := &notification{in: in, info: info, keyHex: key.String()}
	w.state = NotificationState{
		NotificationID: ids.NotificationID(key, info.WorkflowExecution.RunID),
		UserID:         in.UserID,
		TemplateID:     in.TemplateID,
		Status:         herald.NotificationQueued,
		AcceptedAt:     info.WorkflowStartTime,
		DedupUntil:     info.WorkflowStartTime.Add(in.DedupWindow),
		Channels:       map[string]*ChannelState{},
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

// validateCancel admits a cancel only while no channel is being or has been sent.
func (w *notification) validateCancel(ctx workflow.Context) error {
	if w.cancelled {
		return nil // cancelling twice answers the same
	}
	waiting := 0
	for _, ch := range w.in.Channels {
		switch w.state.Channels[ch].Status {
		case herald.DeliverySending, herald.DeliverySent, herald.DeliveryDelivered:
			return temporal.NewApplicationError("the notification was already sent on "+ch, herald.ErrTypeAlreadySent)
		case herald.DeliveryPending, herald.DeliveryScheduled:
			waiting++
		}
	}
	if waiting == 0 {
		// Every channel already ended (failed, suppressed): nothing is left to cancel,
		// and a dead letter stays redrivable.
		return temporal.NewApplicationError("every channel has already finished", herald.ErrTypeAlreadySent)
	}
	return nil
}

// cancel stops every channel not yet delivered: scheduled sends and quiet-hours
// waits end, and they are recorded cancelled.
func (w *notification) cancel(ctx workflow.Context) (NotificationState, error) {
	if w.cancelled {
		return w.state, nil
	}
	w.cancelled, w.cancelling = true, true
	defer func() { w.cancelling = false }()
	w.cancelDelivery()
	// The rows to mark cancelled must exist first (a cancel can arrive right after
	// the start, before RecordAccepted ran).
	if err := workflow.Await(ctx, func() bool { return w.recorded }); err != nil {
		return w.state, err
	}
	for _, ch := range w.in.Channels {
		switch w.state.Channels[ch].Status {
		case herald.DeliveryPending, herald.DeliveryScheduled:
			w.finishChannel(ctx, ch, herald.DeliveryCancelled, nil, herald.ReasonCancelled)
		}
	}
	status := overallStatus(w.state.Channels)
	if err := w.db(ctx, a.RecordStatus, contract.RecordStatusInput{
		TenantID: w.in.TenantID, NotificationID: w.state.NotificationID, Status: status,
	}).Get(ctx, &status); err != nil {
		return w.state, err
	}
	w.setStatus(ctx, status)
	return w.state, nil
}

func (w *notification) run(ctx workflow.Context) (NotificationResult, error) {
	w.local = workflow.GetVersion(ctx, changeLocalActivities, workflow.DefaultVersion, 1) == 1
	if err := workflow.UpsertTypedSearchAttributes(ctx, SearchAttrNotificationID.ValueSet(w.state.NotificationID)); err != nil {
		return w.state, err
	}
	if err := w.db(ctx, a.RecordAccepted, contract.RecordAcceptedInput{
		TenantID: w.in.TenantID, NotificationID: w.state.NotificationID, UserID: w.in.UserID,
		TemplateID: w.in.TemplateID, Channels: w.in.Channels, WorkflowID: w.info.WorkflowExecution.ID,
		RunID: w.info.WorkflowExecution.RunID, DedupKeyHash: w.keyHex, AcceptedAt: w.state.AcceptedAt,
		TemplateVersion: w.in.TemplateVersion, Category: w.in.Category, Scheduled: w.in.SendAt.After(w.state.AcceptedAt),
	}).Get(ctx, nil); err != nil {
		return w.state, err
	}
	w.recorded = true
	if wait := w.in.SendAt.Sub(workflow.Now(ctx)); !w.in.SendAt.IsZero() && wait > 0 && !w.cancelled {
		w.scheduleAll(ctx)
		_ = workflow.Sleep(w.deliveryCtx, wait) // a cancel ends the wait early
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

	status := overallStatus(w.state.Channels)
	record := w.db
	if workflow.GetVersion(ctx, changeStatusFromDeliveries, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		// Runs started before provider channels: search attribute first, status as computed.
		w.setStatus(ctx, status)
		if err := record(ctx, a.RecordStatus, contract.RecordStatusInput{
			TenantID: w.in.TenantID, NotificationID: w.state.NotificationID, Status: status,
		}).Get(ctx, nil); err != nil {
			return w.state, err
		}
	} else {
		// The deliveries table has the last word: receipts may have arrived meanwhile.
		if err := record(ctx, a.RecordStatus, contract.RecordStatusInput{
			TenantID: w.in.TenantID, NotificationID: w.state.NotificationID, Status: status,
		}).Get(ctx, &status); err != nil {
			return w.state, err
		}
		w.setStatus(ctx, status)
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

// deliver loads the recipient and delivers every channel.
func (w *notification) deliver(ctx workflow.Context) error {
	w.setStatus(ctx, herald.NotificationSending)
	err := w.db(ctx, a.LoadRecipient, contract.LoadRecipientInput{
		TenantID: w.in.TenantID, UserID: w.in.UserID,
	}).Get(ctx, &w.recipient)
	switch {
	case err != nil:
		// The user was deleted after acceptance: every channel fails with the reason.
		for _, ch := range w.in.Channels {
			w.finishChannel(ctx, ch, herald.DeliveryFailed, err, "")
		}
	case w.in.TemplateVersion == 0:
		w.deliverAll(ctx, simpleContent(w.in.TemplateID, w.in.Data))
	default:
		return w.gateAndDeliver(ctx)
	}
	return nil
}

// scheduleAll marks every channel scheduled until SendAt (RecordAccepted already
// wrote them so, in the same transaction as the notification).
func (w *notification) scheduleAll(ctx workflow.Context) {
	for _, ch := range w.in.Channels {
		cs := w.state.Channels[ch]
		cs.Status, cs.Reason, cs.UpdatedAt = herald.DeliveryScheduled, herald.ReasonSendAt, workflow.Now(ctx)
	}
	w.setStatus(ctx, herald.NotificationScheduled)
}

// deliverAll delivers the same content on each channel, independently (a
// notification accepted before templates existed).
func (w *notification) deliverAll(ctx workflow.Context, c content) {
	w.eachChannel(ctx, func(ctx workflow.Context, ch string) { w.deliverChannel(ctx, ch, c) })
}

// eachChannel runs fn for every channel concurrently and waits for all: one
// channel's retries or quiet-hours wait never delay another.
func (w *notification) eachChannel(ctx workflow.Context, fn func(ctx workflow.Context, channel string)) {
	wg := workflow.NewWaitGroup(ctx)
	for _, ch := range w.in.Channels {
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			fn(ctx, ch)
		})
	}
	wg.Wait(ctx)
}

// content is one channel's rendered message.
type content struct {
	Title, Body, ActionURL string            // in-app and push
	Subject, HTML, Text    string            // email
	Headers                map[string]string // email
	SMS                    string
	PushData               map[string]string
}

// simpleContent renders every channel from data alone (before templates).
func simpleContent(templateID string, data map[string]any) content {
	title, body := renderSimple(templateID, data)
	return content{Title: title, Body: body, Subject: title, Text: body, HTML: "<p>" + html.EscapeString(body) + "</p>", SMS: body}
}

func (w *notification) deliverChannel(ctx workflow.Context, channel string, c content) {
	w.state.Channels[channel].Status = herald.DeliverySending
	tenant, id := w.in.TenantID, w.state.NotificationID
	var p contract.RedrivePayload
	switch channel {
	case herald.ChannelInApp:
		w.finishDelivery(ctx, channel, w.db(ctx, a.DeliverInApp,
			contract.DeliverInAppInput{TenantID: tenant, UserID: w.in.UserID, NotificationID: id, Title: c.Title, Body: c.Body,
				ActionURL: c.ActionURL, AcceptedAt: w.state.AcceptedAt}), p)
		return
	case herald.ChannelEmail:
		if w.recipient.Email == "" {
			w.suppress(ctx, channel, herald.ReasonNoAddress)
			return
		}
		p.Email = &contract.DeliverEmailInput{TenantID: tenant, NotificationID: id, To: w.recipient.Email, Subject: c.Subject,
			Text: c.Text, HTML: c.HTML, Headers: c.Headers, Category: w.in.Category}
	case herald.ChannelSMS:
		if w.recipient.Phone == "" {
			w.suppress(ctx, channel, herald.ReasonNoAddress)
			return
		}
		p.SMS = &contract.DeliverSMSInput{TenantID: tenant, NotificationID: id, To: w.recipient.Phone, Body: c.SMS}
	case herald.ChannelPush:
		p.Push = &contract.DeliverPushInput{TenantID: tenant, NotificationID: id, UserID: w.in.UserID, Title: c.Title, Body: c.Body, Data: c.PushData}
	default:
		// The API rejects unknown channels; a history from a newer binary must not
		// silently drop one, so record it as failed with the reason.
		w.finishChannel(ctx, channel, herald.DeliveryFailed, fmt.Errorf("channel %q is not supported by this worker", channel), "")
		return
	}
	w.finishDelivery(ctx, channel, executeDelivery(ctx, p, w.retry), p)
}

// executeDelivery runs the provider delivery activity a payload describes (also
// used by a redrive, so both go through the same guard).
func executeDelivery(ctx workflow.Context, p contract.RedrivePayload, retry map[string]herald.RetryPolicy) workflow.Future {
	switch {
	case p.Email != nil:
		return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, providerOptions(herald.ChannelEmail, retry)), a.DeliverEmail, *p.Email)
	case p.SMS != nil:
		return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, providerOptions(herald.ChannelSMS, retry)), a.DeliverSMS, *p.SMS)
	default:
		return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, providerOptions(herald.ChannelPush, retry)), a.DeliverPush, *p.Push)
	}
}

// finishDelivery records a delivery's outcome. A provider channel whose retries
// ran out (not a permanent refusal) is dead-lettered with its payload for a redrive.
func (w *notification) finishDelivery(ctx workflow.Context, channel string, fut workflow.Future, p contract.RedrivePayload) {
	var res contract.DeliverResult
	err := fut.Get(ctx, &res)
	if err == nil {
		w.setChannel(ctx, channel, res.Status, "")
		return
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == herald.ErrTypeNoDevice {
		w.suppress(ctx, channel, herald.ReasonNoAddress)
		return
	}
	if channel == herald.ChannelInApp || w.cancelled || isFinal(err) || workflow.GetVersion(ctx, changeDeadLetters, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		w.finishChannel(ctx, channel, herald.DeliveryFailed, err, "")
		return
	}
	w.setChannel(ctx, channel, herald.DeliveryFailed, errorMessage(err))
	w.state.Channels[channel].Reason = herald.ReasonDeadLettered
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	if derr := w.db(dctx, a.DeadLetter, contract.DeadLetterInput{
		TenantID: w.in.TenantID, NotificationID: w.state.NotificationID, Channel: channel, TemplateID: w.in.TemplateID,
		Attempts: int(providerOptions(channel, w.retry).RetryPolicy.MaximumAttempts), LastError: errorMessage(err), Payload: p,
	}).Get(ctx, nil); derr != nil {
		workflow.GetLogger(ctx).Error("dead-lettering failed", "channel", channel, "error", derr)
	}
}

// isFinal reports a refusal that no retry or redrive can change.
func isFinal(err error) bool {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) {
		return false
	}
	switch appErr.Type() {
	case herald.ErrTypeProviderPermanent, herald.ErrTypeNoDevice, herald.ErrTypeRenderFailed:
		return true
	}
	return appErr.NonRetryable()
}

// changeLocalActivities: database work (record, load, render, in-app delivery,
// status) runs as local activities inside the workflow task, saving two server
// round trips each; provider sends stay regular activities (heartbeats, long
// retries, per-channel isolation, rate limits).
const changeLocalActivities = "local-database-activities"

// db runs a database activity: local for runs that started with local activities,
// regular for the runs started before.
func (w *notification) db(ctx workflow.Context, activity any, args ...any) workflow.Future {
	if w.local {
		return workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, localDatabaseOptions), activity, args...)
	}
	return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, databaseActivityOptions), activity, args...)
}

// changeDeadLetters: exhausted provider retries are dead-lettered.
const changeDeadLetters = "dead-letters"

// changeStatusFromDeliveries: the overall status is read back from the deliveries
// table (receipts included) before the search attribute is set.
const changeStatusFromDeliveries = "status-from-deliveries"

// suppress records that a channel was not attempted, and why.
func (w *notification) suppress(ctx workflow.Context, channel, reason string) {
	w.finishChannel(ctx, channel, herald.DeliverySuppressed, nil, reason)
}

// finishChannel records a channel outcome the workflow decided (the activity that
// would have recorded it failed, or the channel was suppressed), in PostgreSQL as
// well as in the query state.
func (w *notification) finishChannel(ctx workflow.Context, channel, status string, cause error, reason string) {
	if w.cancelled && status == herald.DeliveryFailed {
		// The work was interrupted by the cancel, not failed by a provider.
		status, cause, reason = herald.DeliveryCancelled, nil, herald.ReasonCancelled
	}
	// Record even when the delivery context was cancelled.
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	msg := ""
	if cause != nil {
		msg = errorMessage(cause)
	}
	w.setChannel(ctx, channel, status, msg)
	w.state.Channels[channel].Reason = reason
	if err := w.db(ctx, a.RecordChannelStatus, contract.RecordChannelStatusInput{
		TenantID: w.in.TenantID, NotificationID: w.state.NotificationID, Channel: channel, Status: status, Error: msg, Reason: reason,
	}).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Error("recording channel status failed", "channel", channel, "error", err)
	}
}

func (w *notification) setChannel(ctx workflow.Context, channel, status, lastError string) {
	cs := w.state.Channels[channel]
	cs.Status = status
	cs.Attempts++
	if lastError != "" {
		cs.LastError = lastError
	}
	cs.UpdatedAt = workflow.Now(ctx)
}

func (w *notification) setStatus(ctx workflow.Context, status string) {
	w.state.Status = status
	if err := workflow.UpsertTypedSearchAttributes(ctx, SearchAttrStatus.ValueSet(status)); err != nil {
		workflow.GetLogger(ctx).Warn("upserting status search attribute failed", "error", err)
	}
}

// overallStatus summarises the channels: all delivered → delivered; all at least
// sent → sent; all failed → failed; some failed → partially_failed.
func overallStatus(chs map[string]*ChannelState) string {
	var delivered, sent, failed, suppressed, cancelled, scheduled, other int
	// Counting is independent of map order.
	//workflowcheck:ignore
	for _, cs := range chs {
		switch cs.Status {
		case herald.DeliveryDelivered:
			delivered++
		case herald.DeliverySent:
			sent++
		case herald.DeliveryFailed:
			failed++
		case herald.DeliverySuppressed:
			suppressed++
		case herald.DeliveryCancelled:
			cancelled++
		case herald.DeliveryScheduled:
			scheduled++
			other++
		default:
			other++
		}
	}
	n := len(chs)
	switch {
	case scheduled > 0 && scheduled == other:
		return herald.NotificationScheduled
	case other > 0:
		return herald.NotificationSending
	case failed == n:
		return herald.NotificationFailed
	case failed > 0:
		return herald.NotificationPartiallyFailed
	case cancelled == n:
		return herald.NotificationCancelled
	case suppressed+cancelled == n:
		return herald.NotificationSuppressed
	case sent == 0:
		return herald.NotificationDelivered
	default:
		return herald.NotificationSent
	}
}

// renderSimple builds title and body from data until templates exist: data.title and
// data.body when given, otherwise the template ID and the data's fields.
func renderSimple(templateID string, data map[string]any) (title, body string) {
	if t, ok := data["title"].(string); ok && t != "" {
		title = t
	} else {
		title = strings.ReplaceAll(templateID, "_", " ")
	}
	if b, ok := data["body"].(string); ok && b != "" {
		return title, b
	}
	keys := make([]string, 0, len(data))
	// The keys are sorted below.
	//workflowcheck:ignore
	for k := range data {
		if k != "title" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s: %v", k, data[k]))
	}
	return title, strings.Join(parts, ", ")
}

func errorMessage(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Message()
	}
	return err.Error()
}
