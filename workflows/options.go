package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/herald-notify/herald/internal/herald"
)

// databaseRetryPolicy: PostgreSQL work retries with backoff for up to a day, so a
// database outage delays notifications instead of losing them.
var databaseRetryPolicy = &temporal.RetryPolicy{
	InitialInterval:        time.Second,
	BackoffCoefficient:     2,
	MaximumInterval:        time.Minute,
	NonRetryableErrorTypes: []string{herald.ErrTypeUnknownUser},
}

// databaseActivityOptions are the redrive workflow's database activities.
var databaseActivityOptions = workflow.ActivityOptions{
	StartToCloseTimeout:    10 * time.Second,
	ScheduleToCloseTimeout: 24 * time.Hour,
	RetryPolicy:            databaseRetryPolicy,
}

// localDatabaseOptions: the notification workflow's database work (record, load,
// render, in-app delivery, status) runs as local activities inside the workflow
// task, saving two server round trips each; provider sends stay regular
// activities (heartbeats, long retries, per-channel isolation, rate limits).
var localDatabaseOptions = workflow.LocalActivityOptions{
	StartToCloseTimeout:    databaseActivityOptions.StartToCloseTimeout,
	ScheduleToCloseTimeout: databaseActivityOptions.ScheduleToCloseTimeout,
	RetryPolicy:            databaseRetryPolicy,
}

// db runs one database activity of the notification workflow, locally.
func (w *notification) db(ctx workflow.Context, activity string, args ...any) workflow.Future {
	return workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, localDatabaseOptions), activity, args...)
}

// providerTimeouts per provider channel, so each can be tuned on its own; a slow
// email provider never holds up SMS or push: each channel is its own activity.
// The heartbeat timeout notices a worker that died mid-send within seconds; the
// activity heartbeats while the provider call runs.
var providerTimeouts = map[herald.Channel]time.Duration{
	herald.ChannelEmail: 30 * time.Second,
	herald.ChannelSMS:   30 * time.Second,
	herald.ChannelPush:  60 * time.Second,
}

const providerHeartbeatTimeout = 5 * time.Second

// providerOptions are a provider channel's activity options: the default retry
// policy (herald.DefaultProviderRetry) with the tenant's override applied, or the
// default alone when the override is invalid (see validRetryPolicies).
// Permanent refusals are never retried.
func providerOptions(channel herald.Channel, override map[herald.Channel]herald.RetryPolicy) workflow.ActivityOptions {
	p := herald.DefaultProviderRetry
	if o, ok := override[channel]; ok && o.Validate() == nil {
		p = o.Over(herald.DefaultProviderRetry)
	}
	return workflow.ActivityOptions{
		StartToCloseTimeout:    providerTimeouts[channel],
		ScheduleToCloseTimeout: p.Expiration.Duration,
		HeartbeatTimeout:       providerHeartbeatTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        p.InitialInterval.Duration,
			BackoffCoefficient:     p.BackoffCoefficient,
			MaximumInterval:        p.MaximumInterval.Duration,
			MaximumAttempts:        int32(p.MaximumAttempts),
			NonRetryableErrorTypes: []string{herald.ErrTypeProviderPermanent, herald.ErrTypeNoDevice},
		},
	}
}

// validRetryPolicies drops, with a warning, every stored override that
// herald.RetryPolicy.Validate refuses. PUT /v1/settings refuses them, but one
// stored before that check (or written around the API) must not reach Temporal:
// it refuses to schedule an activity with such a policy, the workflow task fails
// on every attempt and the notification hangs holding its dedup key. The send
// goes out with the default policy instead. providerOptions applies the same
// rule; this is where it is logged, once per run.
func validRetryPolicies(ctx workflow.Context, policies map[herald.Channel]herald.RetryPolicy) map[herald.Channel]herald.RetryPolicy {
	out := map[herald.Channel]herald.RetryPolicy{}
	for _, ch := range herald.ProviderChannels {
		p, ok := policies[ch]
		if !ok {
			continue
		}
		if err := p.Validate(); err != nil {
			workflow.GetLogger(ctx).Warn("ignoring the tenant's invalid retry policy; using the default", "channel", ch, "error", err)
			continue
		}
		out[ch] = p
	}
	return out
}
