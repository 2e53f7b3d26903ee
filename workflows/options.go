package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/herald-notify/herald/activities"
)

// databaseActivityOptions: PostgreSQL writes retry with backoff for up to a day, so a
// database outage delays notifications instead of losing them.
var databaseActivityOptions = workflow.ActivityOptions{
	StartToCloseTimeout:    10 * time.Second,
	ScheduleToCloseTimeout: 24 * time.Hour,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:        time.Second,
		BackoffCoefficient:     2,
		MaximumInterval:        time.Minute,
		NonRetryableErrorTypes: []string{activities.ErrTypeUnknownUser},
	},
}

// inAppActivityOptions: the inbox is PostgreSQL too; same policy.
var inAppActivityOptions = databaseActivityOptions
