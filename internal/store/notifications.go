package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/herald-notify/herald/internal/dbx"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Notification is one accepted notification (one run of its workflow).
type Notification struct {
	TenantID     string
	ID           string
	UserID       string
	TemplateID   string
	Channels     []herald.Channel
	WorkflowID   string
	RunID        string
	DedupKeyHash string
	Status       herald.NotificationStatus
	AcceptedAt   time.Time
	UpdatedAt    time.Time
	Deliveries   []Delivery
	// TemplateVersion is the template version the notification renders with (0 for
	// notifications accepted before templates existed); Category is the template's.
	TemplateVersion int
	Category        string
	// Dedup is the notification's dedup ledger row (GetNotification; nil when it
	// has none).
	Dedup *Dedup
	// DueSeq is its number in the user's due sequence (GetNotification; nil
	// until it is due).
	DueSeq *int64
	// Due: the notification is due now; InsertNotification numbers it in the
	// same statement unless it has its number (AssignDue) already.
	Due bool
}

// notificationIDColumns reads a notification's (aliased n) workflow id, run id
// and dedup key hash: NULL in a column stands for the value derived from the
// id and campaign (migration 0122), which the writers leave out.
const notificationIDColumns = `COALESCE(n.workflow_id, notification_workflow_id(n.tenant_id, n.id, n.campaign_id)),
	COALESCE(n.run_id, notification_run_id(n.id, n.campaign_id)), COALESCE(n.dedup_key_hash, notification_key_hash(n.id, n.campaign_id))`

// derivedNotificationIDs is what an INSERT writes for the workflow id, run
// id and dedup key hash (SQL expressions): NULL for a value derived from the
// tenant, id and campaign as notificationIDColumns derives it, the value
// otherwise.
func derivedNotificationIDs(workflowID, runID, keyHash, tenantID, id, campaignID string) string {
	return fmt.Sprintf(`NULLIF(%[1]s::text, notification_workflow_id(%[4]s::text, %[5]s::bytea, %[6]s::text)), `+
		`NULLIF(%[2]s::text, notification_run_id(%[5]s::bytea, %[6]s::text)), NULLIF(%[3]s::text, notification_key_hash(%[5]s::bytea, %[6]s::text))`,
		workflowID, runID, keyHash, tenantID, id, campaignID)
}

// InsertNotification records an accepted notification, a delivery row per channel
// (pending, or scheduled for send_at) and, when n.Dedup carries the body hash,
// the notification's dedup-ledger row — in one statement, so one round trip and
// one commit: from then on the ledger answers the key's duplicates by itself
// (ledgerSQL needs the notification row anyway). A duplicate that got to the
// ledger first left a row with its count and no body hash; this fills the hash
// and the window in and keeps the count. Re-running it (an activity retry)
// changes nothing: n.AcceptedAt, part of both tables' keys (they are
// partitioned by it, migration 0102), is the workflow input's, the same on
// every retry. With n.Due it also numbers the notification in its user's
// due sequence when nothing did yet (as AssignDue; the accept path usually has).
func (s *Store) InsertNotification(ctx context.Context, n Notification) error {
	err := s.insertNotification(ctx, n)
	var pgErr *pgconn.PgError
	if n.Due && errors.As(err, &pgErr) && pgErr.Code == "23505" {
		// Numbered by the accept path at the same moment: the retry keeps that
		// number (everything else in the statement is idempotent).
		err = s.insertNotification(ctx, n)
	}
	return err
}

