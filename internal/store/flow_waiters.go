package store

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/herald-notify/herald/internal/dbx"
)

// FlowWaiter is a flow run waiting for an inbox item to be seen or read.
type FlowWaiter struct {
	TenantID       string
	UserID         string
	NotificationID string
	WorkflowID     string
	RunID          string
}

// AddFlowWaiter registers w and returns whether the item is already seen and
// read. It reads the item under a share lock in the same transaction, so a
// mark that commits concurrently either is seen here or, committing after
// this, finds the waiter (FlowWaitersOf) and signals it: no wake-up is lost.
// herald.ErrNotFound when the item does not exist.
func (s *Store) AddFlowWaiter(ctx context.Context, w FlowWaiter) (seen, read bool, err error) {
	err = s.InTx(ctx, func(tx *Store) error {
		if _, err := tx.db.Exec(ctx, `
			INSERT INTO flow_waiters (tenant_id, user_id, notification_id, workflow_id, run_id) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (tenant_id, notification_id, workflow_id) DO UPDATE SET run_id = EXCLUDED.run_id`,
			w.TenantID, w.UserID, w.NotificationID, w.WorkflowID, w.RunID); err != nil {
			return err
		}
		return dbx.NotFound(tx.db.QueryRow(ctx, `
			SELECT seen_at IS NOT NULL, read_at IS NOT NULL FROM inbox
			WHERE tenant_id = $1 AND user_id = $2 AND notification_id = $3 FOR SHARE`,
			w.TenantID, w.UserID, w.NotificationID).Scan(&seen, &read))
	})
	return seen, read, err
}

// RemoveFlowWaiter unregisters a run that stopped waiting.
func (s *Store) RemoveFlowWaiter(ctx context.Context, tenantID, notificationID, workflowID string) error {
	_, err := s.db.Exec(ctx, `DELETE FROM flow_waiters WHERE tenant_id = $1 AND notification_id = $2 AND workflow_id = $3`,
		tenantID, notificationID, workflowID)
	return err
}

// FlowWaitersOf lists the runs waiting on a user's inbox item, or on any of the
// user's items when notificationID is "" (read-all, seen-all).
func (s *Store) FlowWaitersOf(ctx context.Context, tenantID, userID, notificationID string) ([]FlowWaiter, error) {
	rows, err := s.db.Query(ctx, `
		SELECT tenant_id, user_id, notification_id, workflow_id, run_id FROM flow_waiters
		WHERE tenant_id = $1 AND user_id = $2 AND (octet_length($3::bytea) = 0 OR notification_id = $3)`, tenantID, userID, notificationID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[FlowWaiter])
}
