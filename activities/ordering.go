package activities

import (
	"context"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/herald"
)

// The ordered-delivery activities (docs/ordering.md): the notification workflow
// runs them as local activities, each one transaction on the lane's row.

// ClaimOrder takes the channel's place in its lane when a scheduled
// notification becomes due (a retry finds it), and says whom it waits behind.
func (a *Activities) ClaimOrder(ctx context.Context, in contract.ClaimOrderInput) (contract.ClaimOrderResult, error) {
	places, err := a.orderPlaces(ctx, []herald.OrderClaim{in})
	if err != nil {
		return contract.ClaimOrderResult{}, err
	}
	return places[0], nil
}

// orderPlaces takes (or finds) the places of a notification's ordered channels.
func (a *Activities) orderPlaces(ctx context.Context, claims []herald.OrderClaim) ([]contract.ClaimOrderResult, error) {
	places, err := a.Store.ClaimOrderHandoffs(ctx, claims, true)
	if err != nil {
		return nil, err
	}
	out := make([]contract.ClaimOrderResult, 0, len(places))
	for _, p := range places {
		out = append(out, contract.ClaimOrderResult{Channel: p.Channel, Seq: p.Seq, Behind: p.Behind})
	}
	return out, nil
}

// ReleaseOrder marks the channel's hand-off done and names the successor the
// workflow signals (none when nothing waits, or something lower still pends).
func (a *Activities) ReleaseOrder(ctx context.Context, in contract.ReleaseOrderInput) (contract.ReleaseOrderResult, error) {
	next, ok, err := a.Store.ReleaseOrderHandoff(ctx, in.TenantID, in.NotificationID, in.Channel)
	if err != nil || !ok {
		return contract.ReleaseOrderResult{}, err
	}
	return contract.ReleaseOrderResult{WorkflowID: next.WorkflowID, RunID: next.RunID,
		NotificationID: next.NotificationID, Channel: next.Channel}, nil
}

// FinishOrderWait records how long the channel waited and whether its hold
// bound ran out (then the delivery's reason is order_timeout).
func (a *Activities) FinishOrderWait(ctx context.Context, in contract.FinishOrderWaitInput) error {
	return a.Store.FinishOrderWait(ctx, in.TenantID, in.NotificationID, in.Channel, in.Waited, in.TimedOut)
}
