package workflows

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/herald"
)

// Client is how the API starts, describes and updates Herald's workflows: the
// start options, the memo and the search attributes set at start, and the
// classes of Temporal's errors live here, next to the workflows they belong to,
// so a caller deals in notifications, campaigns and redrives, not in SDK types.
type Client struct {
	temporal client.Client
	// taskQueue is the base task queue; the lanes derive theirs (LaneTaskQueue).
	taskQueue string
}

// NewClient is a Client on tc whose workflows run on taskQueue's lanes.
func NewClient(tc client.Client, taskQueue string) *Client {
	return &Client{temporal: tc, taskQueue: taskQueue}
}

// Errors the Client's calls are classified into (test with errors.Is; the
// Temporal error stays wrapped).
var (
	// ErrAlreadyStarted: a run with the workflow ID is open (or, for a campaign,
	// has finished and is never started again).
	ErrAlreadyStarted = errors.New("workflow already started")
	// ErrRunNotFound: Temporal has no such run (never started, closed and
	// deleted, or a run id that is not one).
	ErrRunNotFound = errors.New("workflow run not found")
	// ErrAlreadySent: the cancel update was refused because the notification was
	// sent on a channel, or every channel has finished.
	ErrAlreadySent = errors.New("notification already sent")
	// ErrCampaignFinal: the campaign has finished, so it takes no control.
	ErrCampaignFinal = errors.New("campaign has finished")
)

// IsUnavailable reports whether err means Temporal could not be reached in time,
// so the request can be retried.
func IsUnavailable(err error) bool {
	var unavailable *serviceerror.Unavailable
	var deadline *serviceerror.DeadlineExceeded
	return errors.As(err, &unavailable) || errors.As(err, &deadline) || errors.Is(err, context.DeadlineExceeded)
}

// CheckHealth reports whether the Temporal frontend answers.
func (c *Client) CheckHealth(ctx context.Context) error {
	_, err := c.temporal.CheckHealth(ctx, &client.CheckHealthRequest{})
	return err
}

// Memo keys of a notification workflow, set at start: they let a status read
// answer before the workflow's first activity has recorded the notification.
const (
	memoUser     = "user_id"
	memoTemplate = "template_id"
	memoChannels = "channels"
	// memoBodyHash is the hex body hash the key was accepted with: the durable
	// copy of the dedup ledger's body hash, read by a duplicate that reaches
	// PostgreSQL before the original's ledger row does.
	memoBodyHash = "body_hash"
)

// NotificationStartOptions are the start options of a notification workflow. The
// ID conflict policy FAIL (with the error surfaced) is the duplicate check while
// a run is open; the reuse policy ALLOW_DUPLICATE makes the same key a new
// notification once the run, and so its dedup window, has closed. The input's
// body hash goes into the memo with the user, template and channels.
func NotificationStartOptions(workflowID, taskQueue string, in NotificationInput) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                                       workflowID,
		TaskQueue:                                taskQueue,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		Memo: map[string]any{memoUser: in.UserID, memoTemplate: in.TemplateID, memoChannels: in.Channels,
			memoBodyHash: hex.EncodeToString(in.BodyHash)},
		TypedSearchAttributes: temporal.NewSearchAttributes(
			SearchAttrTenant.ValueSet(in.TenantID),
			SearchAttrUser.ValueSet(in.UserID),
			SearchAttrStatus.ValueSet(string(herald.NotificationQueued)),
		),
	}
}

// StartedRun is the run a start landed on.
type StartedRun struct {
	RunID string
	// Existing: a run with the workflow ID was already open (a duplicate inside
	// its dedup window); RunID is that run's.
	Existing bool
}

// StartNotification starts a notification's workflow on lane's task queue. A
// start that returns is durable in Temporal; a run already open with the
// workflow ID is reported as Existing, not as an error.
func (c *Client) StartNotification(ctx context.Context, workflowID string, lane herald.Lane, in NotificationInput) (StartedRun, error) {
	run, err := c.temporal.ExecuteWorkflow(ctx, NotificationStartOptions(workflowID, LaneTaskQueue(c.taskQueue, lane), in), NotificationWorkflow, in)
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	switch {
	case err == nil:
		return StartedRun{RunID: run.GetRunID()}, nil
	case errors.As(err, &already):
		return StartedRun{RunID: already.RunId, Existing: true}, nil
	}
	return StartedRun{}, err
}

// NotificationRun is what a notification's workflow says of it before its first
// activity has recorded it: the start's time and memo.
type NotificationRun struct {
	RunID      string
	StartedAt  time.Time
	UserID     string
	TemplateID string
	Channels   []herald.Channel
	// BodyHash is the body hash the run was started with; nil for a run started
	// without one.
	BodyHash []byte
}

