package store

import (
	"context"
	"slices"
	"time"

	"github.com/herald-notify/herald/internal/dbx"
	"github.com/herald-notify/herald/internal/herald"
)

// Due sequences: every notification gets a number when it becomes due (its
// run records it, its send_at passes, its campaign batch writes it), counting
// 1, 2, 3, … per (tenant, user) with no gap and no repeat. The counter is the
// user's due_sequences row, locked by the assigning transaction: a user's
// assignments commit one after another, other users' never wait. A number is
// stored on the notification row in the transaction that takes it from the
// counter, so a retried assignment finds it and returns it, and a rolled-back
// one returns it to the counter.
//
// An assignment first numbers the user's notifications that became due before
// it (at or before its due time) and have no number yet, oldest due first: a
// scheduled notification whose send_at passed while its run's timer has not
// fired yet is numbered before a notification due after it.

// AssignDue numbers a due notification of the user (and the user's unnumbered
// notifications due at or before dueAt, first) and returns its number. A
// notification that has one keeps it; one that does not exist is
// herald.ErrNotFound.
func (s *Store) AssignDue(ctx context.Context, tenantID, userID, notificationID string, dueAt time.Time) (int64, error) {
	var seq int64
	err := s.InTx(ctx, func(tx *Store) error {
		if err := tx.assignDue(ctx, tenantID, []string{userID}, []string{notificationID}, dueAt); err != nil {
			return err
		}
		n, err := tx.DueSequence(ctx, tenantID, notificationID)
		if err != nil {
			return err
		}
		if n == nil {
			return herald.ErrNotFound
		}
		seq = *n
		return nil
	})
	return seq, err
}

// DueSequence is a notification's due sequence (nil: not due yet).
func (s *Store) DueSequence(ctx context.Context, tenantID, notificationID string) (*int64, error) {
	var seq *int64
	err := s.db.QueryRow(ctx, `SELECT due_seq FROM notifications WHERE tenant_id = $1 AND id = $2`, tenantID, notificationID).Scan(&seq)
	return seq, dbx.NotFound(err)
}

// assignDue runs inside a transaction: it locks the users' counters (sorted,
// so concurrent batches cannot deadlock), then, reading with a snapshot taken
// after the locks, numbers the notifications named by ids and every other
// unnumbered, uncancelled notification of those users due at or before upTo,
// per user in (due_at, id) order, and advances the counters.
func (s *Store) assignDue(ctx context.Context, tenantID string, userIDs, ids []string, upTo time.Time) error {
	users := slices.Clone(userIDs)
	slices.Sort(users)
	users = slices.Compact(users)
	if _, err := s.db.Exec(ctx, `
		INSERT INTO due_sequences AS d (tenant_id, user_id)
		SELECT $1, u FROM unnest($2::text[]) AS u ORDER BY u
		ON CONFLICT (tenant_id, user_id) DO UPDATE SET seq = d.seq`, tenantID, users); err != nil {
		return err
	}
	// A new statement: its snapshot sees every assignment committed before the
	// locks above were granted.
	_, err := s.db.Exec(ctx, `
		WITH todo AS (
			SELECT n.user_id, n.id, row_number() OVER (PARTITION BY n.user_id ORDER BY COALESCE(n.due_at, now()), n.id) AS rn
			FROM notifications n
			WHERE n.tenant_id = $1 AND n.user_id = ANY($2::text[]) AND n.due_seq IS NULL
			  AND (n.id = ANY($3::text[]) OR (n.due_at <= $4 AND n.status <> $5))
		), numbered AS (
			UPDATE notifications n SET due_seq = d.seq + t.rn, due_at = COALESCE(n.due_at, now())
			FROM todo t JOIN due_sequences d ON d.tenant_id = $1 AND d.user_id = t.user_id
			WHERE n.tenant_id = $1 AND n.id = t.id
		)
		UPDATE due_sequences d SET seq = d.seq + c.n
		FROM (SELECT user_id, count(*) AS n FROM todo GROUP BY user_id) c
		WHERE d.tenant_id = $1 AND d.user_id = c.user_id`,
		tenantID, users, ids, upTo, herald.NotificationCancelled)
	return err
}
