package workflows

import (
	"fmt"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/herald"
	"go.temporal.io/sdk/workflow"
)

// RedriveInput names a dead letter to deliver again.
type RedriveInput struct {
	TenantID     string
	DeadLetterID int64
}

// RedriveResult says what the redrive did.
type RedriveResult struct {
	// Claimed is false when the dead letter was not open (redriven already or in progress).
	Claimed bool
	// Status is the channel's status after the redrive ("" when not claimed).
	Status string
}

// RedriveWorkflowID is one redrive's workflow ID: a second redrive of the same
// dead letter while one runs is rejected by Temporal as a duplicate start.
func RedriveWorkflowID(tenantID string, deadLetterID int64) string {
	return fmt.Sprintf("redrive/%s/%d", tenantID, deadLetterID)
}

// RedriveWorkflow repeats a dead-lettered delivery as a workflow of its own, rather
// than a signal to the notification workflow: the notification's run may have
// closed long ago (its dedup window ended), and a redrive weeks later must work the
// same. It runs the same delivery activity, so the same (notification_id, channel)
// guard applies: if the provider had in fact accepted (a record or a receipt
// exists), nothing is sent again. A redrive that fails again re-opens the dead letter.
func RedriveWorkflow(ctx workflow.Context, in RedriveInput) (RedriveResult, error) {
	dbCtx := workflow.WithActivityOptions(ctx, databaseActivityOptions)
	var claim contract.BeginRedriveResult
	if err := workflow.ExecuteActivity(dbCtx, contract.BeginRedrive, contract.BeginRedriveInput{
		TenantID: in.TenantID, DeadLetterID: in.DeadLetterID,
	}).Get(ctx, &claim); err != nil || !claim.Claimed {
		return RedriveResult{}, err
	}
	p := claim.Payload
	if p.Email == nil && p.SMS == nil && p.Push == nil {
		return RedriveResult{Claimed: true}, fmt.Errorf("dead letter %d has no delivery payload", in.DeadLetterID)
	}
	claim.RetryPolicies = validRetryPolicies(ctx, claim.RetryPolicies)
	var res contract.DeliverResult
	if err := executeDelivery(ctx, p, claim.RetryPolicies).Get(ctx, &res); err != nil {
		if derr := workflow.ExecuteActivity(dbCtx, contract.DeadLetter, contract.DeadLetterInput{
			TenantID: in.TenantID, NotificationID: claim.NotificationID, Channel: claim.Channel, TemplateID: claim.TemplateID,
			Attempts: int(providerOptions(claim.Channel, claim.RetryPolicies).RetryPolicy.MaximumAttempts), LastError: errorMessage(err), Payload: p,
		}).Get(ctx, nil); derr != nil {
			return RedriveResult{Claimed: true}, derr
		}
		return RedriveResult{Claimed: true, Status: herald.DeliveryFailed}, nil
	}
	if err := workflow.ExecuteActivity(dbCtx, contract.FinishRedrive, contract.FinishRedriveInput{
		TenantID: in.TenantID, DeadLetterID: in.DeadLetterID,
	}).Get(ctx, nil); err != nil {
		return RedriveResult{Claimed: true, Status: res.Status}, err
	}
	return RedriveResult{Claimed: true, Status: res.Status}, nil
}
