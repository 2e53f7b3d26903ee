package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	"github.com/herald-notify/herald/internal/config"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/workflows"
)

// runTenantDelete removes a tenant and everything of it:
//
//	herald tenant delete --confirm TENANT_ID [--batch N] [--skip-temporal] TENANT_ID
//
// In order: the tenant's API keys are revoked (no new work); its open Temporal
// workflows are terminated (a visibility query on the HeraldTenant search
// attribute, and the redrives of its dead letters, which carry none); then
// every table with a tenant_id column is emptied of the tenant, a bounded batch
// per statement, children before the tables they reference, with a progress
// line per table (and every few seconds on a long one); the tenants row goes
// last. Interrupted, it is run again: each step is idempotent and the tenants
// row, which makes the tenant findable, is the last thing deleted.
func runTenantDelete(ctx context.Context, cfg config.Config, st *store.Store, args []string, stdout io.Writer) error {
	fs := newFlagSet("tenant delete")
	confirm := fs.String("confirm", "", "the tenant id again: nothing is removed without it")
	batch := fs.Int("batch", store.EraseBatch, "rows a statement deletes at most")
	skipTemporal := fs.Bool("skip-temporal", false, "do not terminate the tenant's workflows (Temporal unreachable; they fail on their own)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("tenant delete takes one tenant id (see herald tenant list)")
	}
	tenantID := fs.Arg(0)
	if *confirm != tenantID {
		return fmt.Errorf("tenant delete removes tenant %s and all its data for good: repeat its id with --confirm %s", tenantID, tenantID)
	}
	if *batch <= 0 {
		return errors.New("tenant delete: --batch must be positive")
	}
	t, err := st.TenantByID(ctx, tenantID)
	if err != nil {
		return fmt.Errorf("tenant %s does not exist (see herald tenant list): %w", tenantID, err)
	}
	start := time.Now()
	fmt.Fprintf(stdout, "removing tenant %s (%s)\n", t.ID, t.Name)
	n, err := st.RevokeTenantKeys(ctx, t.ID)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "api keys: %d revoked (running API processes refuse them within 30 s)\n", n)

	if *skipTemporal {
		fmt.Fprintln(stdout, "temporal: skipped (--skip-temporal)")
	} else {
		if err := terminateTenantWorkflows(ctx, cfg, st, t.ID, stdout); err != nil {
			return fmt.Errorf("%w (run again, or pass --skip-temporal)", err)
		}
	}

	tables, err := st.TenantTables(ctx)
	if err != nil {
		return err
	}
	var total int64
	for _, tb := range tables {
		rows, err := deleteTenantTable(ctx, st, tb, t.ID, *batch, stdout)
		total += rows
		if err != nil {
			return err
		}
	}
	if _, err := st.RemoveTenantRow(ctx, t.ID); err != nil {
		return err
	}
	el := time.Since(start)
	fmt.Fprintf(stdout, "tenant %s removed: %d rows in %s (%.0f rows/s)\n", t.ID, total, el.Round(time.Millisecond), float64(total)/max(el.Seconds(), 1e-9))
	return nil
}

// deleteTenantTable empties one table of the tenant, a batch a statement.
func deleteTenantTable(ctx context.Context, st *store.Store, tb store.TenantTable, tenantID string, batch int, stdout io.Writer) (int64, error) {
	var rows int64
	start, last := time.Now(), time.Now()
	for {
		if err := ctx.Err(); err != nil {
			fmt.Fprintf(stdout, "%s: interrupted after %d rows; run the command again to resume\n", tb.Name, rows)
			return rows, err
		}
		n, err := st.DeleteTenantBatch(ctx, tb, tenantID, batch)
		rows += n
		if err != nil {
			return rows, err
		}
		if n < int64(batch) {
			break
		}
		if time.Since(last) >= 5*time.Second {
			last = time.Now()
			fmt.Fprintf(stdout, "%s: %d rows so far (%.0f rows/s)\n", tb.Name, rows, float64(rows)/time.Since(start).Seconds())
		}
	}
	if rows > 0 {
		fmt.Fprintf(stdout, "%s: %d rows deleted in %s\n", tb.Name, rows, time.Since(start).Round(time.Millisecond))
	}
	return rows, nil
}

// terminateTenantWorkflows terminates the tenant's open workflows: those
// carrying its HeraldTenant search attribute (notifications, campaigns,
// flows, digests) and the redrives of its dead letters.
func terminateTenantWorkflows(ctx context.Context, cfg config.Config, st *store.Store, tenantID string, stdout io.Writer) error {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tc, err := client.DialContext(dctx, client.Options{HostPort: cfg.TemporalAddress, Namespace: cfg.TemporalNamespace,
		Logger: log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))})
	if err != nil {
		return fmt.Errorf("connect to Temporal at %s: %w", cfg.TemporalAddress, err)
	}
	defer tc.Close()
	query := fmt.Sprintf("%s = '%s' AND ExecutionStatus = 'Running'", workflows.SearchAttrTenant.GetName(), tenantID)
	terminated := 0
	var token []byte
	for {
		resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: cfg.TemporalNamespace, Query: query, PageSize: 500, NextPageToken: token})
		if err != nil {
			return fmt.Errorf("listing the tenant's workflows: %w", err)
		}
		for _, ex := range resp.Executions {
			if ex.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				continue
			}
			ok, err := terminate(ctx, tc, ex.Execution.WorkflowId, ex.Execution.RunId)
			if err != nil {
				return err
			}
			if ok {
				terminated++
			}
		}
		if token = resp.NextPageToken; len(token) == 0 {
			break
		}
	}
	ids, err := st.RedrivingDeadLetters(ctx, tenantID)
	if err != nil {
		return err
	}
	for _, id := range ids {
		ok, err := terminate(ctx, tc, workflows.RedriveWorkflowID(tenantID, id), "")
		if err != nil {
			return err
		}
		if ok {
			terminated++
		}
	}
	fmt.Fprintf(stdout, "temporal: %d open workflows terminated\n", terminated)
	return nil
}

// terminate terminates one run; false when it had already closed.
func terminate(ctx context.Context, tc client.Client, workflowID, runID string) (bool, error) {
	err := tc.TerminateWorkflow(ctx, workflowID, runID, "tenant removed (herald tenant delete)")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("terminating %s: %w", workflowID, err)
	}
	return true, nil
}
