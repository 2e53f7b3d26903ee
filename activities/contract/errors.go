package contract

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/herald-notify/herald/internal/herald"
)

// ErrorClass is one kind of Temporal application error Herald fails an activity,
// a workflow or a workflow update with: its type (what workflows, retry
// policies and the API client act on) and whether a retry can help. Building
// and reading these errors only through a class keeps the type and its
// retryability from drifting apart between the side that fails and the side
// that decides.
type ErrorClass string

// Error classes. The types workflows and retry policies act on are defined in
// herald (herald.ErrType*); the others name the failure for people (the
// Temporal UI, last_error) and nobody branches on them.
const (
	// UnknownUser: the recipient no longer exists.
	UnknownUser ErrorClass = herald.ErrTypeUnknownUser
	// ProviderPermanent: the provider refused the message for good.
	ProviderPermanent ErrorClass = herald.ErrTypeProviderPermanent
	// NoDevice: the user has no push token left.
	NoDevice ErrorClass = herald.ErrTypeNoDevice
	// RenderFailed: the template cannot produce the channel's content.
	RenderFailed ErrorClass = herald.ErrTypeRenderFailed
	// ContentTooLarge: the rendered content is over MaxRenderedBytes.
	ContentTooLarge ErrorClass = herald.ErrTypeContentTooLarge
	// NoProvider: no provider is configured for the channel (no sandbox fallback).
	NoProvider ErrorClass = herald.ErrTypeNoProvider
	// ProviderUnavailable: the provider failed in a way a later attempt may not
	// (an outage, a throttle); retryable.
	ProviderUnavailable ErrorClass = "ProviderUnavailable"
	// AlreadySent refuses a notification's cancel update (retryable: a refusal
	// says nothing about the notification's future).
	AlreadySent ErrorClass = herald.ErrTypeAlreadySent
	// CampaignFinal refuses a finished campaign's control update (retryable, as
	// AlreadySent).
	CampaignFinal ErrorClass = herald.ErrTypeCampaignFinal
	// CampaignQuota and CampaignAudience fail a campaign's start: its audience
	// does not fit the day's quota, or is over the operator's cap.
	CampaignQuota    ErrorClass = herald.ErrTypeCampaignQuota
	CampaignAudience ErrorClass = herald.ErrTypeCampaignAudience
	// BadPayload: a dead letter's stored payload does not decode.
	BadPayload ErrorClass = "BadPayload"
	// NotificationExpired: a dead letter's notification is gone (its history
	// past the retention): nothing is left to redrive.
	NotificationExpired ErrorClass = "NotificationExpired"
	// BadWorkflowID: a notification workflow's ID does not carry its dedup key.
	BadWorkflowID ErrorClass = "BadWorkflowID"
	// NoWebhookSender: this worker was started without a webhook sender.
	NoWebhookSender ErrorClass = "NoWebhookSender"
	// EndpointDisabled: the webhook endpoint is disabled.
	EndpointDisabled ErrorClass = "EndpointDisabled"
)

// retryable reports whether errors of the class may succeed on a retry.
func (c ErrorClass) retryable() bool {
	switch c {
	case ProviderUnavailable, AlreadySent, CampaignFinal:
		return true
	}
	return false
}

// New is an application error of the class with the message msg, wrapping
// cause (nil for none).
func (c ErrorClass) New(msg string, cause error) error {
	return temporal.NewApplicationErrorWithOptions(msg, string(c), temporal.ApplicationErrorOptions{
		NonRetryable: !c.retryable(), Cause: cause,
	})
}

// NewRetryAfter is New whose next retry comes no sooner than after (0: the
// retry policy's backoff), for a provider that said when to come back.
func (c ErrorClass) NewRetryAfter(msg string, cause error, after time.Duration) error {
	return temporal.NewApplicationErrorWithOptions(msg, string(c), temporal.ApplicationErrorOptions{
		NonRetryable: !c.retryable(), Cause: cause, NextRetryDelay: after,
	})
}

// Is reports whether err carries an application error of the class (through
// the activity or workflow error Temporal wraps it in).
func (c ErrorClass) Is(err error) bool { return ErrorType(err) == string(c) }

// applicationError is the first application error in err's chain.
func applicationError(err error) (*temporal.ApplicationError, bool) {
	var appErr *temporal.ApplicationError
	ok := errors.As(err, &appErr)
	return appErr, ok
}

// IsApplicationError reports whether err already carries an application error.
func IsApplicationError(err error) bool {
	_, ok := applicationError(err)
	return ok
}

// ErrorType is the type of the application error err carries ("" for none).
func ErrorType(err error) string {
	if appErr, ok := applicationError(err); ok {
		return appErr.Type()
	}
	return ""
}

// IsNonRetryable reports an application error marked non-retryable.
func IsNonRetryable(err error) bool {
	appErr, ok := applicationError(err)
	return ok && appErr.NonRetryable()
}

// IsPermanent reports a refusal no retry or redrive can change: an error
// marked non-retryable, or one of the classes that never succeed again
// whether or not the error was marked (retry policies list them too).
func IsPermanent(err error) bool {
	switch ErrorClass(ErrorType(err)) {
	case ProviderPermanent, NoDevice, RenderFailed, ContentTooLarge:
		return true
	}
	return IsNonRetryable(err)
}

// ErrorMessage is what err says for people: an application error's own
// message (without the activity error Temporal wraps around it), otherwise
// err.Error().
func ErrorMessage(err error) string {
	if appErr, ok := applicationError(err); ok {
		return appErr.Message()
	}
	return err.Error()
}

// FailureReason is the reason a channel whose delivery failed with err records
// (herald.FailureReason of its error type; "" for other errors).
func FailureReason(err error) herald.Reason { return herald.FailureReason(ErrorType(err)) }
