// Package contract is the contract between Herald's workflows and its activities:
// each activity's registered name, input and result. Workflows call activities by
// these names, so they import neither the activities nor the store behind them
// (`go list -deps ./workflows` has no database package); activities implement
// them as methods of activities.Activities, and a test checks every name here is
// one of its methods. The error classes both sides act on (errors.go) and the
// rule that turns rendered content into a delivery (delivery.go) are part of it.
package contract

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/preferences"
	"github.com/herald-notify/herald/internal/templates"
)

// Activity names (the methods of activities.Activities, registered by method name).
const (
	RecordAccepted      = "RecordAccepted"
	AssignDue           = "AssignDue"
	LoadRecipient       = "LoadRecipient"
	LoadPreferences     = "LoadPreferences"
	ClaimCap            = "ClaimCap"
	Render              = "Render"
	DeliverInApp        = "DeliverInApp"
	RecordChannelStatus = "RecordChannelStatus"
	RecordStatus        = "RecordStatus"
	DeliverEmail        = "DeliverEmail"
	DeliverSMS          = "DeliverSMS"
	DeliverPush         = "DeliverPush"
	DeadLetter          = "DeadLetter"
	BeginRedrive        = "BeginRedrive"
	FinishRedrive       = "FinishRedrive"
	ReopenRedrive       = "ReopenRedrive"
	ListPendingWebhooks = "ListPendingWebhooks"
	DeliverWebhook      = "DeliverWebhook"
	DeadLetterWebhook   = "DeadLetterWebhook"
	// Campaigns (see CampaignWorkflow).
	CampaignStart        = "CampaignStart"
	CampaignPages        = "CampaignPages"
	CampaignBatch        = "CampaignBatch"
	CampaignNextDue      = "CampaignNextDue"
	CampaignPendingBatch = "CampaignPendingBatch"
	CampaignSetStatus    = "CampaignSetStatus"
)

// Names lists every activity name.
var Names = []string{RecordAccepted, AssignDue, LoadRecipient, LoadPreferences, ClaimCap, Render, DeliverInApp, RecordChannelStatus, RecordStatus, DeliverEmail, DeliverSMS, DeliverPush, DeadLetter, BeginRedrive, FinishRedrive, ReopenRedrive,
	ListPendingWebhooks, DeliverWebhook, DeadLetterWebhook,
	CampaignStart, CampaignPages, CampaignBatch, CampaignNextDue, CampaignPendingBatch, CampaignSetStatus,
	FlowRecord, FlowStep, FlowTemplate, FlowThrottle, FlowWait, FlowWaitDone, DigestAdd, DigestRemove, DigestOpen, DigestClose,
	MaintenancePartitions, MaintenancePrune, MaintenanceCompact, MaintenanceReport,
	ClaimOrder, ReleaseOrder, FinishOrderWait}

// RecordAcceptedInput describes the accepted notification.
type RecordAcceptedInput struct {
	TenantID       string
	NotificationID string
	UserID         string
	TemplateID     string
	Channels       []herald.Channel
	WorkflowID     string
	RunID          string
	DedupKeyHash   string
	AcceptedAt     time.Time
	// TemplateVersion and Category record what the notification renders with.
	TemplateVersion int
	Category        string
	// Scheduled: delivery waits for send_at; the notification is numbered in
	// its user's due sequence then (AssignDue), otherwise now.
	Scheduled bool
	// BodyHash is the canonical hash of the accepted body and DedupUntil the end
	// of the dedup window: the dedup-ledger row written with the notification.
	// Nil BodyHash: no ledger row.
	BodyHash   []byte
	DedupUntil time.Time
	// OrderingKey and Ordered: the notification is due now and these provider
	// channels are ordered; RecordAccepted returns their places in their lanes
	// (RecordAcceptedResult, docs/ordering.md).
	OrderingKey string
	Ordered     []herald.Channel
}

// AssignDueInput names a scheduled notification whose send_at has come: it
// takes its number in the user's due sequence (store.AssignDue).
type AssignDueInput struct {
	TenantID       string
	NotificationID string
	UserID         string
}

