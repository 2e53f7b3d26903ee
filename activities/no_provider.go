package activities

import (
	"errors"

	"go.temporal.io/sdk/temporal"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/providers"
)

// chainError is the delivery activity's error when no provider chain could be
// resolved. No configured provider (and no sandbox fallback) is final for this
// delivery: a non-retryable herald.ErrTypeNoProvider error, which the workflow
// records as the channel failed with reason no_provider (herald.FailureReason).
// Anything else (the config could not be read or opened) is retried.
func chainError(err error) error {
	if errors.Is(err, providers.ErrNoProvider) {
		return temporal.NewNonRetryableApplicationError(err.Error(), herald.ErrTypeNoProvider, err)
	}
	return err
}