func (s *Store) insertNotification(ctx context.Context, n Notification) error {
	status := herald.DeliveryPending
	var reason herald.Reason
	if n.Status == herald.NotificationScheduled {
		status, reason = herald.DeliveryScheduled, herald.ReasonSendAt
	}
	var bodyHash []byte
	var firstSeen, until *time.Time
	if n.Dedup != nil && n.Dedup.BodyHash != nil {
		bodyHash, firstSeen, until = n.Dedup.BodyHash, &n.Dedup.FirstSeenAt, n.Dedup.DedupUntil
	}
	_, err := s.db.Exec(ctx, `
		WITH notification AS (
			INSERT INTO notifications (tenant_id, id, user_id, template_id, channels, workflow_id, run_id, dedup_key_hash, status, accepted_at,
				template_version, category)
			VALUES ($1, $2, $3, $4, NULL, `+derivedNotificationIDs("$6", "$7", "$8", "$1", "$2", "NULL")+`, $9, $10, NULLIF($11, 0), NULLIF($12, ''))
			ON CONFLICT (tenant_id, id, accepted_at) DO NOTHING
		), channels AS (
			INSERT INTO deliveries (tenant_id, notification_id, channel, status, reason, accepted_at)
			SELECT $1, $2, ch, $13, NULLIF($14, ''), $10 FROM unnest($5::text[]) AS ch
			ON CONFLICT (tenant_id, notification_id, channel, accepted_at) DO NOTHING
		), ledger AS (
			INSERT INTO notification_dedup AS d (tenant_id, notification_id, key_hash, body_hash, first_seen_at, last_seen_at, duplicates, dedup_until)
			SELECT $1, $2, `+ledgerKeyHash("$8", "$2")+`, $15, $16, NULL, 0, $17 WHERE $15::bytea IS NOT NULL
			ON CONFLICT (tenant_id, notification_id) DO UPDATE
			SET body_hash = EXCLUDED.body_hash, dedup_until = EXCLUDED.dedup_until,
				first_seen_at = least(d.first_seen_at, EXCLUDED.first_seen_at)
		), bump AS (
			INSERT INTO due_sequences AS q (tenant_id, user_id, seq)
			SELECT $1, $3, 1
			WHERE $18::boolean AND NOT EXISTS (SELECT 1 FROM notification_sequences WHERE tenant_id = $1 AND notification_id = $2)
				-- Recorded again after it ended (a replayed workflow task): its number is on its row.
				AND NOT EXISTS (SELECT 1 FROM notifications WHERE tenant_id = $1 AND id = $2 AND accepted_at = $10 AND due_seq IS NOT NULL)
			ON CONFLICT (tenant_id, user_id) DO UPDATE SET seq = q.seq + 1
			RETURNING seq
		)
		INSERT INTO notification_sequences (tenant_id, notification_id, user_id, seq)
		SELECT $1, $2, $3, seq FROM bump`,
		n.TenantID, n.ID, n.UserID, n.TemplateID, n.Channels, n.WorkflowID, n.RunID, n.DedupKeyHash, n.Status, n.AcceptedAt,
		n.TemplateVersion, n.Category, status, reason, bodyHash, firstSeen, until, n.Due)
	return err
}

// RunIDSkew bounds how far a notification's accepted_at is from the time of
// the UUIDv7 run id in its id: accepted_at is the run's WorkflowStartTime, and
// Temporal stamps it and makes the run id for the same start request (an hour
// covers clocks of different server hosts; a day partition is still one or
// two).
const RunIDSkew = time.Hour

// acceptedWindow is a range of accepted_at to look for a notification in.
type acceptedWindow struct{ from, to pgtype.Timestamptz }

// anyAcceptedAt is every partition.
var anyAcceptedAt = acceptedWindow{
	from: pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true},
	to:   pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true},
}

// acceptedWindows are where a statement by notification id looks, in order:
// RunIDSkew around the time of the id's UUIDv7 run id (one or two day
// partitions), then every partition; only the latter for an id without one.
// A statement by id that finds no row in the first looks again in the
// second (see GetNotification for why it can miss), so a bound never loses
// an update: the worker's reads and writes by id (the guard's GetDelivery,
// UpdateDelivery, the status writes) probe one or two partitions' indexes
// instead of every one (~38).
func acceptedWindows(id string) []acceptedWindow {
	if _, runID, err := ids.ParseNotificationID(id); err == nil {
		if at, ok := ids.RunIDTime(runID); ok {
			near := acceptedWindow{from: pgtype.Timestamptz{Time: at.Add(-RunIDSkew), Valid: true}, to: pgtype.Timestamptz{Time: at.Add(RunIDSkew), Valid: true}}
			return []acceptedWindow{near, anyAcceptedAt}
		}
	}
	return []acceptedWindow{anyAcceptedAt}
}

// runIDWindow is the first of acceptedWindows(id) when the id's run id tells
// where its row is, and no window (NULL bounds: no partition) when it does not.
func runIDWindow(id string) acceptedWindow {
	if w := acceptedWindows(id); len(w) > 1 {
		return w[0]
	}
	return acceptedWindow{}
}

// GetNotification returns a notification with its deliveries, in channel order.
// The notifications are partitioned by accepted_at, which the id does not
// name: unbounded, the lookup probes every partition's index (~38). An id
// whose run id is a UUIDv7 carries the run's start, so the lookup is bounded
// to RunIDSkew around it (one or two partitions); an id without one (a
// campaign recipient's), or whose row is not in that window (a run whose id
// and start part, as a reset's could), is looked up in every partition. The
// deliveries are then read at the notification's own accepted_at (every
// writer writes it to both tables: migration 0102), one partition.
func (s *Store) GetNotification(ctx context.Context, tenantID, id string) (Notification, error) {
	for _, w := range acceptedWindows(id) {
		n, err := s.getNotification(ctx, tenantID, id, `AND n.accepted_at BETWEEN $3 AND $4`, w.from, w.to)
		if !errors.Is(err, herald.ErrNotFound) {
			return n, err
		}
	}
	return Notification{}, herald.ErrNotFound
}