// LoadRecipientInput names the user to load.
type LoadRecipientInput struct {
	TenantID string
	UserID   string
	// NotificationID, when set, is the notification anonymised if the user
	// turns out erased.
	NotificationID string `json:",omitempty"`
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

// DeliverInAppInput is one rendered in-app message.
type DeliverInAppInput struct {
	TenantID       string
	UserID         string
	NotificationID string
	Title          string
	Body           string
	ActionURL      string
	// Category is the template's (the inbox filters by it).
	Category   string
	AcceptedAt time.Time
}

// DeliverResult reports a channel's outcome.
type DeliverResult struct {
	Status herald.DeliveryStatus
	// Duplicate is true when the guard found the channel already delivered.
	Duplicate bool
}

// RecordChannelStatusInput records a channel outcome decided by the workflow itself
// (a failure after retries were exhausted, a suppression and its reason).
type RecordChannelStatusInput struct {
	TenantID       string
	NotificationID string
	Channel        herald.Channel
	Status         herald.DeliveryStatus
	Error          string
	Reason         herald.Reason
}

// RecordStatusInput names the notification whose overall status to record. Status
// is the workflow's own view, used only if the deliveries cannot say.
type RecordStatusInput struct {
	TenantID       string
	NotificationID string
	Status         herald.NotificationStatus
}

// DeliverEmailInput is one rendered email.
type DeliverEmailInput struct {
	TenantID       string
	NotificationID string
	To             string
	Subject        string
	HTML           string
	Text           string
	Headers        map[string]string
	Category       string
}

// DeliverSMSInput is one rendered SMS.
type DeliverSMSInput struct {
	TenantID       string
	NotificationID string
	To             string
	Body           string
}

// DeliverPushInput is one rendered push notification, sent to each of the user's
// registered device tokens.
type DeliverPushInput struct {
	TenantID       string
	NotificationID string
	UserID         string
	Title          string
	Body           string
	Data           map[string]string
}

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
	Channel        herald.Channel
	TemplateID     string
	Attempts       int
	LastError      string
	Payload        RedrivePayload
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
	Channel        herald.Channel
	TemplateID     string
	Payload        RedrivePayload
	// RetryPolicies are the tenant's overrides, so a redrive retries like a send.
	RetryPolicies map[herald.Channel]herald.RetryPolicy
	// UserID, Category and Critical are the notification's, for re-evaluating
	// the user's current preferences before the redrive sends.
	UserID   string
	Category string
	Critical bool
}

// ReopenRedriveInput names the dead letter whose delivery the redrive is about to
// send again (failed → sending, after the re-check passed).
type ReopenRedriveInput struct {
	TenantID     string
	DeadLetterID int64
}

// FinishRedriveInput names the redriven dead letter.
type FinishRedriveInput struct {
	TenantID     string
	DeadLetterID int64
	// SuppressedReason, when set, closes the dead letter without a send: the
	// user's current preferences or address suppress the channel (the reason).
	SuppressedReason herald.Reason
}

// LoadPreferencesInput names the user, and the addresses the channels would go
// to (the recipient as loaded), which are checked against the tenant's
// suppression list.
type LoadPreferencesInput struct {
	TenantID string
	UserID   string
	Email    string
	Phone    string
}

// PreferencesResult is what gating needs: the user's effective preferences (tenant
// defaults overridden by the user's own), the tenant's caps and default locale.
type PreferencesResult struct {
	Prefs preferences.Preferences
	// Suppressed: the channels whose address (LoadPreferencesInput's) is on the
	// tenant's suppression list.
	Suppressed    map[herald.Channel]bool
	CategoryCaps  map[string]int
	DefaultLocale string
	RetryPolicies map[herald.Channel]herald.RetryPolicy
}

// ClaimCapInput counts one notification against the user's category cap.
type ClaimCapInput struct {
	TenantID       string
	UserID         string
	Category       string
	NotificationID string
	Limit          int
	At             time.Time
}

