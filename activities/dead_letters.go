package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/webhooks"
)

// DeadLetter stores the dead letter and marks the channel failed (dead_lettered).
func (a *Activities) DeadLetter(ctx context.Context, in contract.DeadLetterInput) (int64, error) {
	// The attempts actually made (a Retry-After or an expiration can end retries early).
	if n, err := a.Store.CountAttempts(ctx, in.TenantID, in.NotificationID, in.Channel); err == nil && n > 0 {
		in.Attempts = n
	}
	payload, err := json.Marshal(in.Payload)
	if err != nil {
		return 0, err
	}
	d, err := a.Store.PutDeadLetter(ctx, store.DeadLetter{TenantID: in.TenantID, NotificationID: in.NotificationID,
		Channel: in.Channel, TemplateID: in.TemplateID, Attempts: in.Attempts, LastError: errorText(in.LastError), Payload: payload})
	if err != nil {
		return 0, err
	}
	if _, err := a.Store.RecomputeNotificationStatus(ctx, in.TenantID, in.NotificationID); err != nil {
		return 0, err
	}
	a.Metrics.DeadLetter(in.Channel)
	a.emit(ctx, webhooks.Event{TenantID: in.TenantID, NotificationID: in.NotificationID, Channel: in.Channel,
		Status: herald.DeliveryFailed, Type: herald.EventDeliveryDeadLettered, Reason: herald.ReasonDeadLettered,
		Error: errorText(in.LastError), KeyExtra: strconv.FormatInt(d.ID, 10)})
	return d.ID, nil
}

// BeginRedrive claims the dead letter and returns what the redrive needs to
// re-check and repeat it: the payload, the retry overrides, and the
// notification's user, category and criticality.
//
// A dead letter whose notification is gone (its history expired after the API
// accepted the redrive) is not claimed: the redrive fails with
// NotificationExpired, not retried, and the dead letter stays open until
// maintenance deletes it.
func (a *Activities) BeginRedrive(ctx context.Context, in contract.BeginRedriveInput) (contract.BeginRedriveResult, error) {
	if d, err := a.Store.GetDeadLetter(ctx, in.TenantID, in.DeadLetterID); err == nil {
		if _, _, err := a.Store.NotificationStatus(ctx, in.TenantID, d.NotificationID); errors.Is(err, herald.ErrNotFound) {
			return contract.BeginRedriveResult{}, contract.NotificationExpired.New(
				fmt.Sprintf("dead letter %d: notification %s is past its retention and its history is deleted", d.ID, d.NotificationID), nil)
		} else if err != nil {
			return contract.BeginRedriveResult{}, err
		}
	} else if !errors.Is(err, herald.ErrNotFound) {
		return contract.BeginRedriveResult{}, err
	}
	d, ok, err := a.Store.BeginRedrive(ctx, in.TenantID, in.DeadLetterID)
	if err != nil || !ok {
		return contract.BeginRedriveResult{}, err
	}
	var p contract.RedrivePayload
	if err := json.Unmarshal(d.Payload, &p); err != nil {
		return contract.BeginRedriveResult{}, contract.BadPayload.New(fmt.Sprintf("dead letter %d payload: %v", d.ID, err), err)
	}
	ts, err := a.Store.GetTenantSettings(ctx, in.TenantID)
	if err != nil {
		return contract.BeginRedriveResult{}, err
	}
	target, err := a.Store.RedriveTargetOf(ctx, in.TenantID, d.NotificationID)
	if err != nil {
		return contract.BeginRedriveResult{}, err
	}
	return contract.BeginRedriveResult{Claimed: true, NotificationID: d.NotificationID, Channel: d.Channel, TemplateID: d.TemplateID,
		Payload: p, RetryPolicies: ts.RetryPolicies, UserID: target.UserID, Category: target.Category,
		// Critical as at accept time: the template says so and the operator allows the tenant.
		Critical: target.Critical && ts.AllowCritical}, nil
}

// ReopenRedrive reopens the dead letter's delivery for the guard (failed → sending).
func (a *Activities) ReopenRedrive(ctx context.Context, in contract.ReopenRedriveInput) error {
	return a.Store.ReopenRedrive(ctx, in.TenantID, in.DeadLetterID)
}

// FinishRedrive marks the dead letter redriven; with a SuppressedReason the
// channel is recorded suppressed with it (nothing was sent).
func (a *Activities) FinishRedrive(ctx context.Context, in contract.FinishRedriveInput) error {
	if in.SuppressedReason != "" {
		return a.Store.FinishRedriveSuppressed(ctx, in.TenantID, in.DeadLetterID, in.SuppressedReason)
	}
	return a.Store.FinishRedrive(ctx, in.TenantID, in.DeadLetterID)
}
