package activities

import (
	"context"
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/herald-notify/herald/internal/store"
)

// RedrivePayload is a dead-lettered delivery's activity input: exactly one is set.
type RedrivePayload struct {
	Email *DeliverEmailInput `json:",omitempty"`
	SMS   *DeliverSMSInput   `json:",omitempty"`
	Push  *DeliverPushInput  `json:",omitempty"`
}

// DeadLetterInput dead-letters a channel whose retries ran out.
type DeadLetterInput struct {
	TenantID       string
	NotificationID string
	Channel        string
	TemplateID     string
	Attempts       int
	LastError      string
	Payload        RedrivePayload
}

// DeadLetter stores the dead letter and marks the channel failed (dead_lettered).
func (a *Activities) DeadLetter(ctx context.Context, in DeadLetterInput) (int64, error) {
	// The attempts actually made (a Retry-After or an expiration can end retries early).
	if n, err := a.Store.CountAttempts(ctx, in.TenantID, in.NotificationID, in.Channel); err == nil && n > 0 {
		in.Attempts = n
	}
	payload, err := json.Marshal(in.Payload)
	if err != nil {
		return 0, err
	}
	d, err := a.Store.PutDeadLetter(ctx, store.DeadLetter{TenantID: in.TenantID, NotificationID: in.NotificationID,
		Channel: in.Channel, TemplateID: in.TemplateID, Attempts: in.Attempts, LastError: in.LastError, Payload: payload})
	if err != nil {
		return 0, err
	}
	if _, err := a.Store.RecomputeNotificationStatus(ctx, in.TenantID, in.NotificationID); err != nil {
		return 0, err
	}
	return d.ID, nil
}

// BeginRedriveInput names the dead letter to redrive.
type BeginRedriveInput struct {
	TenantID     string
	DeadLetterID int64
}

// BeginRedriveResult is the delivery to repeat; Claimed is false when the dead
// letter was not open (someone else redrives it, or it was redriven).
type BeginRedriveResult struct {
	Claimed        bool
	NotificationID string
	Channel        string
	TemplateID     string
	Payload        RedrivePayload
	// RetryPolicies are the tenant's overrides, so a redrive retries like a send.
	RetryPolicies map[string]store.RetryPolicy
}

// BeginRedrive claims the dead letter and reopens its delivery for the guard.
func (a *Activities) BeginRedrive(ctx context.Context, in BeginRedriveInput) (BeginRedriveResult, error) {
	d, ok, err := a.Store.BeginRedrive(ctx, in.TenantID, in.DeadLetterID)
	if err != nil || !ok {
		return BeginRedriveResult{}, err
	}
	var p RedrivePayload
	if err := json.Unmarshal(d.Payload, &p); err != nil {
		return BeginRedriveResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("dead letter %d payload: %v", d.ID, err), "BadPayload", err)
	}
	ts, err := a.Store.GetTenantSettings(ctx, in.TenantID)
	if err != nil {
		return BeginRedriveResult{}, err
	}
	return BeginRedriveResult{Claimed: true, NotificationID: d.NotificationID, Channel: d.Channel, TemplateID: d.TemplateID,
		Payload: p, RetryPolicies: ts.RetryPolicies}, nil
}

// FinishRedriveInput names the redriven dead letter.
type FinishRedriveInput struct {
	TenantID     string
	DeadLetterID int64
}

// FinishRedrive marks the dead letter redriven.
func (a *Activities) FinishRedrive(ctx context.Context, in FinishRedriveInput) error {
	return a.Store.FinishRedrive(ctx, in.TenantID, in.DeadLetterID)
}