// DescribeNotification describes a notification's run (runID "": the latest
// run of workflowID). ErrRunNotFound when there is no such run.
func (c *Client) DescribeNotification(ctx context.Context, workflowID, runID string) (NotificationRun, error) {
	desc, err := c.temporal.DescribeWorkflow(ctx, workflowID, runID)
	if err != nil {
		return NotificationRun{}, classifyRunError(err)
	}
	info := desc.RawResponse.GetWorkflowExecutionInfo()
	r := NotificationRun{RunID: info.GetExecution().GetRunId(), StartedAt: info.GetStartTime().AsTime()}
	dc := converter.GetDefaultDataConverter()
	fields := info.GetMemo().GetFields()
	if err := errors.Join(
		dc.FromPayload(fields[memoUser], &r.UserID),
		dc.FromPayload(fields[memoTemplate], &r.TemplateID),
		dc.FromPayload(fields[memoChannels], &r.Channels),
	); err != nil {
		return NotificationRun{}, fmt.Errorf("decode memo of %s: %w", workflowID, err)
	}
	var hexHash string
	if p := fields[memoBodyHash]; p != nil && dc.FromPayload(p, &hexHash) == nil {
		if h, err := hex.DecodeString(hexHash); err == nil {
			r.BodyHash = h
		}
	}
	return r, nil
}

// CancelNotification runs the cancel update on a notification's run and waits
// for it: the workflow itself decides, so a cancel never races a send.
// ErrAlreadySent (its message says why) when the workflow refused it;
// ErrRunNotFound when no run is open.
func (c *Client) CancelNotification(ctx context.Context, workflowID, runID string) error {
	handle, err := c.temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: workflowID, RunID: runID, UpdateName: UpdateCancel, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		var st NotificationState
		err = handle.Get(ctx, &st)
	}
	if contract.AlreadySent.Is(err) {
		return &refusedError{class: ErrAlreadySent, message: contract.ErrorMessage(err), err: err}
	}
	if err != nil {
		return classifyRunError(err)
	}
	return nil
}

// refusedError is an update the workflow refused: its class, and the
// workflow's own words for the caller to show.
type refusedError struct {
	class   error
	message string
	err     error
}

func (e *refusedError) Error() string   { return e.message }
func (e *refusedError) Unwrap() []error { return []error{e.class, e.err} }

// classifyRunError wraps Temporal's "no such run" (NotFound, or InvalidArgument
// for a run id that is not one) in ErrRunNotFound.
func classifyRunError(err error) error {
	var nf *serviceerror.NotFound
	var invalid *serviceerror.InvalidArgument
	if errors.As(err, &nf) || errors.As(err, &invalid) {
		return fmt.Errorf("%w: %w", ErrRunNotFound, err)
	}
	return err
}

// CampaignStartOptions start a campaign's workflow on the bulk lane. Starting
// again while it runs attaches to it (USE_EXISTING); a finished campaign is
// never started again (REJECT_DUPLICATE).
func CampaignStartOptions(in CampaignInput, baseTaskQueue string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                       in.Spec.WorkflowID,
		TaskQueue:                LaneTaskQueue(baseTaskQueue, herald.LaneBulk),
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			SearchAttrTenant.ValueSet(in.Spec.TenantID),
			SearchAttrCampaign.ValueSet(in.Spec.CampaignID),
			SearchAttrStatus.ValueSet(herald.CampaignScheduled),
		),
	}
}

// StartCampaign makes sure a recorded campaign's workflow runs: it starts it,
// attaches to it while it runs, and leaves a finished one be (a finished
// campaign is never started again, and that is no error).
func (c *Client) StartCampaign(ctx context.Context, in CampaignInput) error {
	_, err := c.temporal.ExecuteWorkflow(ctx, CampaignStartOptions(in, c.taskQueue), CampaignWorkflow, in)
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &already) {
		return nil
	}
	return err
}

// CampaignRunEnded describes a campaign's workflow (its latest run): ended is
// true when no run is open any more, with how it closed ("terminated",
// "timedout", "failed", "canceled", ...). ErrRunNotFound when Temporal has
// no run of it at all (never started, or deleted after its retention).
func (c *Client) CampaignRunEnded(ctx context.Context, workflowID string) (ended bool, how string, err error) {
	desc, err := c.temporal.DescribeWorkflow(ctx, workflowID, "")
	if err != nil {
		return false, "", classifyRunError(err)
	}
	st := desc.RawResponse.GetWorkflowExecutionInfo().GetStatus()
	if st == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return false, "", nil
	}
	return true, strings.ToLower(st.String()), nil
}

// ControlCampaign runs a control update (UpdatePause, UpdateResume,
// UpdateCancelCampaign) on a campaign's workflow and waits for it: the workflow
// decides, so a control never races a batch. ErrCampaignFinal when the campaign
// has finished (its workflow refused, or has closed).
func (c *Client) ControlCampaign(ctx context.Context, workflowID, update string) (CampaignState, error) {
	var st CampaignState
	handle, err := c.temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: workflowID, UpdateName: update, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = handle.Get(ctx, &st)
	}
	var nf *serviceerror.NotFound
	if contract.CampaignFinal.Is(err) || errors.As(err, &nf) {
		return st, fmt.Errorf("%w: %w", ErrCampaignFinal, err)
	}
	return st, err
}

// StartRedrive starts the redrive of a dead letter on the normal lane and
// returns its workflow ID; ErrAlreadyStarted when a redrive of the same dead
// letter is running.
func (c *Client) StartRedrive(ctx context.Context, tenantID string, deadLetterID int64) (string, error) {
	workflowID := RedriveWorkflowID(tenantID, deadLetterID)
	_, err := c.temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: workflowID, TaskQueue: c.taskQueue,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
	}, RedriveWorkflow, RedriveInput{TenantID: tenantID, DeadLetterID: deadLetterID})
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &already) {
		return workflowID, fmt.Errorf("%w: %w", ErrAlreadyStarted, err)
	}
	return workflowID, err
}