// RenderInput selects the template version, channel and data to render.
type RenderInput struct {
	TenantID        string
	NotificationID  string
	UserID          string
	TemplateID      string
	TemplateVersion int
	Channel         herald.Channel
	UserLocale      string
	TenantLocale    string
	// Data keeps numbers as json.Number (see templates.Data).
	Data templates.Data
}

// RenderResult is the channel's content; Headers are extra email headers.
type RenderResult struct {
	Rendered templates.Rendered
	Headers  map[string]string
}

// Payload bounds. Temporal refuses a command whose payload is over its blob size
// limit (2 MiB by default; it warns from 512 KiB) by terminating the run: no final
// status, no dead letter, and the dedup key is released, so a retry delivers
// again. A workflow task completion over gRPC's 4 MiB message limit fails, and is
// retried, forever. Herald keeps well under both, and checks the same bounds at
// submit time (422) and in the worker (the channel fails with reason
// content_too_large), so no accepted notification can reach them.
const (
	// MaxRenderedBytes bounds one channel's rendered content (templates.Rendered)
	// as Temporal carries it (PayloadSize). It travels as the Render local
	// activity's result marker and, for email, SMS and push, once more as the
	// send's input; SMS (1600 characters) and push (4 KiB) are far smaller by
	// their own limits, so one workflow task carries at most about 1.6 MiB of
	// content, every single payload stays at Temporal's warning threshold.
	MaxRenderedBytes = 512 << 10
	// MaxWorkflowInputBytes bounds a notification workflow's input (its data,
	// mostly; the 64 KiB request body limit keeps it far below today, even with
	// JSON's six-byte escapes of <, > and &).
	MaxWorkflowInputBytes = 512 << 10
)

// PayloadSize is the size of v as Temporal's default data converter carries it
// (encoding/json, with HTML characters escaped as \u003c), or -1 if v does not
// encode.
func PayloadSize(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return -1
	}
	return len(b)
}

// ContentTooLargeError is a rendered channel over MaxRenderedBytes.
type ContentTooLargeError struct {
	Channel herald.Channel
	Bytes   int
}

func (e *ContentTooLargeError) Error() string {
	return fmt.Sprintf("%s: the rendered content is %d bytes as carried to delivery (JSON-encoded); the limit is %d bytes (%d KiB) per channel: shorten the data or the template's output",
		e.Channel, e.Bytes, MaxRenderedBytes, MaxRenderedBytes>>10)
}

// CheckRendered returns a *ContentTooLargeError when r is over MaxRenderedBytes.
func CheckRendered(r templates.Rendered) error {
	if n := PayloadSize(r); n < 0 || n > MaxRenderedBytes {
		return &ContentTooLargeError{Channel: r.Channel, Bytes: n}
	}
	return nil
}

// ListPendingWebhooksInput names the endpoint whose queue to read.
type ListPendingWebhooksInput struct {
	TenantID   string
	EndpointID string
	Limit      int
}

// PendingWebhook is one queued message: its row id and notification.
type PendingWebhook struct {
	ID             int64
	NotificationID string
}

// WebhookMessageInput names one queued message of an endpoint.
type WebhookMessageInput struct {
	TenantID   string
	EndpointID string
	MessageID  int64
}

// The tenant webhook endpoint workflow (workflows.WebhookEndpointWorkflow),
// named here so internal/webhooks can start it without importing workflows.
const (
	WebhookEndpointWorkflow = "WebhookEndpointWorkflow"
	// SignalWebhookWake tells an endpoint's workflow its queue has new messages.
	SignalWebhookWake = "wake"
)

// WebhookRetry is the backoff of one webhook message.
type WebhookRetry struct {
	// Initial is the first retry's delay (default 5 s); each next one doubles,
	// up to MaxInterval (default 1 h).
	Initial     time.Duration
	MaxInterval time.Duration
	// For is how long a message is retried before it is dead-lettered (default
	// 25 h: every endpoint gets at least a day to recover).
	For time.Duration
}

