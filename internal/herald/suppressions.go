package herald

// SuppressionReason says why an address is on a tenant's suppression list
// (the suppressions table, GET /v1/suppressions). A send to a listed address
// ends suppressed with ReasonAddressSuppressed, whichever put it there.
type SuppressionReason string

// The suppression reasons.
const (
	// SuppressionBounce: SendGrid reported a hard bounce (event "bounce" that is
	// not a "blocked" soft bounce): the mailbox does not exist.
	SuppressionBounce SuppressionReason = "bounce"
	// SuppressionDropped: SendGrid dropped a message without trying (the address
	// is on SendGrid's own suppression lists or invalid).
	SuppressionDropped SuppressionReason = "dropped"
	// SuppressionSpamReport: the recipient marked an email as spam.
	SuppressionSpamReport SuppressionReason = "spamreport"
	// SuppressionUnsubscribe: the recipient unsubscribed through SendGrid (its
	// global unsubscribe, not one of Herald's category links).
	SuppressionUnsubscribe SuppressionReason = "unsubscribe"
	// SuppressionStop: the phone replied STOP (or a synonym) to the tenant's
	// Twilio number; START, UNSTOP or YES removes it.
	SuppressionStop SuppressionReason = "stop"
	// SuppressionManual: the tenant added it (PUT /v1/suppressions/{address}).
	SuppressionManual SuppressionReason = "manual"
)

// SuppressionSource says who put an address on the list.
type SuppressionSource string

// The suppression sources.
const (
	SuppressionSourceSendGrid SuppressionSource = "sendgrid"
	SuppressionSourceTwilio   SuppressionSource = "twilio"
	SuppressionSourceAPI      SuppressionSource = "api"
)
