package store

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-notify/herald/internal/dbx"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/retention"
)

// Attempt outcomes.
const (
	AttemptAccepted  = "accepted"
	AttemptRetryable = "retryable"
	AttemptPermanent = "permanent"
)

// Attempt is one provider call for a channel.
type Attempt struct {
	Attempt  int       `json:"attempt"`
	Provider string    `json:"provider"`
	Outcome  string    `json:"outcome"`
	Error    *string   `json:"error"`
	At       time.Time `json:"at"`
}

// The history of a channel's provider calls (GET /v1/notifications/{id},
// the dead letters' attempt counts) is the channel's delivery_attempts rows
// and, since migration 0156, the accepted call its delivery row carries
// (deliveries.accepted_attempt, with the row's provider and sent_at): the
// call the guard recorded "sent" after the provider accepted is not written
// twice. A delivery_attempts row is written for every call that did not
// succeed, and for an accepted call the delivery row could not carry
// (DeliveryUpdate.AcceptedAttempt, BulkDeliveryUpdate.Accepted). Rows of
// accepted calls written before 0156 stay and are read as they are (their
// delivery rows carry no accepted_attempt).

// RecordAttempt appends one provider call's outcome to the channel's history.
func (s *Store) RecordAttempt(ctx context.Context, tenantID, notificationID string, channel herald.Channel, a Attempt) error {
	_, err := s.db.Exec(ctx, `
		INSERT INTO delivery_attempts (tenant_id, notification_id, channel, attempt, provider, outcome, error)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, tenantID, notificationID, channel, a.Attempt, a.Provider, a.Outcome, a.Error)
	return err
}

// RecordBatchAttempt appends one provider call made for many notifications at
// once (a batch email) to each one's channel history, in one statement: each row
// numbered after the attempts that notification's channel already has.
func (s *Store) RecordBatchAttempt(ctx context.Context, tenantID string, channel herald.Channel, notificationIDs []string, a Attempt) error {
	as := make([]RecipientAttempt, len(notificationIDs))
	for i, id := range notificationIDs {
		as[i] = RecipientAttempt{NotificationID: id, Attempt: a}
	}
	return s.RecordAttempts(ctx, tenantID, channel, time.Time{}, as)
}

// RecipientAttempt is one notification's provider call in RecordAttempts.
// Attempt.Attempt and At are not used: the row is numbered after the
// attempts the channel already has, and stamped now.
type RecipientAttempt struct {
	NotificationID string
	Attempt
}

// carriedAcceptedSQL is 1 when the channel's delivery row carries its
// accepted attempt (deliveries.accepted_attempt), else 0: that attempt has
// no delivery_attempts row but counts in the channel's numbering. $1 is the
// tenant; id and channel are SQL expressions; bound, SQL on d.accepted_at
// (the partition key: without it, the lookup probes every partition, ~38).
// storedAttemptsSQL counts a channel's delivery_attempts rows (tenant, id
// and channel are SQL expressions): the number of its next stored call less
// one, and less the carried accepted call (carriedAcceptedSQL).
func storedAttemptsSQL(tenant, id, channel string) string {
	return `(SELECT count(*) FROM delivery_attempts x WHERE x.tenant_id = ` + tenant + ` AND x.notification_id = ` + id + ` AND x.channel = ` + channel + `)`
}

func carriedAcceptedSQL(id, channel, bound string) string {
	return `(EXISTS (SELECT 1 FROM deliveries d WHERE d.tenant_id = $1 AND d.notification_id = ` + id + ` AND d.channel = ` + channel + `
		AND d.accepted_attempt IS NOT NULL ` + bound + `))::int`
}

// RecordAttempts appends the outcomes of many notifications' provider calls on
// one channel (a chunk of a campaign's sends, each its own call and outcome) to
// each one's history, in one statement: each row numbered after the attempts
// that notification's channel already has, the accepted one its delivery row
// carries included (a notification listed twice gets both rows, numbered in
// order). An accepted call the delivery row carries (BulkDeliveryUpdate.Accepted
// applied) is not passed here. acceptedAt is the notifications' accepted_at
// (a campaign's recipients all have their campaign's: CampaignAcceptedAt):
// each delivery row is then read in its one partition; zero, in every
// partition.
func (s *Store) RecordAttempts(ctx context.Context, tenantID string, channel herald.Channel, acceptedAt time.Time, as []RecipientAttempt) error {
	if len(as) == 0 {
		return nil
	}
	bound, args := "", []any{}
	if !acceptedAt.IsZero() {
		bound, args = "AND d.accepted_at = $7", []any{acceptedAt}
	}
	ids, providers, outcomes := make([]string, len(as)), make([]string, len(as)), make([]string, len(as))
	errs := make([]*string, len(as))
	for i, a := range as {
		ids[i], providers[i], outcomes[i], errs[i] = a.NotificationID, a.Provider, a.Outcome, a.Error
	}
	_, err := s.db.Exec(ctx, `
		INSERT INTO delivery_attempts (tenant_id, notification_id, channel, attempt, provider, outcome, error)
		SELECT $1, n.id, $2,
			`+storedAttemptsSQL("$1", "n.id", "$2")+`
				+ `+carriedAcceptedSQL("n.id", "$2", bound)+`
				+ row_number() OVER (PARTITION BY n.id ORDER BY n.o),
			n.provider, n.outcome, n.error
		FROM unnest($3::bytea[], $4::text[], $5::text[], $6::text[]) WITH ORDINALITY AS n (id, provider, outcome, error, o)`,
		append([]any{tenantID, channel, ids, providers, outcomes, errs}, args...)...)
	return err
}

// CountAttempts counts a channel's recorded provider attempts: its
// delivery_attempts rows and the accepted one its delivery row carries (read
// in the id's windows, as GetDelivery: one or two partitions for an id with
// a UUIDv7 run id).
func (s *Store) CountAttempts(ctx context.Context, tenantID, notificationID string, channel herald.Channel) (int, error) {
	var n int
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM delivery_attempts WHERE tenant_id = $1 AND notification_id = $2 AND channel = $3`,
		tenantID, notificationID, channel).Scan(&n); err != nil {
		return 0, err
	}
	var carried bool
	err := s.queryDeliveryRow(ctx, tenantID, notificationID, channel, `accepted_attempt IS NOT NULL`, &carried)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, err
	}
	if carried {
		n++
	}
	return n, nil
}

