// Package activities holds the notification workflow's side effects: recording
// acceptance and status in PostgreSQL and delivering each channel. Activities are
// methods on Activities, which holds the injected dependencies.
package activities

import (
	"context"
	"errors"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/metrics"
	"github.com/herald-notify/herald/internal/ratelimit"
	"github.com/herald-notify/herald/internal/retention"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/unsubscribe"
	"github.com/herald-notify/herald/internal/webhooks"
	"github.com/herald-notify/herald/providers"
)

// Activities is registered with the worker; workflows reference its methods through
// a nil *Activities.
type Activities struct {
	Store     *store.Store
	Providers *providers.Store
	Senders   SenderResolver
	// Unsubscribe signs one-click unsubscribe links under PublicBaseURL; nil leaves
	// them out.
	Unsubscribe   *unsubscribe.Signer
	PublicBaseURL string
	// Limiter enforces provider accounts' send rates; nil enforces none.
	Limiter *ratelimit.Limiter
	// Metrics records delivery outcomes, provider latency, retries, dead
	// letters and suppressions; nil records nothing.
	Metrics *metrics.Metrics
	// Webhooks queues tenant status webhook events; WebhookSender sends them
	// (nil: none).
	Webhooks      *webhooks.Emitter
	WebhookSender *webhooks.Sender
	// Digests feeds digests (DigestAdd's signal-with-start); nil refuses them.
	Digests DigestSignaler
	// Retention is the operator's retention policy the maintenance activities
	// enforce (zero: retention.Defaults).
	Retention retention.Policy

	// NoDueSequence leaves notifications unnumbered (app.Options.NoDueSequence:
	// the due-order bench's floor).
	NoDueSequence bool
	// ErasureKey keys store.ErasedUserID: a notification whose user was erased
	// after it was accepted is anonymised with it when its workflow finds the
	// user gone.
	ErasureKey []byte

	// campaignDataCache holds the data of the campaigns this worker sends.
	campaignDataCache campaignDataCache
}

// DigestSignaler signals a digest's workflow with an event, starting it when
// no run is open (workflows.Client).
type DigestSignaler interface {
	SignalDigest(ctx context.Context, workflowID, taskQueue string, in contract.DigestInput, ev contract.DigestEvent) error
	// SignalDigestEvent signals on lane's task queue (the sweeper's signals).
	SignalDigestEvent(ctx context.Context, lane herald.Lane, in contract.DigestInput, ev contract.DigestEvent) error
}

// ProviderInbox is the provider label of in-app deliveries (the inbox table).
const ProviderInbox = "inbox"

// RecordAccepted writes the notification row, now being worked on ("sending"), and
// one pending delivery row per channel; a notification due now that the accept
// path could not number is numbered in its user's due sequence; for a
// notification due now with ordered channels it returns their places in their
// lanes (ordering.go).
func (a *Activities) RecordAccepted(ctx context.Context, in contract.RecordAcceptedInput) (contract.RecordAcceptedResult, error) {
	status := herald.NotificationSending
	if in.Scheduled {
		status = herald.NotificationScheduled
	}
	if err := a.Store.InsertNotification(ctx, store.Notification{
		TenantID: in.TenantID, ID: in.NotificationID, UserID: in.UserID, TemplateID: in.TemplateID,
		Channels: in.Channels, WorkflowID: in.WorkflowID, RunID: in.RunID, DedupKeyHash: in.DedupKeyHash,
		Status: status, AcceptedAt: in.AcceptedAt, TemplateVersion: in.TemplateVersion, Category: in.Category,
		Dedup: &store.Dedup{KeyHash: in.DedupKeyHash, BodyHash: in.BodyHash, FirstSeenAt: in.AcceptedAt, DedupUntil: &in.DedupUntil},
		Due:   !in.Scheduled && !a.NoDueSequence,
	}); err != nil {
		return contract.RecordAcceptedResult{}, err
	}
	if in.OrderingKey == "" || len(in.Ordered) == 0 {
		return contract.RecordAcceptedResult{}, nil
	}
	claims := make([]herald.OrderClaim, 0, len(in.Ordered))
	for _, ch := range in.Ordered {
		claims = append(claims, herald.OrderClaim{TenantID: in.TenantID, UserID: in.UserID, Channel: ch, OrderingKey: in.OrderingKey,
			NotificationID: in.NotificationID, WorkflowID: in.WorkflowID, RunID: in.RunID})
	}
	places, err := a.orderPlaces(ctx, claims)
	return contract.RecordAcceptedResult{Places: places}, err
}

// AssignDue numbers a scheduled notification in its user's due sequence when
// its send_at has come (the accept path, or RecordAccepted, numbers the others)
// and returns the number; a retry returns the same one.
func (a *Activities) AssignDue(ctx context.Context, in contract.AssignDueInput) (int64, error) {
	if a.NoDueSequence {
		return 0, nil
	}
	// A user erased while the notification waited is not numbered again (the
	// erasure removed the sequence): LoadRecipient then ends it user_deleted.
	if ok, err := a.Store.UserExists(ctx, in.TenantID, in.UserID); err != nil || !ok {
		return 0, err
	}
	return a.Store.AssignDue(ctx, in.TenantID, in.UserID, in.NotificationID)
}

