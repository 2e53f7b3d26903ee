package workflows

import (
	"time"

	"github.com/herald-notify/herald/internal/herald"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
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
		NonRetryableErrorTypes: []string{herald.ErrTypeUnknownUser},
	},
}

// localDatabaseOptions: the same policy for database work run as local activities.
var localDatabaseOptions = workflow.LocalActivityOptions{
	StartToCloseTimeout:    databaseActivityOptions.StartToCloseTimeout,
	ScheduleToCloseTimeout: databaseActivityOptions.ScheduleToCloseTimeout,
	RetryPolicy:            databaseActivityOptions.RetryPolicy,
}

// providerRetryPolicy retries a provider send with exponential backoff (1 s, 2 s,
// 4 s … capped at 5 min) for up to 12 attempts; a provider's Retry-After overrides
// the next delay. Permanent refusals are not retried.
var providerRetryPolicy = &temporal.RetryPolicy{
	InitialInterval:        time.Second,
	BackoffCoefficient:     2,
	MaximumInterval:        5 * time.Minute,
	MaximumAttempts:        12,
	NonRetryableErrorTypes: []string{herald.ErrTypeProviderPermanent, herald.ErrTypeNoDevice},
}

// One option set per provider channel, so each can be tuned on its own; a slow
// email provider never holds up SMS or push: each channel is its own activity.
// The heartbeat timeout notices a worker that died mid-send within seconds; the
// activity heartbeats while the provider call runs.
var (
	emailActivityOptions = workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second, HeartbeatTimeout: 5 * time.Second, RetryPolicy: providerRetryPolicy}
	smsActivityOptions   = workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second, HeartbeatTimeout: 5 * time.Second, RetryPolicy: providerRetryPolicy}
	pushActivityOptions  = workflow.ActivityOptions{StartToCloseTimeout: 60 * time.Second, HeartbeatTimeout: 5 * time.Second, RetryPolicy: providerRetryPolicy}
)

// providerOptions are a provider channel's activity options with the tenant's
// retry override (zero fields keep the default) applied.
func providerOptions(channel string, override map[string]herald.RetryPolicy) workflow.ActivityOptions {
	var opts workflow.ActivityOptions
	switch channel {
	case herald.ChannelEmail:
		opts = emailActivityOptions
	case herald.ChannelSMS:
		opts = smsActivityOptions
	default:
		opts = pushActivityOptions
	}
	o, ok := override[channel]
	if !ok {
		return opts
	}
	rp := *opts.RetryPolicy
	if o.InitialInterval.Duration > 0 {
		rp.InitialInterval = o.InitialInterval.Duration
	}
	if o.BackoffCoefficient >= 1 {
		rp.BackoffCoefficient = o.BackoffCoefficient
	}
	if o.MaximumInterval.Duration > 0 {
		rp.MaximumInterval = o.MaximumInterval.Duration
	}
	if o.MaximumAttempts > 0 {
		rp.MaximumAttempts = int32(o.MaximumAttempts)
	}
	if o.Expiration.Duration > 0 {
		opts.ScheduleToCloseTimeout = o.Expiration.Duration
	}
	opts.RetryPolicy = &rp
	return opts
}
