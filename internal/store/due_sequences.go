package store

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/herald-notify/herald/internal/herald"
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

// A number is needed while its notification is in flight: the accept path
// and the run number it, the run's inbox write copies it onto the inbox row.
// Once the notification has ended, the statement that records the ended
// status moves the number onto the notification's own row
// (notifications.due_seq, 8 bytes) and deletes its notification_sequences row
// (a row and three keys, ~450 bytes: docs/retention.md#bytes-per-notification),
// so the table holds the notifications in flight, not the history's 30 days.
// A status that opens an ended notification again (a receipt's recomputation
// while a redriven channel is in flight) puts the number back. Readers take
// the row's number first (GetNotification); numbering or recording an ended
// notification again finds it there and takes none.

// openStatusesSQL lists herald.OpenNotificationStatuses as SQL:
// ('queued', 'scheduled', 'sending').
var openStatusesSQL = func() string {
	open := make([]string, len(herald.OpenNotificationStatuses))
	for i, s := range herald.OpenNotificationStatuses {
		open[i] = "'" + string(s) + "'"
	}
	return "(" + strings.Join(open, ", ") + ")"
}()

// endedSQL is true when the status expression names an ended status
// (herald.NotificationStatus.Ended).
func endedSQL(status string) string { return status + ` NOT IN ` + openStatusesSQL }

// endedDueSQL selects (as seq) the due number an ended notification holds on
// its row: tenant, notification id and the accepted_at bounds are the
// statement's parameters named.
func endedDueSQL(tenant, id, from, to string) string {
	return `SELECT due_seq AS seq FROM notifications
		WHERE tenant_id = ` + tenant + ` AND id = ` + id + ` AND accepted_at BETWEEN ` + from + ` AND ` + to + ` AND due_seq IS NOT NULL`
}

// dueOnEndSQL is the SET item of an update of notifications (aliased n) to the
// status expression status: a notification that ends takes its due number
// from notification_sequences (one it holds already is kept).
func dueOnEndSQL(status string) string {
	return `due_seq = CASE WHEN ` + endedSQL(status) + ` THEN coalesce(n.due_seq,
		(SELECT s.seq FROM notification_sequences s WHERE s.tenant_id = n.tenant_id AND s.notification_id = n.id)) ELSE n.due_seq END`
}

// endStatusSQL runs update, an UPDATE of notifications aliased n whose SET has
// dueOnEndSQL, and in the same statement deletes the notification_sequences
// rows of the notifications it ended and writes back those of the ones it
// opened again; it returns how many notifications the update changed.
func endStatusSQL(update string) string {
	return `WITH changed AS (` + update + ` RETURNING n.tenant_id, n.id, n.user_id, n.status, n.due_seq),
	ended AS (
		DELETE FROM notification_sequences s USING changed c
		WHERE s.tenant_id = c.tenant_id AND s.notification_id = c.id AND ` + endedSQL("c.status") + `
	), reopened AS (
		INSERT INTO notification_sequences (tenant_id, notification_id, user_id, seq)
		SELECT c.tenant_id, c.id, c.user_id, c.due_seq FROM changed c WHERE c.due_seq IS NOT NULL AND NOT ` + endedSQL("c.status") + `
		ON CONFLICT DO NOTHING
	)
	SELECT count(*) FROM changed`
}

