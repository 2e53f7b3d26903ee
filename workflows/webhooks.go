package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/herald-notify/herald/activities/contract"
)

// Tenant status webhooks. Each endpoint has one workflow
// (WebhookEndpointWorkflowID) on a task queue of its own
// (WebhookTaskQueue): it reads the endpoint's queue from PostgreSQL and sends
// it, each message one DeliverWebhook activity retried with exponential
// backoff until WebhookRetry.For has passed, then dead-lettered. Messages of
// one notification go one at a time in queue order; up to
// MaxParallelNotifications notifications are in flight at once, so one
// message an endpoint keeps refusing holds back only its own notification's
// later events. A slow or failing endpoint only ever occupies its own
// workflow and the webhook lane's bounded slots: never a notification's
// delivery, never another endpoint's queue.

// The webhook workflow's names and input live in activities/contract, so
// internal/webhooks (which the activities import) can start it.
const SignalWebhookWake = contract.SignalWebhookWake

// WebhookEndpointInput names the endpoint.
type WebhookEndpointInput = contract.WebhookEndpointInput

// WebhookRetry is the backoff of one message.
type WebhookRetry = contract.WebhookRetry

// WebhookEndpointWorkflowID is the endpoint's workflow ID.
func WebhookEndpointWorkflowID(tenantID, endpointID string) string {
	return contract.WebhookEndpointWorkflowID(tenantID, endpointID)
}

// WebhookTaskQueue is the webhook lane's task queue.
func WebhookTaskQueue(base string) string { return contract.WebhookTaskQueue(base) }

// Webhook queue bounds.
const (
	// MaxParallelNotifications bounds one endpoint's messages in flight.
	MaxParallelNotifications = 4
	// webhookFetch is how many queued messages one read returns.
	webhookFetch = 100
	// webhookIdle ends an endpoint's workflow after this long with nothing
	// queued (the next event starts it again).
	webhookIdle = 5 * time.Minute
	// webhookRounds bounds the history: then the workflow continues as new.
	webhookRounds = 200
)

func withDefaults(r WebhookRetry) WebhookRetry {
	if r.Initial <= 0 {
		r.Initial = contract.DefaultWebhookRetryInitial
	}
	if r.MaxInterval <= 0 {
		r.MaxInterval = contract.DefaultWebhookRetryMaxInterval
	}
	if r.For <= 0 {
		r.For = contract.DefaultWebhookRetryFor
	}
	return r
}

// WebhookEndpointWorkflow sends an endpoint's queue (see above).
func WebhookEndpointWorkflow(ctx workflow.Context, in WebhookEndpointInput) error {
	w := &webhookEndpoint{in: in, retry: withDefaults(in.Retry), active: map[string]bool{}}
	return w.run(ctx)
}

type webhookEndpoint struct {
	in    WebhookEndpointInput
	retry WebhookRetry
	// active: notification id → its messages are being sent.
	active  map[string]bool
	changed bool
}

func (w *webhookEndpoint) run(ctx workflow.Context) error {
	wake := workflow.GetSignalChannel(ctx, SignalWebhookWake)
	dbCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: time.Minute},
	})
	for round := 0; ; round++ {
		var pending []contract.PendingWebhook
		if err := workflow.ExecuteActivity(dbCtx, contract.ListPendingWebhooks, contract.ListPendingWebhooksInput{
			TenantID: w.in.TenantID, EndpointID: w.in.EndpointID, Limit: webhookFetch,
		}).Get(ctx, &pending); err != nil {
			return err
		}
		// After webhookRounds the history is long enough: start no new chain,
		// let the running ones finish, then continue as new.
		draining := round >= webhookRounds
		if !draining {
			w.startChains(ctx, dbCtx, pending)
		}
		if len(w.active) == 0 {
			if draining {
				return workflow.NewContinueAsNewError(ctx, WebhookEndpointWorkflow, w.in)
			}
			// Nothing queued: wait for a wake-up, or end when idle long enough.
			woken := false
			timerCtx, cancel := workflow.WithCancel(ctx)
			sel := workflow.NewSelector(ctx)
			sel.AddReceive(wake, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil); woken = true })
			sel.AddFuture(workflow.NewTimer(timerCtx, webhookIdle), func(workflow.Future) {})
			sel.Select(ctx)
			cancel()
			if !woken && !drain(wake) {
				return nil
			}
		} else {
			_ = workflow.Await(ctx, func() bool { return w.changed || wake.Len() > 0 })
		}
		drain(wake)
		w.changed = false
	}
}

// drain consumes every wake-up already received; it reports whether there was one.
func drain(c workflow.ReceiveChannel) bool {
	got := false
	for c.ReceiveAsync(nil) {
		got = true
	}
	return got
}

// startChains starts, for each notification with queued messages and none in
// flight (up to MaxParallelNotifications), a goroutine that sends its messages
// one after the other in queue order.
func (w *webhookEndpoint) startChains(ctx, dbCtx workflow.Context, pending []contract.PendingWebhook) {
	var order []string
	byNotification := map[string][]int64{}
	for _, p := range pending {
		if w.active[p.NotificationID] {
			continue
		}
		if _, ok := byNotification[p.NotificationID]; !ok {
			order = append(order, p.NotificationID)
		}
		byNotification[p.NotificationID] = append(byNotification[p.NotificationID], p.ID)
	}
	for _, n := range order {
		if len(w.active) >= MaxParallelNotifications {
			return
		}
		w.active[n] = true
		ids := byNotification[n]
		workflow.Go(ctx, func(ctx workflow.Context) {
			for _, id := range ids {
				w.deliver(ctx, dbCtx, id)
			}
			delete(w.active, n)
			w.changed = true
		})
	}
}

// deliver sends one message with backoff; when its retries run out it is
// dead-lettered (replayable through the API).
func (w *webhookEndpoint) deliver(ctx, dbCtx workflow.Context, id int64) {
	msg := contract.WebhookMessageInput{TenantID: w.in.TenantID, EndpointID: w.in.EndpointID, MessageID: id}
	sendCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    time.Minute,
		ScheduleToCloseTimeout: w.retry.For,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: w.retry.Initial, BackoffCoefficient: 2,
			MaximumInterval: w.retry.MaxInterval},
	})
	if err := workflow.ExecuteActivity(sendCtx, contract.DeliverWebhook, msg).Get(ctx, nil); err == nil {
		return
	}
	if err := workflow.ExecuteActivity(dbCtx, contract.DeadLetterWebhook, msg).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Error("dead-lettering a webhook message failed", "message", id, "error", err)
	}
}
