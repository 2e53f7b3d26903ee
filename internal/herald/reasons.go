package herald

// Reason says why a channel was not delivered (or not yet): the status API, the
// workflow's query and the deliveries table show it. The campaign's owed work
// (campaign_pending.reason) uses them too, with ReasonRetrying and
// ReasonInDoubt (campaigns.go).
type Reason string

// The reasons.
const (
	// Preferences, evaluated before anything is rendered.
	ReasonOptedOutChannel  Reason = "opted_out_channel"
	ReasonOptedOutCategory Reason = "opted_out_category"
	ReasonQuietHours       Reason = "quiet_hours"
	// ReasonCapExceeded: the user's per-category cap for the rolling 24 h is used
	// up (critical notifications are exempt).
	ReasonCapExceeded Reason = "cap_exceeded"
	// ReasonNoAddress: no email address, phone number or push token.
	ReasonNoAddress Reason = "no_address"
	// ReasonAddressSuppressed: the user's email address or phone number is on the
	// tenant's suppression list (a hard bounce, a spam report, an unsubscribe, an
	// SMS STOP, or the tenant's own entry: suppressions.go). Decided before
	// rendering, for critical notifications too: there is no one to send to.
	ReasonAddressSuppressed Reason = "address_suppressed"
	// ReasonSendAt: the notification waits for its send_at.
	ReasonSendAt Reason = "send_at"
	// ReasonCancelled: the tenant cancelled the notification.
	ReasonCancelled Reason = "cancelled_by_request"
	// ReasonRenderFailed: the template could not render this channel from the data.
	ReasonRenderFailed Reason = "render_failed"
	// ReasonContentTooLarge: the rendered channel is over the size Herald carries
	// through Temporal (contract.MaxRenderedBytes).
	ReasonContentTooLarge Reason = "content_too_large"
	// ReasonDeadLettered: retries ran out; the dead letter can be redriven.
	ReasonDeadLettered Reason = "dead_lettered"
	// ReasonNoProvider: the tenant configured no provider for the channel and the
	// worker does not fall back to the sandbox (production): the channel failed
	// without a send. Configure a provider (PUT /v1/providers/{channel}) and send again.
	ReasonNoProvider Reason = "no_provider"
	// ReasonUserDeleted: the user was erased (DELETE /v1/users/{user_id}) while
	// the notification was pending: nothing is sent (docs/erasure.md).
	ReasonUserDeleted Reason = "user_deleted"
	// ReasonOrderTimeout: an ordered channel (an ordering key) waited for an
	// earlier notification of its lane still pending on that channel for the
	// whole hold bound (max_hold) and was handed to the provider anyway
	// (docs/ordering.md).
	ReasonOrderTimeout Reason = "order_timeout"
)
