// Package workflows holds Herald's Temporal workflows. NotificationWorkflow is one
// accepted notification: its workflow ID is the Layer-1 dedup key, and it stays open
// until the dedup window ends so that a duplicate start is rejected by Temporal itself.
package workflows

import "go.temporal.io/sdk/temporal"

// TaskQueue is the default notification task queue (config HERALD_TASK_QUEUE).
const TaskQueue = "herald-notifications"

// QueryStatus returns the workflow's NotificationState.
const QueryStatus = "status"

// Search attributes registered on the Temporal server (make run / make test do it),
// so operators can find a notification in the Temporal UI by tenant, user or status.
var (
	SearchAttrTenant         = temporal.NewSearchAttributeKeyKeyword("HeraldTenant")
	SearchAttrUser           = temporal.NewSearchAttributeKeyKeyword("HeraldUser")
	SearchAttrStatus         = temporal.NewSearchAttributeKeyKeyword("HeraldStatus")
	SearchAttrNotificationID = temporal.NewSearchAttributeKeyKeyword("HeraldNotificationId")
)

// SearchAttributeNames lists every Herald search attribute (all Keyword) for
// registration.
func SearchAttributeNames() []string {
	return []string{
		SearchAttrTenant.GetName(), SearchAttrUser.GetName(),
		SearchAttrStatus.GetName(), SearchAttrNotificationID.GetName(),
	}
}

// Channel names.
const (
	ChannelInApp = "in_app"
	ChannelEmail = "email"
	ChannelSMS   = "sms"
	ChannelPush  = "push"
)
