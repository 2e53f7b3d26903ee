package activities

import (
	"context"
	"errors"

	"go.temporal.io/sdk/activity"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/webhooks"
)

// ListPendingWebhooks reads an endpoint's queue, oldest first.
func (a *Activities) ListPendingWebhooks(ctx context.Context, in contract.ListPendingWebhooksInput) ([]contract.PendingWebhook, error) {
	ps, err := a.Store.PendingWebhookMessages(ctx, in.TenantID, in.EndpointID, 0, in.Limit)
	if err != nil {
		return nil, err
	}
	out := make([]contract.PendingWebhook, 0, len(ps))
	for _, p := range ps {
		out = append(out, contract.PendingWebhook{ID: p.ID, NotificationID: p.NotificationID})
	}
	return out, nil
}

// DeliverWebhook makes one signed attempt at a queued message and records it
// (listed by GET /v1/webhook-endpoints/{id}/attempts). A non-2xx answer or a
// connection error is retried by Temporal with backoff; a disabled endpoint
// fails at once (the message is dead-lettered, replayable after enabling).
func (a *Activities) DeliverWebhook(ctx context.Context, in contract.WebhookMessageInput) error {
	if a.WebhookSender == nil {
		return contract.NoWebhookSender.New("this worker sends no webhooks", nil)
	}
	out, err := a.WebhookSender.Send(ctx, in.TenantID, in.EndpointID, in.MessageID)
	switch {
	case errors.Is(err, webhooks.ErrEndpointGone):
		return nil
	case errors.Is(err, webhooks.ErrEndpointDisabled):
		return contract.EndpointDisabled.New(err.Error(), err)
	case err != nil:
		return err
	}
	at := store.WebhookAttempt{Outcome: store.WebhookDelivered, DurationMS: int(out.Took.Milliseconds())}
	if out.StatusCode != 0 {
		code := out.StatusCode
		at.StatusCode = &code
	}
	if out.Err != nil {
		msg := webhooks.ErrorText(out.Err)
		at.Outcome, at.Error = "failed", &msg
	}
	if err := a.Store.RecordWebhookAttempt(context.WithoutCancel(ctx), in.TenantID, in.EndpointID, in.MessageID, at); err != nil {
		activity.GetLogger(ctx).Warn("recording the webhook attempt failed", "error", err)
	}
	a.Metrics.WebhookAttempt(at.Outcome)
	return out.Err
}

// DeadLetterWebhook marks a message whose retries ran out dead-lettered.
func (a *Activities) DeadLetterWebhook(ctx context.Context, in contract.WebhookMessageInput) error {
	ok, err := a.Store.DeadLetterWebhookMessage(ctx, in.TenantID, in.EndpointID, in.MessageID)
	if ok {
		a.Metrics.WebhookDeadLetter()
	}
	return err
}

// emit queues a tenant webhook event (best effort for the notification: a
// failure is logged, never fails the delivery it reports).
func (a *Activities) emit(ctx context.Context, ev webhooks.Event) {
	if err := a.Webhooks.Emit(context.WithoutCancel(ctx), ev); err != nil {
		activity.GetLogger(ctx).Warn("queueing the webhook event failed", "event", ev.Type, "error", err)
	}
}
