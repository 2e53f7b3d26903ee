package store

import (
	"context"
	"errors"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Due sequences (the due_sequences and notification_sequences tables): every
// notification gets a number when it becomes due, counting 1, 2, 3, … per
// (tenant, user) with no gap and no repeat. The counter is the user's
// due_sequences row, locked by the numbering statement: a user's numberings
// commit one after another, other users' never wait. A number is written with
// the notification's notification_sequences row by the statement that takes it
// from the counter, so numbering again (a retry, the run after the API) returns
// it, and a statement that fails returns it to the counter.
//
// Who numbers: the accept path before its 202 (so a notification submitted
// after another's 202 always has the higher number), RecordAccepted for one
// the API could not number (AssignDue is idempotent), the AssignDue activity
// when a scheduled notification's send_at comes, InsertCampaignNotifications
// for a campaign batch's recipients.

// AssignDue numbers a notification of the user that is due now and returns its
// number; a notification already numbered keeps its number.
func (s *Store) AssignDue(ctx context.Context, tenantID, userID, notificationID string) (int64, error) {
	for attempt := 0; ; attempt++ {
		var seq int64
		// One statement: the counter's row lock is taken by the upsert and held
		// to commit. Two numberings of one notification at once both pass NOT
		// EXISTS; the second then fails on the primary key (its counter step is
		// rolled back with it) and the retry finds the first's number.
		err := s.db.QueryRow(ctx, `
			WITH bump AS (
				INSERT INTO due_sequences AS d (tenant_id, user_id, seq)
				SELECT $1, $2, 1
				WHERE NOT EXISTS (SELECT 1 FROM notification_sequences WHERE tenant_id = $1 AND notification_id = $3)
				ON CONFLICT (tenant_id, user_id) DO UPDATE SET seq = d.seq + 1
				RETURNING seq
			), numbered AS (
				INSERT INTO notification_sequences (tenant_id, notification_id, user_id, seq)
				SELECT $1, $3, $2, seq FROM bump
				RETURNING seq
			)
			SELECT seq FROM numbered
			UNION ALL
			SELECT seq FROM notification_sequences WHERE tenant_id = $1 AND notification_id = $3`,
			tenantID, userID, notificationID).Scan(&seq)
		var pgErr *pgconn.PgError
		if attempt == 0 && errors.As(err, &pgErr) && pgErr.Code == "23505" {
			continue // numbered meanwhile by another caller: read its number
		}
		return seq, err
	}
}

// DueSequence is a notification's number (nil: not due yet, or unknown).
func (s *Store) DueSequence(ctx context.Context, tenantID, notificationID string) (*int64, error) {
	var seq int64
	err := s.db.QueryRow(ctx, `SELECT seq FROM notification_sequences WHERE tenant_id = $1 AND notification_id = $2`,
		tenantID, notificationID).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &seq, nil
}

// assignDueBatch runs inside a transaction: it numbers the notifications
// (ids[i] is userIDs[i]'s) that have no number yet, each user's in id order,
// after locking the users' counters in user order (so concurrent batches and
// single numberings cannot deadlock).
func (s *Store) assignDueBatch(ctx context.Context, tenantID string, userIDs, ids []string) error {
	users := slices.Clone(userIDs)
	slices.Sort(users)
	users = slices.Compact(users)
	if _, err := s.db.Exec(ctx, `
		INSERT INTO due_sequences AS d (tenant_id, user_id)
		SELECT $1, u FROM unnest($2::text[]) AS u ORDER BY u
		ON CONFLICT (tenant_id, user_id) DO UPDATE SET seq = d.seq`, tenantID, users); err != nil {
		return err
	}
	// A new statement: its snapshot sees every numbering committed before the
	// locks above were granted.
	_, err := s.db.Exec(ctx, `
		WITH todo AS (
			SELECT x.id, x.uid, row_number() OVER (PARTITION BY x.uid ORDER BY x.id) AS rn
			FROM unnest($2::text[], $3::text[]) AS x(id, uid)
			WHERE NOT EXISTS (SELECT 1 FROM notification_sequences s WHERE s.tenant_id = $1 AND s.notification_id = x.id)
		), numbered AS (
			INSERT INTO notification_sequences (tenant_id, notification_id, user_id, seq)
			SELECT $1, t.id, t.uid, d.seq + t.rn
			FROM todo t JOIN due_sequences d ON d.tenant_id = $1 AND d.user_id = t.uid
		)
		UPDATE due_sequences d SET seq = d.seq + c.n
		FROM (SELECT uid, count(*) AS n FROM todo GROUP BY uid) c
		WHERE d.tenant_id = $1 AND d.user_id = c.uid`,
		tenantID, ids, userIDs)
	return err
}
