package workflows

import (
	"context"
	"encoding/hex"
	"errors"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/herald"
)

// memoFlow is the flow of a flow run (a notification workflow's memo has the
// template instead).
const memoFlow = "flow_id"

// FlowStartOptions are a flow event's start options: those of a notification
// (the Layer-1 conflict and reuse policies, the memo DescribeNotification
// reads, HeraldTenant, HeraldUser and HeraldStatus; the run upserts
// HeraldNotificationId), with the flow in the memo.
func FlowStartOptions(workflowID, taskQueue string, in FlowInput) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                                       workflowID,
		TaskQueue:                                taskQueue,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		Memo: map[string]any{memoUser: in.UserID, memoTemplate: "", memoChannels: []herald.Channel{}, memoFlow: in.FlowID,
			memoBodyHash: hex.EncodeToString(in.BodyHash)},
		TypedSearchAttributes: temporal.NewSearchAttributes(
			SearchAttrTenant.ValueSet(in.TenantID),
			SearchAttrUser.ValueSet(in.UserID),
			SearchAttrStatus.ValueSet(string(herald.NotificationQueued)),
		),
	}
}

// StartFlow starts a flow event's run on lane's task queue; workflowID is the
// event's Layer-1 id (ids.NotificationWorkflowID of its dedup key), so the
// event's notification id is ids.NotificationID(key, RunID) as for a
// notification. A run already open with the workflow ID is reported as
// Existing (a duplicate inside its dedup window), not as an error.
func (c *Client) StartFlow(ctx context.Context, workflowID string, lane herald.Lane, in FlowInput) (StartedRun, error) {
	run, err := c.temporal.ExecuteWorkflow(ctx, FlowStartOptions(workflowID, LaneTaskQueue(c.taskQueue, lane), in), FlowWorkflow, in)
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	switch {
	case err == nil:
		return StartedRun{RunID: run.GetRunID()}, nil
	case errors.As(err, &already):
		return StartedRun{RunID: already.RunId, Existing: true}, nil
	}
	return StartedRun{}, err
}

// FlushDigest closes the open digest of a tenant's flow for a user and key
// now: its events are sent as they are. ErrRunNotFound when no digest is open.
func (c *Client) FlushDigest(ctx context.Context, tenantID, flowID, userID, key string) error {
	err := c.temporal.SignalWorkflow(ctx, DigestWorkflowID(tenantID, flowID, userID, key), "", SignalDigestFlush, nil)
	return classifyRunError(err)
}

// WakeFlowWaiter tells a flow run waiting on an inbox item that the item was
// seen (or read). A run that has ended is no error: nothing waits any more.
func (c *Client) WakeFlowWaiter(ctx context.Context, workflowID, runID, notificationID string, seen, read bool) error {
	err := c.temporal.SignalWorkflow(ctx, workflowID, runID, SignalInbox,
		contract.InboxSignal{NotificationID: notificationID, Seen: seen, Read: read})
	if errors.Is(classifyRunError(err), ErrRunNotFound) {
		return nil
	}
	return err
}

// DigestStartOptions start a digest's workflow by signal-with-start: a new run
// whenever none is open, with the tenant and user search attributes.
func DigestStartOptions(workflowID, taskQueue string, in DigestInput) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID: workflowID, TaskQueue: taskQueue,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		TypedSearchAttributes: temporal.NewSearchAttributes(SearchAttrTenant.ValueSet(in.TenantID), SearchAttrUser.ValueSet(in.UserID)),
	}
}

// SignalDigest signals a digest's workflow with an event whose row is written,
// starting the workflow when no run is open (signal-with-start): the event
// reaches the open run, or starts the next one; never neither.
func (c *Client) SignalDigest(ctx context.Context, workflowID, taskQueue string, in DigestInput, ev contract.DigestEvent) error {
	_, err := c.temporal.SignalWithStartWorkflow(ctx, workflowID, SignalDigestEvent, ev, DigestStartOptions(workflowID, taskQueue, in), DigestWorkflow, in)
	return err
}

// SignalDigestEvent signals an event's digest as SignalDigest does, on lane's
// task queue of this client's base queue (the API's accept path and the
// sweeper, which have no workflow whose queue to reuse). The digest's input
// is built from the event: the flow version, its digest step at path, the
// user and the rendered key.
func (c *Client) SignalDigestEvent(ctx context.Context, lane herald.Lane, in DigestInput, ev contract.DigestEvent) error {
	id := DigestWorkflowID(in.TenantID, in.FlowID, in.UserID, in.Key)
	return c.SignalDigest(ctx, id, LaneTaskQueue(c.taskQueue, lane), in, ev)
}
