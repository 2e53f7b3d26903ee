// Package activities holds the notification workflow's side effects: recording
// acceptance and status in PostgreSQL and delivering each channel. Activities are
// methods on Activities, which holds the injected dependencies.
package activities

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/herald-notify/herald/internal/ratelimit"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/unsubscribe"
	"github.com/herald-notify/herald/providers"
)

// ErrTypeUnknownUser marks a recipient that no longer exists: retrying cannot help.
const ErrTypeUnknownUser = "UnknownUser"

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
}

// RecordAcceptedInput describes the accepted notification.
type RecordAcceptedInput struct {
	TenantID       string
	NotificationID string
	UserID         string
	TemplateID     string
	Channels       []string
	WorkflowID     string
	RunID          string
	DedupKeyHash   string
	AcceptedAt     time.Time
	// TemplateVersion and Category record what the notification renders with.
	TemplateVersion int
	Category        string
	// Scheduled: delivery waits for send_at.
	Scheduled bool
}

// RecordAccepted writes the notification row, now being worked on ("sending"), and
// one pending delivery row per channel.
func (a *Activities) RecordAccepted(ctx context.Context, in RecordAcceptedInput) error {
	status := store.NotificationSending
	if in.Scheduled {
		status = store.NotificationScheduled
	}
	return a.Store.InsertNotification(ctx, store.Notification{
		TenantID: in.TenantID, ID: in.NotificationID, UserID: in.UserID, TemplateID: in.TemplateID,
		Channels: in.Channels, WorkflowID: in.WorkflowID, RunID: in.RunID, DedupKeyHash: in.DedupKeyHash,
		Status: status, AcceptedAt: in.AcceptedAt, TemplateVersion: in.TemplateVersion, Category: in.Category,
	})
}

// LoadRecipientInput names the user to load.
type LoadRecipientInput struct {
	TenantID string
	UserID   string
}

// Recipient is what rendering and delivery need to know about the user.
type Recipient struct {
	UserID   string
	Name     string
	Email    string
	Phone    string
	Locale   string
	Timezone string
}

// LoadRecipient reads the user's profile. A user deleted since acceptance is a
// non-retryable UnknownUser error.
func (a *Activities) LoadRecipient(ctx context.Context, in LoadRecipientInput) (Recipient, error) {
	u, err := a.Store.GetUser(ctx, in.TenantID, in.UserID)
	if errors.Is(err, store.ErrNotFound) {
		return Recipient{}, temporal.NewNonRetryableApplicationError("user "+in.UserID+" does not exist", ErrTypeUnknownUser, err)
	}
	if err != nil {
		return Recipient{}, err
	}
	return Recipient{UserID: u.UserID, Name: deref(u.Name), Email: deref(u.Email), Phone: deref(u.Phone),
		Locale: deref(u.Locale), Timezone: deref(u.Timezone)}, nil
}

// DeliverInAppInput is one rendered in-app message.
type DeliverInAppInput struct {
	TenantID       string
	UserID         string
	NotificationID string
	Title          string
	Body           string
	ActionURL      string
	AcceptedAt     time.Time
}

// DeliverResult reports a channel's outcome.
type DeliverResult struct {
	Status string
	// Duplicate is true when the guard found the channel already delivered.
	Duplicate bool
}

// DeliverInApp stores the inbox row. The inbox's primary key is the delivery guard:
// a retry after a crash inserts nothing and still reports delivered.
func (a *Activities) DeliverInApp(ctx context.Context, in DeliverInAppInput) (DeliverResult, error) {
	inserted, err := a.Store.DeliverToInbox(ctx, in.TenantID, in.UserID, in.NotificationID, in.Title, in.Body, in.ActionURL, in.AcceptedAt)
	if err != nil {
		return DeliverResult{}, err
	}
	return DeliverResult{Status: store.DeliveryDelivered, Duplicate: !inserted}, nil
}

// RecordChannelStatusInput records a channel outcome decided by the workflow itself
// (a failure after retries were exhausted, a suppression and its reason).
type RecordChannelStatusInput struct {
	TenantID       string
	NotificationID string
	Channel        string
	Status         string
	Error          string
	Reason         string
}

// RecordChannelStatus moves a delivery row forward.
func (a *Activities) RecordChannelStatus(ctx context.Context, in RecordChannelStatusInput) error {
	u := store.DeliveryUpdate{Status: in.Status}
	if in.Error != "" {
		u.LastError = &in.Error
	}
	if in.Reason != "" {
		u.Reason = &in.Reason
	}
	_, err := a.Store.UpdateDelivery(ctx, in.TenantID, in.NotificationID, in.Channel, u)
	return err
}

// RecordStatusInput names the notification whose overall status to record. Status
// is the workflow's own view, used only if the deliveries cannot say.
type RecordStatusInput struct {
	TenantID       string
	NotificationID string
	Status         string
}

// RecordStatus derives the overall status from the deliveries table, which also
// reflects receipts that arrived while the workflow ran, stores and returns it.
func (a *Activities) RecordStatus(ctx context.Context, in RecordStatusInput) (string, error) {
	status, err := a.Store.RecomputeNotificationStatus(ctx, in.TenantID, in.NotificationID)
	if errors.Is(err, store.ErrNotFound) {
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
