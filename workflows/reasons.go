package workflows

import (
	"errors"

	"go.temporal.io/sdk/temporal"

	"github.com/herald-notify/herald/internal/herald"
)

// failureReason is the reason a channel whose delivery failed with err records:
// herald.FailureReason of the activity's error type (no_provider for a channel
// without a provider), "" for other errors.
func failureReason(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return herald.FailureReason(appErr.Type())
	}
	return ""
}
