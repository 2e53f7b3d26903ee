// Package workflows holds Herald's Temporal workflows. NotificationWorkflow is one
// accepted notification: its workflow ID is the Layer-1 dedup key, and it stays open
// until the dedup window ends so that a duplicate start is rejected by Temporal itself.
package workflows

import (
	"go.temporal.io/sdk/temporal"

	"github.com/herald-notify/herald/internal/herald"
)

// LaneTaskQueue is the task queue of a lane (herald.Lanes): the base queue for
// normal traffic, base-critical and base-bulk for the others.
func LaneTaskQueue(base string, lane herald.Lane) string {
	if lane == herald.LaneNormal || lane == "" {
		return base
	}
	return base + "-" + string(lane)
}

// QueryStatus returns the workflow's NotificationState.
const QueryStatus = "status"

// SignalOrderingReleased tells a notification waiting for its turn in an order
// lane that the earlier ones ended (payload contract.OrderReleased: the channel).
const SignalOrderingReleased = "ordering-released"

// UpdateCancel cancels a notification not yet sent on any channel; it is rejected
// (herald.ErrTypeAlreadySent) otherwise.
const UpdateCancel = "cancel"

// Search attributes (all Keyword), so operators can find a notification or a
// campaign in the Temporal UI by tenant, user, status, notification or campaign.
// `herald migrate` (and `herald dev`) registers every one in SearchAttributes on
// the namespace; nothing else lists them.
var (
	SearchAttrTenant         = temporal.NewSearchAttributeKeyKeyword("HeraldTenant")
	SearchAttrUser           = temporal.NewSearchAttributeKeyKeyword("HeraldUser")
	SearchAttrStatus         = temporal.NewSearchAttributeKeyKeyword("HeraldStatus")
	SearchAttrNotificationID = temporal.NewSearchAttributeKeyKeyword("HeraldNotificationId")
	// SearchAttrCampaign names the campaign of a campaign workflow, so the
	// Temporal UI finds it (and through it every recipient's notification) by
	// campaign id.
	SearchAttrCampaign = temporal.NewSearchAttributeKeyKeyword("HeraldCampaign")
)

// SearchAttributes is every Herald search attribute: the one list registration
// (worker.EnsureSearchAttributes) works from. A key added above goes here too.
var SearchAttributes = []temporal.SearchAttributeKeyKeyword{
	SearchAttrTenant, SearchAttrUser, SearchAttrStatus, SearchAttrNotificationID, SearchAttrCampaign,
}