func (s *Store) getNotification(ctx context.Context, tenantID, id, bound string, args ...any) (Notification, error) {
	var n Notification
	var dups *int
	var first, last, until *time.Time
	err := s.db.QueryRow(ctx, `
		SELECT n.tenant_id, n.id, n.user_id, n.template_id, n.channels, `+notificationIDColumns+`, n.status, n.accepted_at, n.updated_at,
			COALESCE(n.template_version, 0), COALESCE(n.category, ''), d.duplicates, d.first_seen_at, `+ledgerLastSeen("d.")+`, d.dedup_until, coalesce(n.due_seq, s.seq)
		FROM notifications n LEFT JOIN notification_dedup d ON d.tenant_id = n.tenant_id AND d.notification_id = n.id
		LEFT JOIN notification_sequences s ON s.tenant_id = n.tenant_id AND s.notification_id = n.id
		WHERE n.tenant_id = $1 AND n.id = $2 `+bound, append([]any{tenantID, id}, args...)...).
		Scan(&n.TenantID, &n.ID, &n.UserID, &n.TemplateID, &n.Channels, &n.WorkflowID, &n.RunID, &n.DedupKeyHash, &n.Status, &n.AcceptedAt, &n.UpdatedAt,
			&n.TemplateVersion, &n.Category, &dups, &first, &last, &until, &n.DueSeq)
	if err != nil {
		return Notification{}, dbx.NotFound(err)
	}
	if dups != nil && first != nil && last != nil {
		n.Dedup = &Dedup{NotificationID: n.ID, KeyHash: n.DedupKeyHash, Duplicates: *dups, FirstSeenAt: *first, LastSeenAt: *last, DedupUntil: until}
	}
	n.Deliveries, err = s.listDeliveries(ctx, tenantID, id, `AND accepted_at = $3`, n.AcceptedAt)
	if n.Channels == nil {
		// Written since 0170: the channels are the delivery rows' (one per channel).
		for _, d := range n.Deliveries {
			n.Channels = append(n.Channels, d.Channel)
		}
	}
	return n, err
}

// NotificationStatus is the duplicate-submission fast path: status and accepted_at only.
func (s *Store) NotificationStatus(ctx context.Context, tenantID, id string) (status herald.NotificationStatus, acceptedAt time.Time, err error) {
	for _, w := range acceptedWindows(id) {
		err = s.db.QueryRow(ctx, `SELECT status, accepted_at FROM notifications WHERE tenant_id = $1 AND id = $2 AND accepted_at BETWEEN $3 AND $4`,
			tenantID, id, w.from, w.to).Scan(&status, &acceptedAt)
		if !errors.Is(err, pgx.ErrNoRows) {
			break
		}
	}
	return status, acceptedAt, dbx.NotFound(err)
}

// SetNotificationStatus records the overall status the workflow computed.
func (s *Store) SetNotificationStatus(ctx context.Context, tenantID, id string, status herald.NotificationStatus) error {
	for _, w := range acceptedWindows(id) {
		var changed int64
		err := s.db.QueryRow(ctx, endStatusSQL(`UPDATE notifications n SET status = $3, updated_at = now(), `+dueOnEndSQL("$3")+`
			WHERE n.tenant_id = $1 AND n.id = $2 AND n.accepted_at BETWEEN $4 AND $5`),
			tenantID, id, status, w.from, w.to).Scan(&changed)
		if err != nil || changed > 0 {
			return err
		}
	}
	return herald.ErrNotFound
}

// RecomputeNotificationStatus derives the overall status from the deliveries with
// herald.OverallStatus (the workflow's own rule), stores and returns it. Receipts
// that arrive after the workflow recorded its status call it too; the
// notification row is locked first so concurrent recomputations apply in order and
// the last one sees every delivery update committed before it.
func (s *Store) RecomputeNotificationStatus(ctx context.Context, tenantID, id string) (herald.NotificationStatus, error) {
	var status herald.NotificationStatus
	err := s.InTx(ctx, func(tx *Store) error {
		var acceptedAt time.Time
		var err error
		for _, w := range acceptedWindows(id) {
			err = tx.db.QueryRow(ctx, `SELECT accepted_at FROM notifications WHERE tenant_id = $1 AND id = $2 AND accepted_at BETWEEN $3 AND $4 FOR UPDATE`,
				tenantID, id, w.from, w.to).Scan(&acceptedAt)
			if !errors.Is(err, pgx.ErrNoRows) {
				break
			}
		}
		if err != nil {
			return dbx.NotFound(err)
		}
		// A delivery's accepted_at is its notification's (migration 0102).
		rows, err := tx.db.Query(ctx, `SELECT status FROM deliveries WHERE tenant_id = $1 AND notification_id = $2 AND accepted_at = $3`, tenantID, id, acceptedAt)
		if err != nil {
			return err
		}
		statuses, err := pgx.CollectRows(rows, pgx.RowTo[herald.DeliveryStatus])
		if err != nil {
			return err
		}
		if len(statuses) == 0 {
			return herald.ErrNotFound
		}
		status = herald.OverallStatus(statuses)
		_, err = tx.db.Exec(ctx, endStatusSQL(`UPDATE notifications n SET status = $3, updated_at = now(), `+dueOnEndSQL("$3")+`
			WHERE n.tenant_id = $1 AND n.id = $2 AND n.accepted_at = $4`),
			tenantID, id, status, acceptedAt)
		return err
	})
	return status, err
}
