package herald

// Inbox event kinds: the inbox_events table and the stream's SSE event names.
const (
	// InboxItemCreated: a new item arrived (a delivery).
	InboxItemCreated = "item.created"
	// InboxItemUpdated: one item was marked seen, read, unread, archived or unarchived.
	InboxItemUpdated = "item.updated"
	// InboxAllRead and InboxAllSeen: every unarchived item was marked read / seen.
	InboxAllRead = "all.read"
	InboxAllSeen = "all.seen"
	// InboxItemsRemoved: items went for the inbox's cap or age limit
	// (docs/retention.md); the event carries the counts after, no item.
	InboxItemsRemoved = "items.removed"
)

// InboxRefetch is the stream's control event: the client's Last-Event-ID is older
// than the kept history (or unknown); it must refetch the list and counts, then
// go on from the event id it carries.
const InboxRefetch = "refetch"

// Inbox item actions (POST /v1/users/{user_id}/inbox/{notification_id}/{action}).
const (
	InboxActionSeen      = "seen"
	InboxActionRead      = "read"
	InboxActionUnread    = "unread"
	InboxActionArchive   = "archive"
	InboxActionUnarchive = "unarchive"
)

// InboxActions lists every item action.
var InboxActions = []string{InboxActionSeen, InboxActionRead, InboxActionUnread, InboxActionArchive, InboxActionUnarchive}
