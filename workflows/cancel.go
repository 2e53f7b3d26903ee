package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/herald"
)

// validateCancel admits a cancel only while no channel is being or has been sent.
func (w *notification) validateCancel(ctx workflow.Context) error {
	if w.cancelled {
		return nil // cancelling twice answers the same
	}
	waiting := 0
	for _, ch := range w.in.Channels {
		switch w.state.Channels[ch].Status {
		case herald.DeliverySending, herald.DeliverySent, herald.DeliveryDelivered:
			return contract.AlreadySent.New("the notification was already sent on "+string(ch), nil)
		case herald.DeliveryPending, herald.DeliveryScheduled:
			waiting++
		}
	}
	if waiting == 0 {
		// Every channel already ended (failed, suppressed): nothing is left to cancel,
		// and a dead letter stays redrivable.
		return contract.AlreadySent.New("every channel has already finished", nil)
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
	return w.state, w.recordStatus(ctx)
}
