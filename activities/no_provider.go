package activities

import (
	"errors"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/providers"
)

// chainError is the delivery activity's error when no provider chain could be
// resolved. No configured provider (and no sandbox fallback) is final for this
// delivery: a contract.NoProvider error (non-retryable), which the workflow
// records as the channel failed with reason no_provider (herald.FailureReason).
// Anything else (the config could not be read or opened) is retried.
func chainError(err error) error {
	if errors.Is(err, providers.ErrNoProvider) {
		return contract.NoProvider.New(err.Error(), err)
	}
	return err
}
