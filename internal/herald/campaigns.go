package herald

// Campaign statuses (GET /v1/campaigns/{id}, the campaign workflow's progress
// query and the HeraldStatus search attribute of a campaign workflow).
const (
	CampaignScheduled = "scheduled" // waiting for send_at
	CampaignRunning   = "running"
	CampaignPaused    = "paused"
	CampaignCompleted = "completed"
	CampaignCancelled = "cancelled"
	CampaignFailed    = "failed"
)

// CampaignFinal reports a status a campaign never leaves.
func CampaignFinal(status string) bool {
	return status == CampaignCompleted || status == CampaignCancelled || status == CampaignFailed
}

// Why a campaign failed (GET /v1/campaigns/{id}: failure.reason).
const (
	// CampaignQuotaExceeded: the audience did not fit what was left of the
	// tenant's daily quota when the campaign started.
	CampaignQuotaExceeded Reason = "daily_quota_exceeded"
	// CampaignAudienceTooLarge: the audience was over the operator's cap when
	// the campaign started (it grew after the campaign was accepted).
	CampaignAudienceTooLarge Reason = "audience_too_large"
	// CampaignBatchFailed: a batch failed for good (its message says why).
	CampaignBatchFailed Reason = "batch_failed"
	// CampaignWorkflowEnded: the campaign's workflow ended without finishing
	// the campaign (terminated, timed out, failed), so nothing sends any more.
	CampaignWorkflowEnded Reason = "workflow_ended"
)

// ErrTypeCampaignQuota and ErrTypeCampaignAudience fail a campaign's start
// (CampaignQuotaExceeded, CampaignAudienceTooLarge); neither is retried.
const (
	ErrTypeCampaignQuota    = "CampaignQuotaExceeded"
	ErrTypeCampaignAudience = "CampaignAudienceTooLarge"
)

// Audience kinds of a campaign.
const (
	AudienceUserIDs  = "user_ids" // inline ids, stored as an inline recipient list
	AudienceList     = "list"     // an uploaded recipient list
	AudienceTopic    = "topic"    // a topic's subscribers
	AudienceAllUsers = "all_users"
)

// Recipient list kinds.
const (
	ListUploaded = "uploaded"
	ListInline   = "inline"
)

// Campaign pending-work reasons (campaign_pending.reason): a quiet-hours
// deferral (ReasonQuietHours) or a provider failure waiting for its retry.
const ReasonRetrying Reason = "retrying"

// ReasonInDoubt: owed work for a provider channel found "sending" by a re-run
// batch (the worker died, or the batch timed out, after marking it and before
// recording the provider's answer). The provider may have accepted: the channel
// waits for the receipt window before the guard looks again (a receipt then
// records it sent without a second send).
const ReasonInDoubt Reason = "in_doubt"

// ErrTypeCampaignFinal rejects pause, resume and cancel of a campaign that has
// finished.
const ErrTypeCampaignFinal = "CampaignFinished"