// AssignDue numbers a notification of the user that is due now and returns its
// number; a notification already numbered keeps its number.
func (s *Store) AssignDue(ctx context.Context, tenantID, userID, notificationID string) (int64, error) {
	// A notification that ended before this numbering (the accept path's, late:
	// its run recorded, numbered, delivered and ended it first) holds its
	// number on its row: looked up in the one or two day partitions around its
	// run id's time (no bound, no lookup: only a UUIDv7 run id tells where).
	near := runIDWindow(notificationID)
	for attempt := 0; ; attempt++ {
		var seq int64
		// One statement: the counter's row lock is taken by the upsert and held
		// to commit. Two numberings of one notification at once both pass NOT
		// EXISTS; the second then fails on the primary key (its counter step is
		// rolled back with it) and the retry finds the first's number.
		err := s.db.QueryRow(ctx, `
			WITH ended AS (`+endedDueSQL("$1", "$3", "$4", "$5")+`), bump AS (
				INSERT INTO due_sequences AS d (tenant_id, user_id, seq)
				SELECT $1, $2, 1
				WHERE NOT EXISTS (SELECT 1 FROM notification_sequences WHERE tenant_id = $1 AND notification_id = $3)
					AND NOT EXISTS (SELECT 1 FROM ended)
				ON CONFLICT (tenant_id, user_id) DO UPDATE SET seq = d.seq + 1
				RETURNING seq
			), numbered AS (
				INSERT INTO notification_sequences (tenant_id, notification_id, user_id, seq)
				SELECT $1, $3, $2, seq FROM bump
				RETURNING seq
			)
			SELECT seq FROM numbered
			UNION ALL
			SELECT seq FROM notification_sequences WHERE tenant_id = $1 AND notification_id = $3
			UNION ALL
			SELECT seq FROM ended`,
			tenantID, userID, notificationID, near.from, near.to).Scan(&seq)
		var pgErr *pgconn.PgError
		if attempt == 0 && errors.As(err, &pgErr) && pgErr.Code == "23505" {
			continue // numbered meanwhile by another caller: read its number
		}
		return seq, err
	}
}

// DueSequence is a notification's number (nil: not due yet, or unknown): its
// notification_sequences row's, or its notification row's once it ended (looked
// up around its run id's time, as AssignDue does).
func (s *Store) DueSequence(ctx context.Context, tenantID, notificationID string) (*int64, error) {
	near := runIDWindow(notificationID)
	var seq int64
	err := s.db.QueryRow(ctx, `
		SELECT seq FROM notification_sequences WHERE tenant_id = $1 AND notification_id = $2
		UNION ALL
		`+endedDueSQL("$1", "$2", "$3", "$4")+`
		LIMIT 1`,
		tenantID, notificationID, near.from, near.to).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &seq, nil
}

// assignDueBatch runs inside a transaction: it numbers the notifications
// (ids[i] is userIDs[i]'s, all accepted at acceptedAt) that have no number yet,
// each user's in id order, after locking the users' counters in user order (so
// concurrent batches and single numberings cannot deadlock). A notification
// that has ended holds its number on its row (a batch run again after some of
// its recipients ended).
func (s *Store) assignDueBatch(ctx context.Context, tenantID string, userIDs, ids []string, acceptedAt time.Time) error {
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
			FROM unnest($2::bytea[], $3::text[]) AS x(id, uid)
			WHERE NOT EXISTS (SELECT 1 FROM notification_sequences s WHERE s.tenant_id = $1 AND s.notification_id = x.id)
				-- One pass over the batch's ended rows, not a probe per id: every
				-- recipient has the campaign's accepted_at, and a planner that
				-- does not know it yet (a table analysed before the campaign)
				-- would rescan them for each id.
				AND x.id NOT IN (SELECT n.id FROM notifications n
					WHERE n.tenant_id = $1 AND n.accepted_at = $4 AND n.id = ANY($2) AND n.due_seq IS NOT NULL)
		), numbered AS (
			INSERT INTO notification_sequences (tenant_id, notification_id, user_id, seq)
			SELECT $1, t.id, t.uid, d.seq + t.rn
			FROM todo t JOIN due_sequences d ON d.tenant_id = $1 AND d.user_id = t.uid
		)
		UPDATE due_sequences d SET seq = d.seq + c.n
		FROM (SELECT uid, count(*) AS n FROM todo GROUP BY uid) c
		WHERE d.tenant_id = $1 AND d.user_id = c.uid`,
		tenantID, ids, userIDs, acceptedAt)
	return err
}