// ListAttempts returns a notification's attempts, channel → oldest first.
func (s *Store) ListAttempts(ctx context.Context, tenantID, notificationID string) (map[herald.Channel][]Attempt, error) {
	return s.listAttempts(ctx, tenantID, notificationID, "", "")
}

// AttemptClockSkew bounds how much earlier than its notification's
// accepted_at an attempt's at can be: an attempt is made after the run
// started (accepted_at, Temporal's clock) and stamped with PostgreSQL's
// now(), so only a database clock this far behind Temporal's could.
const AttemptClockSkew = retention.Day

// ListAttemptsOf is ListAttempts of a notification accepted at acceptedAt:
// it reads only the partitions from acceptedAt - AttemptClockSkew on (the
// attempts are partitioned by their own time), not the older ones, and the
// deliveries' one partition of acceptedAt (a delivery's accepted_at is its
// notification's: every writer writes it to both, migration 0102).
func (s *Store) ListAttemptsOf(ctx context.Context, tenantID, notificationID string, acceptedAt time.Time) (map[herald.Channel][]Attempt, error) {
	return s.listAttempts(ctx, tenantID, notificationID, `AND at >= $3`, `AND accepted_at = $4`, acceptedAt.Add(-AttemptClockSkew), acceptedAt)
}

// listAttempts reads the delivery_attempts rows in the order they were
// written (id) and the accepted attempts the delivery rows carry (id NULL),
// and puts each carried one in its channel's list before the first row
// written after it (its sent_at; at the same time, numbered after it): the
// place its row had when it was one.
func (s *Store) listAttempts(ctx context.Context, tenantID, notificationID, bound, deliveriesBound string, args ...any) (map[herald.Channel][]Attempt, error) {
	rows, err := s.db.Query(ctx, `
		SELECT channel, attempt, provider, outcome, error, at, id FROM delivery_attempts
		WHERE tenant_id = $1 AND notification_id = $2 `+bound+`
		UNION ALL
		SELECT channel, accepted_attempt, COALESCE(provider, ''), '`+AttemptAccepted+`', NULL, COALESCE(sent_at, updated_at), NULL FROM deliveries
		WHERE tenant_id = $1 AND notification_id = $2 AND accepted_attempt IS NOT NULL `+deliveriesBound+`
		ORDER BY id NULLS LAST`,
		append([]any{tenantID, notificationID}, args...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[herald.Channel][]Attempt{}
	carried := map[herald.Channel]Attempt{}
	for rows.Next() {
		var ch herald.Channel
		var a Attempt
		var id *int64
		if err := rows.Scan(&ch, &a.Attempt, &a.Provider, &a.Outcome, &a.Error, &a.At, &id); err != nil {
			return nil, err
		}
		if id == nil {
			carried[ch] = a
			continue
		}
		out[ch] = append(out[ch], a)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for ch, a := range carried {
		h := out[ch]
		i := len(h)
		for i > 0 && (h[i-1].At.After(a.At) || h[i-1].At.Equal(a.At) && h[i-1].Attempt > a.Attempt) {
			i--
		}
		out[ch] = slices.Insert(h, i, a)
	}
	return out, nil
}

// Dead letter statuses.
const (
	DeadLetterOpen      = "open"
	DeadLetterRedriving = "redriving"
	DeadLetterRedriven  = "redriven"
)

// DeadLetter is a channel delivery whose retries ran out.
type DeadLetter struct {
	ID             int64           `json:"id"`
	NotificationID string          `json:"notification_id"`
	Channel        herald.Channel  `json:"channel"`
	TemplateID     string          `json:"template_id"`
	Attempts       int             `json:"attempts"`
	LastError      string          `json:"last_error"`
	Status         string          `json:"status"`
	Redrives       int             `json:"redrives"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
	Payload        json.RawMessage `json:"-"`
	TenantID       string          `json:"-"`
}

const deadLetterColumns = `id, tenant_id, notification_id, channel, template_id, attempts, last_error, status, redrives, created_at, updated_at, payload`

func scanDeadLetter(row interface{ Scan(...any) error }) (DeadLetter, error) {
	var d DeadLetter
	err := row.Scan(&d.ID, &d.TenantID, &d.NotificationID, &d.Channel, &d.TemplateID, &d.Attempts, &d.LastError, &d.Status,
		&d.Redrives, &d.CreatedAt, &d.UpdatedAt, &d.Payload)
	return d, dbx.NotFound(err)
}

// PutDeadLetter dead-letters a channel (again, after a failed redrive) and marks its
// delivery failed with reason dead_lettered.
func (s *Store) PutDeadLetter(ctx context.Context, d DeadLetter) (DeadLetter, error) {
	var out DeadLetter
	err := s.InTx(ctx, func(tx *Store) error {
		var err error
		out, err = scanDeadLetter(tx.db.QueryRow(ctx, `
			INSERT INTO dead_letters (tenant_id, notification_id, channel, template_id, attempts, last_error, payload)
			VALUES ($1, $2, $3, $4, $5, $6, $7)
			ON CONFLICT (tenant_id, notification_id, channel) DO UPDATE SET
				attempts = EXCLUDED.attempts, last_error = EXCLUDED.last_error,
				status = 'open', updated_at = now()
			RETURNING `+deadLetterColumns,
			d.TenantID, d.NotificationID, d.Channel, d.TemplateID, d.Attempts, d.LastError, []byte(d.Payload)))
		if err != nil {
			return err
		}
		_, err = tx.db.Exec(ctx, `
			UPDATE deliveries SET status = $6, reason = $4, last_error = $5, updated_at = now()
			WHERE tenant_id = $1 AND notification_id = $2 AND channel = $3 AND status NOT IN ($7, $8)`,
			d.TenantID, d.NotificationID, d.Channel, herald.ReasonDeadLettered, d.LastError,
			herald.DeliveryFailed, herald.DeliverySent, herald.DeliveryDelivered)
		return err
	})
	return out, err
}

// DeadLetterFilter selects dead letters; zero fields match everything.
type DeadLetterFilter struct {
	TenantID   string
	Channel    herald.Channel
	TemplateID string
	Since      time.Time
	Until      time.Time
	Status     string
	Limit      int
	// After, when set, starts the page after this position (keyset pagination).
	After *DeadLetterCursor
}

// DeadLetterCursor is the (created_at, id) of the last dead letter of a page. Both
// never change once the row exists (a dead letter dead-lettered again keeps them),
// so pages never repeat a dead letter.
type DeadLetterCursor struct {
	CreatedAt time.Time
	ID        int64
}

// ListDeadLetters returns matching dead letters, newest first (created_at, then
// id), at most f.Limit.
func (s *Store) ListDeadLetters(ctx context.Context, f DeadLetterFilter) ([]DeadLetter, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	var afterAt *time.Time
	var afterID int64
	if f.After != nil {
		afterAt, afterID = &f.After.CreatedAt, f.After.ID
	}
	rows, err := s.db.Query(ctx, `
		SELECT `+deadLetterColumns+` FROM dead_letters
		WHERE tenant_id = $1 AND ($2 = '' OR channel = $2) AND ($3 = '' OR template_id = $3)
		  AND ($4::timestamptz IS NULL OR created_at >= $4) AND ($5::timestamptz IS NULL OR created_at < $5)
		  AND ($6 = '' OR status = $6)
		  AND ($8::timestamptz IS NULL OR (created_at, id) < ($8, $9))
		ORDER BY created_at DESC, id DESC LIMIT $7`,
		f.TenantID, f.Channel, f.TemplateID, nullTime(f.Since), nullTime(f.Until), f.Status, f.Limit, afterAt, afterID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []DeadLetter
	for rows.Next() {
		d, err := scanDeadLetter(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// GetDeadLetter returns one of the tenant's dead letters.
func (s *Store) GetDeadLetter(ctx context.Context, tenantID string, id int64) (DeadLetter, error) {
	return scanDeadLetter(s.db.QueryRow(ctx, `SELECT `+deadLetterColumns+` FROM dead_letters WHERE tenant_id = $1 AND id = $2`, tenantID, id))
}

// BeginRedrive claims an open dead letter for a redrive (open → redriving). It
// reports false when the dead letter is not open (already redriving or redriven).
// The delivery stays failed until the redrive has re-checked the user's
// preferences and address and reopens it (ReopenRedrive), or closes the dead
// letter without a send (FinishRedriveSuppressed).
func (s *Store) BeginRedrive(ctx context.Context, tenantID string, id int64) (DeadLetter, bool, error) {
	d, err := scanDeadLetter(s.db.QueryRow(ctx, `
		UPDATE dead_letters SET status = 'redriving', redrives = redrives + 1, updated_at = now()
		WHERE tenant_id = $1 AND id = $2 AND status = 'open' RETURNING `+deadLetterColumns, tenantID, id))
	if errors.Is(err, herald.ErrNotFound) {
		return DeadLetter{}, false, nil
	}
	if err != nil {
		return DeadLetter{}, false, err
	}
	return d, true, nil
}

// RedriveTarget is what a redrive re-checks the preferences of: the
// notification's user, its category and whether its template version is critical
// (false if that version is gone).
type RedriveTarget struct {
	UserID   string
	Category string
	Critical bool
}

// RedriveTargetOf reads a notification's RedriveTarget.
func (s *Store) RedriveTargetOf(ctx context.Context, tenantID, notificationID string) (RedriveTarget, error) {
	var t RedriveTarget
	err := s.db.QueryRow(ctx, `
		SELECT n.user_id, COALESCE(n.category, ''), COALESCE(t.critical, false)
		FROM notifications n
		LEFT JOIN templates t ON t.tenant_id = n.tenant_id AND t.template_id = n.template_id AND t.version = n.template_version
		WHERE n.tenant_id = $1 AND n.id = $2`, tenantID, notificationID).Scan(&t.UserID, &t.Category, &t.Critical)
	return t, dbx.NotFound(err)
}

// ReopenRedrive reopens a redriving dead letter's delivery for the guard (failed →
// sending), the one place a delivery moves back.
func (s *Store) ReopenRedrive(ctx context.Context, tenantID string, id int64) error {
	_, err := s.db.Exec(ctx, `
		UPDATE deliveries d SET status = $3, reason = NULL, updated_at = now()
		FROM dead_letters l
		WHERE l.tenant_id = $1 AND l.id = $2 AND l.status = 'redriving'
		  AND d.tenant_id = l.tenant_id AND d.notification_id = l.notification_id AND d.channel = l.channel AND d.status = $4`,
		tenantID, id, herald.DeliverySending, herald.DeliveryFailed)
	return err
}

// FinishRedriveSuppressed closes a redriving dead letter without a send: the
// user's current preferences or address no longer allow the channel. The dead
// letter becomes redriven (nothing is left to redrive), its still-failed delivery
// suppressed with reason, and the notification's status is recomputed.
func (s *Store) FinishRedriveSuppressed(ctx context.Context, tenantID string, id int64, reason herald.Reason) error {
	return s.InTx(ctx, func(tx *Store) error {
		var nid, channel string
		if err := tx.db.QueryRow(ctx, `
			UPDATE dead_letters SET status = 'redriven', updated_at = now() WHERE tenant_id = $1 AND id = $2
			RETURNING notification_id, channel`, tenantID, id).Scan(&nid, &channel); err != nil {
			return dbx.NotFound(err)
		}
		if _, err := tx.db.Exec(ctx, `
			UPDATE deliveries SET status = $4, reason = $5, updated_at = now()
			WHERE tenant_id = $1 AND notification_id = $2 AND channel = $3 AND status IN ($6, $7)`,
			tenantID, nid, channel, herald.DeliverySuppressed, reason, herald.DeliveryFailed, herald.DeliverySending); err != nil {
			return err
		}
		_, err := tx.RecomputeNotificationStatus(ctx, tenantID, nid)
		return err
	})
}

// FinishRedrive marks a dead letter redriven (the channel was delivered) and
// recomputes the notification's status.
func (s *Store) FinishRedrive(ctx context.Context, tenantID string, id int64) error {
	return s.InTx(ctx, func(tx *Store) error {
		var nid string
		if err := tx.db.QueryRow(ctx, `
			UPDATE dead_letters SET status = 'redriven', updated_at = now() WHERE tenant_id = $1 AND id = $2
			RETURNING notification_id`, tenantID, id).Scan(&nid); err != nil {
			return dbx.NotFound(err)
		}
		_, err := tx.RecomputeNotificationStatus(ctx, tenantID, nid)
		return err
	})
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// CountOpenDeadLetters counts the dead letters of every tenant not yet
// redriven (the herald_dead_letters_open gauge; partial index
// dead_letters_open_idx keeps it an index-only count of the open ones).
func (s *Store) CountOpenDeadLetters(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.QueryRow(ctx, `SELECT count(*) FROM dead_letters WHERE status = 'open'`).Scan(&n)
	return n, err
}
