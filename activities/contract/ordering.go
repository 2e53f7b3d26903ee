package contract

import (
	"time"

	"github.com/herald-notify/herald/internal/herald"
)

// Ordered delivery (docs/ordering.md): the notification workflow's ordered
// provider channels take their place in their lane when they become due
// (ClaimOrder), wait while a lower place is pending, record how the wait ended
// (FinishOrderWait) and, when they end, release the next one (ReleaseOrder).
const (
	ClaimOrder      = "ClaimOrder"
	ReleaseOrder    = "ReleaseOrder"
	FinishOrderWait = "FinishOrderWait"
)

// ClaimOrderInput is one ordered channel taking (or finding, when the API took
// it at acceptance) its place in the lane: the claim the store takes, as it is.
type ClaimOrderInput = herald.OrderClaim

// ClaimOrderResult is the channel's place: its seq, and the pending
// notification it waits behind ("": none, it may go at once).
type ClaimOrderResult struct {
	Channel herald.Channel
	Seq     int64
	Behind  string
}

// RecordAcceptedResult is what RecordAccepted found besides recording: the
// places of the ordered channels of a notification due at once
// (RecordAcceptedInput.Ordered), taken by the API at acceptance or, if it
// could not, now.
type RecordAcceptedResult struct {
	Places []ClaimOrderResult
}

// ReleaseOrderInput names the ordered channel that ended.
type ReleaseOrderInput struct {
	TenantID       string
	NotificationID string
	Channel        herald.Channel
}

// ReleaseOrderResult names the waiting successor to signal (empty WorkflowID:
// none).
type ReleaseOrderResult struct {
	WorkflowID     string
	RunID          string
	NotificationID string
	Channel        herald.Channel
}

// FinishOrderWaitInput records how an ordered channel's wait ended.
type FinishOrderWaitInput struct {
	TenantID       string
	NotificationID string
	Channel        herald.Channel
	Waited         time.Duration
	// TimedOut: the hold bound ran out (herald.ReasonOrderTimeout).
	TimedOut bool
}

// OrderReleased is the payload of the ordering-released signal: the channel
// of the receiving notification that may go now.
type OrderReleased struct {
	Channel herald.Channel
}
