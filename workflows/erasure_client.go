package workflows

import (
	"context"
	"errors"
	"fmt"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
)

// DeleteClosedUserRuns deletes, from namespace, up to limit closed workflow
// executions of the tenant's user (found by the HeraldTenant and HeraldUser
// search attributes), history and visibility record both: a user's erasure
// need not wait for the namespace's retention to drop the inputs (addresses,
// data) those histories hold. Open runs are left alone (they end, then age
// out). It returns how many it deleted and whether more may remain; a user id
// a visibility query cannot quote safely is skipped (0, false, nil).
func (c *Client) DeleteClosedUserRuns(ctx context.Context, namespace, tenantID, userID string, limit int) (deleted int, more bool, err error) {
	if strings.ContainsAny(userID+tenantID, `'"\`) {
		return 0, false, nil
	}
	query := fmt.Sprintf("%s = '%s' AND %s = '%s' AND ExecutionStatus != 'Running'",
		SearchAttrTenant.GetName(), tenantID, SearchAttrUser.GetName(), userID)
	resp, err := c.temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: namespace, Query: query, PageSize: int32(limit)})
	if err != nil {
		return 0, false, fmt.Errorf("listing the user's closed runs: %w", err)
	}
	for _, ex := range resp.Executions {
		_, err := c.temporal.WorkflowService().DeleteWorkflowExecution(ctx, &workflowservice.DeleteWorkflowExecutionRequest{
			Namespace:         namespace,
			WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: ex.Execution.WorkflowId, RunId: ex.Execution.RunId},
		})
		var nf *serviceerror.NotFound
		if err != nil && !errors.As(err, &nf) {
			return deleted, true, fmt.Errorf("deleting run %s: %w", ex.Execution.WorkflowId, err)
		}
		deleted++
	}
	return deleted, len(resp.NextPageToken) > 0, nil
}