// Default webhook retry settings.
const (
	DefaultWebhookRetryInitial     = 5 * time.Second
	DefaultWebhookRetryMaxInterval = time.Hour
	DefaultWebhookRetryFor         = 25 * time.Hour
)

// WebhookEndpointInput names the endpoint.
type WebhookEndpointInput struct {
	TenantID   string
	EndpointID string
	Retry      WebhookRetry
}

// WebhookEndpointWorkflowID is the endpoint's workflow ID.
func WebhookEndpointWorkflowID(tenantID, endpointID string) string {
	return "webhook-endpoint/" + tenantID + "/" + endpointID
}

// WebhookTaskQueue is the webhook lane's task queue.
func WebhookTaskQueue(base string) string { return base + "-webhooks" }

// CampaignSpec is what every campaign activity needs to know about the campaign.
type CampaignSpec struct {
	TenantID        string
	CampaignID      string
	WorkflowID      string
	TemplateID      string
	TemplateVersion int
	Category        string
	Critical        bool
	Channels        []herald.Channel
	// The campaign's data is not here: it is stored once with the campaign
	// (campaigns.data, at most MaxCampaignDataBytes) and each batch reads it by
	// the campaign's id, so no batch's input or history carries a copy.
	AudienceKind string
	AudienceRef  string
	// DailyQuota and MaxAudience are the tenant's effective limits as the
	// campaign was accepted (0: none): CampaignStart fails the campaign when its
	// audience is over MaxAudience or does not fit what is left of the day's
	// quota, and otherwise reserves the whole audience on it.
	DailyQuota  int
	MaxAudience int64
	// InDoubtWait is how long a provider channel found "sending" by a re-run
	// batch waits for the provider's receipt before it is sent again (0: the
	// default, activities.DefaultInDoubtWait).
	InDoubtWait time.Duration
}

// CampaignStartResult is the audience as the campaign starts.
type CampaignStartResult struct {
	AudienceSize int64
	UnknownUsers int64
}

// CampaignPagesInput asks for the next page boundaries after After.
type CampaignPagesInput struct {
	Campaign CampaignSpec
	After    string
	PageSize int
	Pages    int
}

// CampaignBatchInput is one page of the audience: the members with
// After < user_id <= Through.
type CampaignBatchInput struct {
	Campaign CampaignSpec
	After    string
	Through  string
	Limit    int
}

// CampaignBatchResult counts what one batch did with its recipients' channels.
type CampaignBatchResult struct {
	Recipients int
	Delivered  int
	Suppressed int
	Deferred   int
	Retrying   int
	Failed     int
	// Duplicates are channels the guard found already sent (a re-run batch).
	Duplicates int
}

// Add sums r into c.
func (c *CampaignBatchResult) Add(r CampaignBatchResult) {
	c.Recipients += r.Recipients
	c.Delivered += r.Delivered
	c.Suppressed += r.Suppressed
	c.Deferred += r.Deferred
	c.Retrying += r.Retrying
	c.Failed += r.Failed
	c.Duplicates += r.Duplicates
}

// CampaignNextDueResult is when the campaign's earliest owed work (a deferral
// or a retry) is due; Any is false when none is owed.
type CampaignNextDueResult struct {
	Any bool
	Due time.Time
}

// CampaignPendingInput drains up to Limit owed items that are due.
type CampaignPendingInput struct {
	Campaign CampaignSpec
	Limit    int
}

// CampaignPendingResult is one drained page of owed work; More is true when a
// full page was handled (more may be due).
type CampaignPendingResult struct {
	CampaignBatchResult
	More bool
}

// CampaignSetStatusInput records the campaign's status; a cancelled campaign's
// owed work is cancelled with it.
type CampaignSetStatusInput struct {
	TenantID   string
	CampaignID string
	Status     string
	// Reason and Message say why, for herald.CampaignFailed.
	Reason  herald.Reason
	Message string
}

// MaxCampaignDataBytes bounds a campaign's data as stored (its JSON), as the
// 64 KiB request body bounds a single notification's: every batch reads and
// parses it, and every recipient's render starts from it.
const MaxCampaignDataBytes = 64 << 10
