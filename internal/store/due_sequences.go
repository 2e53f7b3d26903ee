package store

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-notify/herald/internal/herald"
)

// Due sequences: every notification gets a number when it becomes due,
// counting 1, 2, 3, … per (tenant, user) with no gap and no repeat. The
// counter is the user's due_sequences row; the number is the notification
// row's due_seq (migration 0160; a notification numbered before it has its
// number in notification_sequences, which the readers still consult and no
// writer adds to).
//
// Lock first: every numbering transaction locks the user's counter row in a
// statement of its own (lockDueCounters), then checks and numbers in a new
// statement, whose snapshot (READ COMMITTED) sees every numbering committed
// before the lock was granted: a user's numberings commit one after another,
// other users' never wait, and a notification numbered twice at once (the
// accept path and its run's first activity) gets one number and takes one
// counter step. A number is written with the row by the transaction that
// takes it from the counter, so a failure returns it to the counter.
//
// Who numbers: the accept path before its 202 (InsertNotification with Due:
// it writes the row itself, so a notification submitted after another's 202
// always has the higher number), RecordAccepted for one the API could not
// write (the same InsertNotification, idempotent), the AssignDue activity when
// a scheduled notification's send_at comes, InsertCampaignNotifications for
// a campaign batch's recipients.

// lockDueCounters locks the users' counters (creating them at 0), in user
// order so concurrent batches and single numberings cannot deadlock.
func (s *Store) lockDueCounters(ctx context.Context, tenantID string, userIDs []string) error {
	users := slices.Clone(userIDs)
	slices.Sort(users)
	users = slices.Compact(users)
	_, err := s.db.Exec(ctx, `
		INSERT INTO due_sequences AS d (tenant_id, user_id)
		SELECT $1, u FROM unnest($2::text[]) AS u ORDER BY u
		ON CONFLICT (tenant_id, user_id) DO UPDATE SET seq = d.seq`, tenantID, users)
	return err
}

// legacyNumbered is true for a notification numbered before migration 0160
// (its number in notification_sequences): it is not numbered again.
const legacyNumbered = `EXISTS (SELECT 1 FROM notification_sequences ls WHERE ls.tenant_id = n.tenant_id AND ls.notification_id = n.id)`

// AssignDue numbers a recorded notification of the user that is due now (a
// scheduled one whose send_at came) and returns its number; a notification
// already numbered keeps its number. 0: no such notification row.
func (s *Store) AssignDue(ctx context.Context, tenantID, userID, notificationID string) (int64, error) {
	_, acceptedAt, err := s.NotificationStatus(ctx, tenantID, notificationID)
	if errors.Is(err, herald.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var seq int64
	err = s.InTx(ctx, func(tx *Store) error {
		if err := tx.lockDueCounters(ctx, tenantID, []string{userID}); err != nil {
			return err
		}
		// A new statement: its snapshot sees the numberings committed before
		// the lock was granted, so the notification is numbered at most once.
		return tx.db.QueryRow(ctx, `
			WITH todo AS (
				SELECT n.id FROM notifications n
				WHERE n.tenant_id = $1 AND n.id = $3 AND n.accepted_at = $4 AND n.due_seq IS NULL AND NOT `+legacyNumbered+`
			), bump AS (
				UPDATE due_sequences d SET seq = d.seq + 1
				WHERE d.tenant_id = $1 AND d.user_id = $2 AND EXISTS (SELECT 1 FROM todo)
				RETURNING seq
			), numbered AS (
				UPDATE notifications n SET due_seq = b.seq FROM bump b
				WHERE n.tenant_id = $1 AND n.id = $3 AND n.accepted_at = $4
				RETURNING n.due_seq
			)
			SELECT COALESCE((SELECT due_seq FROM numbered),
				(SELECT due_seq FROM notifications WHERE tenant_id = $1 AND id = $3 AND accepted_at = $4),
				(SELECT seq FROM notification_sequences WHERE tenant_id = $1 AND notification_id = $3), 0)`,
			tenantID, userID, notificationID, acceptedAt).Scan(&seq)
	})
	return seq, err
}

// DueSequence is a notification's number (nil: not due yet, or unknown).
func (s *Store) DueSequence(ctx context.Context, tenantID, notificationID string) (*int64, error) {
	var seq *int64
	for _, w := range acceptedWindows(notificationID) {
		err := s.db.QueryRow(ctx, `SELECT due_seq FROM notifications WHERE tenant_id = $1 AND id = $2 AND accepted_at BETWEEN $3 AND $4`,
			tenantID, notificationID, w.from, w.to).Scan(&seq)
		if err == nil && seq != nil {
			return seq, nil
		}
		if err == nil {
			break // the row, not numbered here: maybe before 0160
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, err
		}
	}
	err := s.db.QueryRow(ctx, `SELECT seq FROM notification_sequences WHERE tenant_id = $1 AND notification_id = $2`,
		tenantID, notificationID).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return seq, err
}

// assignDueBatch runs inside a transaction: it numbers the recorded
// notifications accepted at acceptedAt (ids[i] is userIDs[i]'s) that have no
// number yet, each user's in id order, after locking the users' counters.
func (s *Store) assignDueBatch(ctx context.Context, tenantID string, acceptedAt time.Time, userIDs, ids []string) error {
	if err := s.lockDueCounters(ctx, tenantID, userIDs); err != nil {
		return err
	}
	// A new statement: its snapshot sees every numbering committed before the
	// locks above were granted.
	_, err := s.db.Exec(ctx, `
		WITH todo AS (
			SELECT x.id, x.uid, row_number() OVER (PARTITION BY x.uid ORDER BY x.id) AS rn
			FROM unnest($2::text[], $3::text[]) AS x(id, uid)
			JOIN notifications n ON n.tenant_id = $1 AND n.id = x.id AND n.accepted_at = $4
			WHERE n.due_seq IS NULL AND NOT `+legacyNumbered+`
		), numbered AS (
			UPDATE notifications n SET due_seq = d.seq + t.rn
			FROM todo t JOIN due_sequences d ON d.tenant_id = $1 AND d.user_id = t.uid
			WHERE n.tenant_id = $1 AND n.id = t.id AND n.accepted_at = $4
		)
		UPDATE due_sequences d SET seq = d.seq + c.n
		FROM (SELECT uid, count(*) AS n FROM todo GROUP BY uid) c
		WHERE d.tenant_id = $1 AND d.user_id = c.uid`,
		tenantID, ids, userIDs, acceptedAt)
	return err
}
