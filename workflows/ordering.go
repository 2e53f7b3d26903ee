package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/herald"
)

// Ordered delivery (docs/ordering.md). A provider channel of a notification
// with an ordering key has a place (seq) in its lane (tenant, user, channel,
// key), taken when it becomes due: by the API right after the workflow start
// for a notification due at once (RecordAccepted reads it), by joinLane at the
// top of channelFlow for a scheduled one. Right before it is handed to the
// provider (after quiet hours and render) awaitTurn waits while a lower place of the lane is pending, up to the
// hold bound; when the channel ends, however it ends, leaveLane marks its place
// done and signals the successor the release names. Claims and releases lock
// the lane's row, so a release never misses a waiting successor; a place only
// ever waits for lower ones, so waits cannot form a cycle.

// orderSlot is an ordered channel's place as the workflow knows it.
type orderSlot struct {
	seq    int64
	behind string // the pending notification it waits for ("": none)
	left   bool   // leaveLane ran
}

// ordered reports whether ch is an ordered channel: the notification has an
// ordering key and ch is a provider channel (the inbox has an order of its own).
func (w *notification) ordered(ch herald.Channel) bool {
	return w.in.OrderingKey != "" && herald.IsProviderChannel(ch)
}

// dueOrdered are the ordered channels of a notification due at once (the API
// took their places at acceptance; RecordAccepted returns them).
func (w *notification) dueOrdered() []herald.Channel {
	if w.in.OrderingKey == "" || !w.in.SendAt.IsZero() {
		return nil
	}
	var out []herald.Channel
	for _, ch := range w.in.Channels {
		if w.ordered(ch) {
			out = append(out, ch)
		}
	}
	return out
}

// takePlaces notes the channels' places and, for one that has to wait, starts
// listening for the release.
func (w *notification) takePlaces(ctx workflow.Context, places []contract.ClaimOrderResult) {
	for _, p := range places {
		w.lanes[p.Channel] = &orderSlot{seq: p.Seq, behind: p.Behind}
		if p.Behind == "" || w.listening {
			continue
		}
		w.listening = true
		signals := workflow.GetSignalChannel(ctx, SignalOrderingReleased)
		workflow.Go(ctx, func(ctx workflow.Context) {
			for {
				var r contract.OrderReleased
				signals.Receive(ctx, &r)
				w.released[r.Channel] = true
			}
		})
	}
}

// joinLane takes ch's place in its lane when it becomes due, unless it has one
// (a notification due at once got its places from RecordAccepted). A claim
// that fails (the channel was cancelled meanwhile) leaves the channel
// unordered; leaveLane still releases whatever place it has.
func (w *notification) joinLane(ctx workflow.Context, ch herald.Channel) {
	if w.lanes[ch] != nil {
		return
	}
	w.lanes[ch] = &orderSlot{}
	var res contract.ClaimOrderResult
	if err := w.db(ctx, contract.ClaimOrder, contract.ClaimOrderInput{
		TenantID: w.in.TenantID, UserID: w.in.UserID, Channel: ch, OrderingKey: w.in.OrderingKey,
		NotificationID: w.state.NotificationID, WorkflowID: w.info.WorkflowExecution.ID, RunID: w.info.WorkflowExecution.RunID,
	}).Get(ctx, &res); err != nil {
		workflow.GetLogger(ctx).Warn("taking the channel's place in its order lane failed; it is not held", "channel", ch, "error", err)
		return
	}
	res.Channel = ch
	w.takePlaces(ctx, []contract.ClaimOrderResult{res})
}

// awaitTurn waits, when ch is behind a pending notification of its lane, for
// the release signal or the hold bound; past the bound the channel goes with
// reason order_timeout. It returns an error only when the wait was cancelled.
func (w *notification) awaitTurn(ctx workflow.Context, ch herald.Channel) error {
	slot := w.lanes[ch]
	if slot == nil || slot.behind == "" {
		return nil
	}
	hold := w.in.OrderMaxHold
	if hold <= 0 {
		hold = herald.DefaultOrderMaxHold
	}
	start := workflow.Now(ctx)
	released, err := workflow.AwaitWithTimeout(ctx, hold, func() bool { return w.released[ch] })
	if err != nil {
		return err
	}
	if !released {
		w.state.Channels[ch].Reason = herald.ReasonOrderTimeout
	}
	if err := w.db(ctx, contract.FinishOrderWait, contract.FinishOrderWaitInput{
		TenantID: w.in.TenantID, NotificationID: w.state.NotificationID, Channel: ch,
		Waited: workflow.Now(ctx).Sub(start), TimedOut: !released,
	}).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("recording the channel's order wait failed", "channel", ch, "error", err)
	}
	return nil
}

// leaveLane marks ch's place done (sent, failed, suppressed, cancelled or
// dead-lettered) and signals the successor the release names, even when the
// delivery was cancelled.
func (w *notification) leaveLane(ctx workflow.Context, ch herald.Channel) {
	slot := w.lanes[ch]
	if slot == nil || slot.left {
		return // no place taken, or released already
	}
	slot.left = true
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	var next contract.ReleaseOrderResult
	if err := w.db(ctx, contract.ReleaseOrder, contract.ReleaseOrderInput{
		TenantID: w.in.TenantID, NotificationID: w.state.NotificationID, Channel: ch,
	}).Get(ctx, &next); err != nil {
		workflow.GetLogger(ctx).Error("releasing the channel's order place failed", "channel", ch, "error", err)
		return
	}
	if next.WorkflowID == "" {
		return
	}
	if err := workflow.SignalExternalWorkflow(ctx, next.WorkflowID, next.RunID, SignalOrderingReleased,
		contract.OrderReleased{Channel: next.Channel}).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("signalling the next ordered notification failed; it goes at its hold bound",
			"channel", ch, "next", next.NotificationID, "error", err)
	}
}

// leaveLanes releases the places of channels that never reached channelFlow
// (the user was deleted, the notification was cancelled before delivery, the
// gate failed): the API took them at acceptance. A scheduled notification
// takes its places only when its channels start.
func (w *notification) leaveLanes(ctx workflow.Context) {
	for _, ch := range w.dueOrdered() {
		w.leaveLane(ctx, ch)
	}
}
