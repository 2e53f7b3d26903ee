package herald

import "errors"

// ErrNotFound: the row or resource does not exist for the tenant (another
// tenant's is "not found" too). dbx.NotFound translates pgx.ErrNoRows into it, once.
var ErrNotFound = errors.New("not found")

// Error types of Temporal application errors that activities return and
// workflows and retry policies act on.
const (
	// ErrTypeUnknownUser: the recipient no longer exists; retrying cannot help.
	ErrTypeUnknownUser = "UnknownUser"
	// ErrTypeProviderPermanent: the provider refused the message for good (invalid
	// address, unsubscribed recipient, dead token, rejected credentials).
	ErrTypeProviderPermanent = "ProviderPermanent"
	// ErrTypeNoDevice: the user has no push token left.
	ErrTypeNoDevice = "NoDevice"
	// ErrTypeRenderFailed: the template cannot produce this channel's content from
	// the data (a render error, an oversized push payload).
	ErrTypeRenderFailed = "RenderFailed"
	// ErrTypeContentTooLarge: a channel's rendered content is over
	// contract.MaxRenderedBytes, too large to carry through Temporal safely.
	ErrTypeContentTooLarge = "ContentTooLarge"
	// ErrTypeAlreadySent rejects a cancel once a channel is being or was sent, or
	// every channel already ended.
	ErrTypeAlreadySent = "AlreadySent"
	// ErrTypeNoProvider: the tenant configured no provider for the channel and this
	// worker does not fall back to the sandbox (HERALD_SANDBOX_FALLBACK is false,
	// the default of `herald worker`). Non-retryable: the channel fails with
	// ReasonNoProvider.
	ErrTypeNoProvider = "NoProvider"
)

// failureReasons maps the error type a delivery activity failed with to the reason
// the failed channel records. Error types not listed record no reason (the error
// message says what happened).
var failureReasons = map[string]Reason{
	ErrTypeNoProvider: ReasonNoProvider,
}

// FailureReason is the reason a channel whose delivery failed with an error of
// type errType records ("" when the type has none).
func FailureReason(errType string) Reason { return failureReasons[errType] }
