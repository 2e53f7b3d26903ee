package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/preferences"
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
	Status herald.DeliveryStatus
	// Reason says why the channel was suppressed instead of sent (Status suppressed).
	Reason herald.Reason
}

// RedriveWorkflowID is one redrive's workflow ID: a second redrive of the same
// dead letter while one runs is rejected by Temporal as a duplicate start.
func RedriveWorkflowID(tenantID string, deadLetterID int64) string {
	return fmt.Sprintf("redrive/%s/%d", tenantID, deadLetterID)
}

// RedriveWorkflow repeats a dead-lettered delivery as a workflow of its own, rather
// than a signal to the notification workflow: the notification's run may have
// closed long ago (its dedup window ended), and a redrive weeks later must work the
// same.
//
// Before it sends, it decides the channel again as the notification workflow does
// (preferences.Evaluate) with the user as they are now: a user who opted out since,
// or whose address is gone, gets nothing (the channel is suppressed with the reason
// and the dead letter closed, not reopened); inside the user's quiet hours it waits
// for their end and decides again; an email address or phone number that changed is
// sent to as it is now. It then runs the same delivery activity, so the same
// (notification_id, channel) guard applies: if the provider had in fact accepted
// (a record or a receipt exists), nothing is sent again. A redrive that fails again
// re-opens the dead letter.
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
	reason, err := recheckRedrive(ctx, dbCtx, in.TenantID, claim, &p)
	if err != nil {
		return RedriveResult{Claimed: true}, err
	}
	if reason != "" {
		return suppressRedrive(ctx, dbCtx, in, reason)
	}
	if err := workflow.ExecuteActivity(dbCtx, contract.ReopenRedrive, contract.ReopenRedriveInput{
		TenantID: in.TenantID, DeadLetterID: in.DeadLetterID,
	}).Get(ctx, nil); err != nil {
		return RedriveResult{Claimed: true}, err
	}

	var res contract.DeliverResult
	if err := executeDelivery(ctx, p, claim.RetryPolicies).Get(ctx, &res); err != nil {
		if contract.NoDevice.Is(err) {
			// The user's push tokens are gone: as in the notification workflow.
			return suppressRedrive(ctx, dbCtx, in, herald.ReasonNoAddress)
		}
		if derr := workflow.ExecuteActivity(dbCtx, contract.DeadLetter, contract.DeadLetterInput{
			TenantID: in.TenantID, NotificationID: claim.NotificationID, Channel: claim.Channel, TemplateID: claim.TemplateID,
			Attempts: int(providerOptions(claim.Channel, claim.RetryPolicies).RetryPolicy.MaximumAttempts), LastError: contract.ErrorMessage(err), Payload: p,
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

// recheckRedrive decides the dead letter's channel with the user's current profile
// and preferences. It returns the suppression reason, or "" with p addressed to
// the user's current email address or phone number. Quiet hours (not for critical
// notifications) are waited out on a timer, then everything is read again.
func recheckRedrive(ctx, dbCtx workflow.Context, tenantID string, claim contract.BeginRedriveResult, p *contract.RedrivePayload) (herald.Reason, error) {
	for {
		var rcp contract.Recipient
		err := workflow.ExecuteActivity(dbCtx, contract.LoadRecipient, contract.LoadRecipientInput{
			TenantID: tenantID, UserID: claim.UserID,
		}).Get(ctx, &rcp)
		if contract.UnknownUser.Is(err) {
			return herald.ReasonUserDeleted, nil // the user was erased: nowhere to send
		}
		if err != nil {
			return "", err
		}
		var prefs contract.PreferencesResult
		if err := workflow.ExecuteActivity(dbCtx, contract.LoadPreferences, contract.LoadPreferencesInput{
			TenantID: tenantID, UserID: claim.UserID, Email: rcp.Email, Phone: rcp.Phone,
		}).Get(ctx, &prefs); contract.UnknownUser.Is(err) {
			return herald.ReasonUserDeleted, nil
		} else if err != nil {
			return "", err
		}
		d := preferences.Evaluate(preferences.EvalInput{
			Channels: []herald.Channel{claim.Channel}, Category: claim.Category, Critical: claim.Critical, Prefs: prefs.Prefs,
			Addresses: map[herald.Channel]bool{
				herald.ChannelEmail: rcp.Email != "",
				herald.ChannelSMS:   rcp.Phone != "",
				herald.ChannelPush:  true, // device tokens are read at send time; none → no_address then
			},
			Suppressed: prefs.Suppressed,
			Now:        workflow.Now(ctx), UserTimezone: rcp.Timezone,
		})[0]
		switch d.Action {
		case preferences.Suppress:
			return d.Reason, nil
		case preferences.Defer:
			if err := workflow.Sleep(ctx, d.DeferUntil.Sub(workflow.Now(ctx))); err != nil {
				return "", err
			}
			continue
		}
		switch {
		case p.Email != nil:
			p.Email.To = rcp.Email
		case p.SMS != nil:
			p.SMS.To = rcp.Phone
		}
		return "", nil
	}
}

// suppressRedrive closes the dead letter without a send: the channel is
// suppressed with reason.
func suppressRedrive(ctx, dbCtx workflow.Context, in RedriveInput, reason herald.Reason) (RedriveResult, error) {
	if err := workflow.ExecuteActivity(dbCtx, contract.FinishRedrive, contract.FinishRedriveInput{
		TenantID: in.TenantID, DeadLetterID: in.DeadLetterID, SuppressedReason: reason,
	}).Get(ctx, nil); err != nil {
		return RedriveResult{Claimed: true}, err
	}
	return RedriveResult{Claimed: true, Status: herald.DeliverySuppressed, Reason: reason}, nil
}