// LoadRecipient reads the user's profile. A user deleted since acceptance is a
// non-retryable UnknownUser error.
func (a *Activities) LoadRecipient(ctx context.Context, in contract.LoadRecipientInput) (contract.Recipient, error) {
	u, err := a.Store.GetUser(ctx, in.TenantID, in.UserID)
	if errors.Is(err, herald.ErrNotFound) {
		if in.NotificationID != "" {
			// Accepted just before the user's erasure: the notification row may
			// have been written after the erasure's pass over the user's rows.
			if err := a.Store.AnonymiseNotificationUser(ctx, in.TenantID, in.NotificationID, in.UserID,
				store.ErasedUserID(a.ErasureKey, in.TenantID, in.UserID)); err != nil {
				return contract.Recipient{}, err
			}
		}
		return contract.Recipient{}, contract.UnknownUser.New("user does not exist (erased since acceptance)", err)
	}
	if err != nil {
		return contract.Recipient{}, err
	}
	return contract.Recipient{UserID: u.UserID, Name: deref(u.Name), Email: deref(u.Email), Phone: deref(u.Phone),
		Locale: deref(u.Locale), Timezone: deref(u.Timezone)}, nil
}

// recipientPresent fails with contract.UnknownUser when the notification's
// user was erased since the workflow loaded it (nothing is delivered then).
func (a *Activities) recipientPresent(ctx context.Context, tenantID, notificationID string) error {
	gone, err := a.Store.NotificationRecipientGone(ctx, tenantID, notificationID)
	if err != nil {
		return err
	}
	if gone {
		return contract.UnknownUser.New("the notification's user was erased", nil)
	}
	return nil
}

// DeliverInApp stores the inbox row. The store's check for the user's item of the
// notification, under the user's inbox state lock, is the delivery guard: a retry
// after a crash inserts nothing and still reports delivered.
func (a *Activities) DeliverInApp(ctx context.Context, in contract.DeliverInAppInput) (contract.DeliverResult, error) {
	if err := a.recipientPresent(ctx, in.TenantID, in.NotificationID); err != nil {
		return contract.DeliverResult{}, err
	}
	inserted, err := a.Store.DeliverToInbox(ctx, store.NewInboxItem{TenantID: in.TenantID, UserID: in.UserID,
		NotificationID: in.NotificationID, Title: in.Title, Body: in.Body, ActionURL: in.ActionURL, Category: in.Category, CreatedAt: in.AcceptedAt})
	if err != nil {
		return contract.DeliverResult{}, err
	}
	outcome := metrics.OutcomeDelivered
	if !inserted {
		outcome = metrics.OutcomeDuplicate
	}
	a.Metrics.Delivery(in.TenantID, herald.ChannelInApp, ProviderInbox, outcome)
	a.emit(ctx, webhooks.Event{TenantID: in.TenantID, NotificationID: in.NotificationID, Channel: herald.ChannelInApp,
		Status: herald.DeliveryDelivered, Provider: ProviderInbox})
	return contract.DeliverResult{Status: herald.DeliveryDelivered, Duplicate: !inserted}, nil
}

// RecordChannelStatus moves a delivery row forward.
func (a *Activities) RecordChannelStatus(ctx context.Context, in contract.RecordChannelStatusInput) error {
	u := store.DeliveryUpdate{Status: in.Status}
	if in.Error != "" {
		msg := errorText(in.Error)
		u.LastError = &msg
	}
	if in.Reason != "" {
		u.Reason = &in.Reason
	}
	changed, err := a.Store.UpdateDelivery(ctx, in.TenantID, in.NotificationID, in.Channel, u)
	if err == nil && changed && in.Status == herald.DeliverySuppressed {
		a.Metrics.Suppression(in.TenantID, in.Channel, in.Reason)
	}
	if err == nil {
		a.emit(ctx, webhooks.Event{TenantID: in.TenantID, NotificationID: in.NotificationID, Channel: in.Channel,
			Status: in.Status, Reason: in.Reason, Error: in.Error})
	}
	return err
}

// RecordStatus derives the overall status from the deliveries table, which also
// reflects receipts that arrived while the workflow ran, stores and returns it.
func (a *Activities) RecordStatus(ctx context.Context, in contract.RecordStatusInput) (herald.NotificationStatus, error) {
	status, err := a.Store.RecomputeNotificationStatus(ctx, in.TenantID, in.NotificationID)
	if errors.Is(err, herald.ErrNotFound) {
		return in.Status, a.Store.SetNotificationStatus(ctx, in.TenantID, in.NotificationID, in.Status)
	}
	return status, err
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
