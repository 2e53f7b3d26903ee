package herald

// Reasons say why a channel was not delivered (or not yet): the status API, the
// workflow's query and the deliveries table show them.
const (
	// Preferences, evaluated before anything is rendered.
	ReasonOptedOutChannel  = "opted_out_channel"
	ReasonOptedOutCategory = "opted_out_category"
	ReasonQuietHours       = "quiet_hours"
	// ReasonCapExceeded: the user's per-category cap for the rolling 24 h is used
	// up (critical notifications are exempt).
	ReasonCapExceeded = "cap_exceeded"
	// ReasonNoAddress: no email address, phone number or push token.
	ReasonNoAddress = "no_address"
	// ReasonSendAt: the notification waits for its send_at.
	ReasonSendAt = "send_at"
	// ReasonCancelled: the tenant cancelled the notification.
	ReasonCancelled = "cancelled_by_request"
	// ReasonRenderFailed: the template could not render this channel from the data.
	ReasonRenderFailed = "render_failed"
	// ReasonContentTooLarge: the rendered channel is over the size Herald carries
	// through Temporal (contract.MaxRenderedBytes).
	ReasonContentTooLarge = "content_too_large"
	// ReasonDeadLettered: retries ran out; the dead letter can be redriven.
	ReasonDeadLettered = "dead_lettered"
	// ReasonNoProvider: the tenant configured no provider for the channel and the
	// worker does not fall back to the sandbox (production): the channel failed
	// without a send. Configure a provider (PUT /v1/providers/{channel}) and send again.
	ReasonNoProvider = "no_provider"
)
