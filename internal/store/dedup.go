package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-notify/herald/internal/dbx"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
)

// Dedup is a notification's row in the dedup ledger (notification_dedup): what
// Layer 1 saw of its key during its window.
type Dedup struct {
	NotificationID string
	KeyHash        string
	// BodyHash is the canonical hash of the body first accepted with the key; nil
	// while only a duplicate has written the row.
	BodyHash []byte
	// Duplicates is how many submissions the window suppressed.
	Duplicates  int
	FirstSeenAt time.Time
	LastSeenAt  time.Time
	// DedupUntil is when the window ends (nil: not known yet).
	DedupUntil *time.Time
}

// DuplicateOutcome is what RecordDuplicate found.
type DuplicateOutcome struct {
	// Counted: the submission was counted as a duplicate (its body matched the
	// original's, or the original's hash is not recorded yet: see BodyKnown).
	Counted bool
	// BodyKnown: the original's body hash was recorded. Counted && !BodyKnown means
	// the caller must still compare against the workflow's memo, and call
	// SettleDuplicate with the answer.
	BodyKnown bool
	Dedup     Dedup
	// Status and AcceptedAt are the original's, once its workflow recorded it
	// (Status "" before).
	Status     herald.NotificationStatus
	AcceptedAt time.Time
}

// duplicateSQL counts one duplicate submission of notification $2 (key $3) whose
// body hashes to $4, seen at $5, in one statement:
//
//   - The ledger row exists and its body hash matches (or is not recorded yet):
//     duplicates + 1 and last_seen_at, returned with the original's status and
//     accepted_at from notifications (when the workflow recorded it already).
//   - The row does not exist (the original's write is still in flight, or its API
//     died between the start and the write): a row with this one duplicate and no
//     body hash is inserted; the original's InsertNotification fills the hash in.
//   - The body hash differs: nothing changes (a reused key is not a duplicate), and
//     the second branch returns the row as it is, uncounted.
//
// The update is a HOT update of one row (no indexed column changes); row locks
// serialise concurrent duplicates of one notification, so 200 of them count 200.
// Like the rate limiter, the statement commits asynchronously (set_config with
// is_local): a database crash may forget the last few hundred milliseconds of
// counts, never invent one.
var duplicateSQL = `
WITH async AS (SELECT set_config('synchronous_commit', 'off', true)),
counted AS (
    INSERT INTO notification_dedup AS d (tenant_id, notification_id, key_hash, first_seen_at, last_seen_at, duplicates)
    SELECT $1, $2, ` + ledgerKeyHash("$3", "$2") + `, $5, $5, 1 FROM async
    ON CONFLICT (tenant_id, notification_id) DO UPDATE
    SET duplicates = d.duplicates + 1, last_seen_at = greatest(` + ledgerLastSeen("d.") + `, EXCLUDED.last_seen_at)
    WHERE d.body_hash IS NULL OR d.body_hash = $4
    RETURNING d.body_hash, d.duplicates, d.first_seen_at, ` + ledgerLastSeen("d.") + ` AS last_seen_at, d.dedup_until
)
SELECT true, c.body_hash, c.duplicates, c.first_seen_at, c.last_seen_at, c.dedup_until, n.status, n.accepted_at
FROM counted c LEFT JOIN notifications n ON n.tenant_id = $1 AND n.id = $2
UNION ALL
SELECT false, d.body_hash, d.duplicates, d.first_seen_at, ` + ledgerLastSeen("d.") + `, d.dedup_until, NULL::text, NULL::timestamptz
FROM notification_dedup d
WHERE d.tenant_id = $1 AND d.notification_id = $2 AND NOT EXISTS (SELECT FROM counted)`

// RecordDuplicateParams is one duplicate submission of a notification.
type RecordDuplicateParams struct {
	TenantID       string
	NotificationID string
	KeyHash        string
	BodyHash       []byte // the submission's body
	SeenAt         time.Time
}

// RecordDuplicate counts a duplicate submission of a notification, or finds that
// its body differs from the original's, in one round trip (see duplicateSQL).
func (s *Store) RecordDuplicate(ctx context.Context, p RecordDuplicateParams) (DuplicateOutcome, error) {
	for range 2 {
		var o DuplicateOutcome
		var status *herald.NotificationStatus
		var acceptedAt *time.Time
		d := &o.Dedup
		err := s.db.QueryRow(ctx, duplicateSQL, p.TenantID, p.NotificationID, p.KeyHash, p.BodyHash, p.SeenAt).
			Scan(&o.Counted, &d.BodyHash, &d.Duplicates, &d.FirstSeenAt, &d.LastSeenAt, &d.DedupUntil, &status, &acceptedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			// Refused by a row committed after this statement's snapshot (only in the
			// first instant of the row's life): the second branch could not see it.
			// Once more sees it.
			continue
		}
		if err != nil {
			return o, err
		}
		d.NotificationID, d.KeyHash = p.NotificationID, p.KeyHash
		o.BodyKnown = d.BodyHash != nil
		if status != nil && acceptedAt != nil {
			o.Status, o.AcceptedAt = *status, *acceptedAt
		}
		return o, nil
	}
	return DuplicateOutcome{}, errors.New("record duplicate: the dedup row stayed invisible")
}

// SettleDuplicate finishes a duplicate that RecordDuplicate counted before the
// original's body hash was recorded, once the caller has compared its body with
// the hash in the workflow's memo: the hash is recorded (if still missing), and a
// submission whose body differed is uncounted again.
func (s *Store) SettleDuplicate(ctx context.Context, tenantID, notificationID string, originalBodyHash []byte, bodyHash []byte) error {
	uncount := 0
	if !bytes.Equal(originalBodyHash, bodyHash) {
		uncount = 1
	}
	_, err := s.db.Exec(ctx, `
		UPDATE notification_dedup SET body_hash = coalesce(body_hash, $3), duplicates = greatest(duplicates - $4::int, 0)
		WHERE tenant_id = $1 AND notification_id = $2`, tenantID, notificationID, originalBodyHash, uncount)
	return err
}

// GetDedup returns a notification's ledger row (herald.ErrNotFound when it has none:
// started by a redrive, or accepted before the ledger existed).
func (s *Store) GetDedup(ctx context.Context, tenantID, notificationID string) (Dedup, error) {
	d := Dedup{NotificationID: notificationID}
	err := s.db.QueryRow(ctx, `
		SELECT `+ledgerKey("")+`, body_hash, duplicates, first_seen_at, `+ledgerLastSeen("")+`, dedup_until
		FROM notification_dedup WHERE tenant_id = $1 AND notification_id = $2`, tenantID, notificationID).
		Scan(&d.KeyHash, &d.BodyHash, &d.Duplicates, &d.FirstSeenAt, &d.LastSeenAt, &d.DedupUntil)
	return d, dbx.NotFound(err)
}

// ledgerKeySQL selects the ledger rows (aliased d) of key hash $2: those
// whose id spells the key (its first 16 bytes: a range of the primary key;
// key_hash is NULL on them since 0174, or K on older rows) and those whose id
// does not (key_hash holds K: the partial notification_dedup_key_idx,
// migration 0124).
var ledgerKeySQL = `(` + idsOfKey("d.notification_id", "$2") + `
		AND ` + ledgerKey("d.") + ` = $2
	OR d.key_hash = $2 AND d.key_hash <> ` + idKeyHash("d.notification_id") + `)`

// idKeyHash is the key hash a notification id spells (an SQL expression of
// the id's bytes, 0176): its first ids.KeyHashLen bytes, in hex
// (ids.NotificationID).
func idKeyHash(id string) string {
	return fmt.Sprintf("encode(substring(%s FROM 1 FOR %d), 'hex')", id, ids.KeyHashLen)
}

// idsOfKey matches the ids (column col) that spell key hash key (a hex text
// expression): the range of the ids' order between the key's bytes followed
// by zeros and followed by 0xff, so an index on the ids finds them. A key
// that is not a key hash (2 × ids.KeyHashLen hex digits) matches none.
func idsOfKey(col, key string) string {
	bytes := fmt.Sprintf(`decode(CASE WHEN %s ~ '^[0-9a-f]{%d}$' THEN %[1]s END, 'hex')`, key, 2*ids.KeyHashLen)
	return fmt.Sprintf(`%s BETWEEN %s AND %[2]s || '\x%s'::bytea`, col, bytes, strings.Repeat("ff", ids.NotificationIDSize-ids.KeyHashLen))
}

// ledgerKeyHash is the key_hash a ledger row stores for key hash key and
// notification id: NULL when the id spells the key (ids.NotificationID;
// every row written today), so the row does not carry the same key twice
// (migration 0174); the key otherwise. Readers take ledgerKey.
func ledgerKeyHash(key, id string) string {
	return fmt.Sprintf("NULLIF(%s::text, %s)", key, idKeyHash(id+"::bytea"))
}

// ledgerKey is a ledger row's key hash (columns prefixed by alias, "d." or
// ""): its key_hash, or the one its id spells (ledgerKeyHash).
func ledgerKey(alias string) string {
	return "COALESCE(" + alias + "key_hash, " + idKeyHash(alias+"notification_id") + ")"
}

// ledgerLastSeen is a ledger row's last submission: last_seen_at, NULL until
// a duplicate came (migration 0174), reads first_seen_at.
func ledgerLastSeen(alias string) string {
	return "COALESCE(" + alias + "last_seen_at, " + alias + "first_seen_at)"
}

// NotificationsByKey returns the ids of the notifications accepted with dedup key
// hash keyHash (one per window), newest first, at most limit.
func (s *Store) NotificationsByKey(ctx context.Context, tenantID, keyHash string, limit int) ([]string, error) {
	rows, err := s.db.Query(ctx, `
		SELECT notification_id FROM notification_dedup d WHERE d.tenant_id = $1 AND `+ledgerKeySQL+`
		ORDER BY first_seen_at DESC, notification_id DESC LIMIT $3`, tenantID, keyHash, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// SupportNotification is one row of the support view: a notification with its
// ledger row and every channel's outcome.
type SupportNotification struct {
	ID           string
	UserID       string
	TemplateID   string
	Status       herald.NotificationStatus
	AcceptedAt   time.Time
	UpdatedAt    time.Time
	WorkflowID   string
	RunID        string
	DedupKeyHash string
	// Dedup is nil for a notification without a ledger row.
	Dedup      *Dedup
	Deliveries []Delivery
}

// UserNotificationFilter narrows ListUserNotifications. Zero fields filter nothing;
// From is inclusive, To exclusive. Before/BeforeID is the keyset cursor (the last
// item of the previous page).
type UserNotificationFilter struct {
	// UserID: one user's notifications; KeyHash: one dedup key's (one per window).
	UserID     string
	KeyHash    string
	From, To   *time.Time
	TemplateID string
	Status     herald.NotificationStatus
	Before     *time.Time
	BeforeID   string
	Limit      int
}

// keyHashMatchSQL finds the notifications (aliased n) of dedup key hash $10:
// those whose id spells it (the dedup_key_hash column NULL: a range of the
// primary key), those that hold it (the partial notifications_dedup_key_idx)
// and the recipients of a campaign of that id (campaign recipients are keyed
// by their campaign; notifications_campaign_idx).
var keyHashMatchSQL = `(n.dedup_key_hash = $10
	OR (n.dedup_key_hash IS NULL AND n.campaign_id IS NULL AND ` + idsOfKey("n.id", "$10") + `)
	OR (n.dedup_key_hash IS NULL AND n.campaign_id = $10))`

// ListUserNotifications pages a user's (or a dedup key's) notifications newest
// first by (accepted_at, id), each with its ledger row and deliveries (one query;
// the deliveries come as one JSON array per notification).
func (s *Store) ListUserNotifications(ctx context.Context, tenantID string, f UserNotificationFilter) ([]SupportNotification, error) {
	rows, err := s.db.Query(ctx, `
		SELECT n.id, n.user_id, n.template_id, n.status, n.accepted_at, n.updated_at, `+notificationIDColumns+`,
			d.notification_id IS NOT NULL, d.duplicates, d.first_seen_at, `+ledgerLastSeen("d.")+`, d.dedup_until,
			coalesce((SELECT json_agg(json_build_object(
					'channel', x.channel, 'status', x.status, 'provider', x.provider, 'provider_message_id', x.provider_message_id,
					'attempts', x.attempts, 'last_error', x.last_error, 'reason', x.reason, 'sent_at', x.sent_at,
					'delivered_at', x.delivered_at, 'updated_at', x.updated_at) ORDER BY x.channel)
				FROM deliveries x WHERE x.tenant_id = n.tenant_id AND x.notification_id = n.id), '[]'::json)
		FROM notifications n
		LEFT JOIN notification_dedup d ON d.tenant_id = n.tenant_id AND d.notification_id = n.id
		WHERE n.tenant_id = $1 AND ($2 = '' OR n.user_id = $2) AND ($10 = '' OR `+keyHashMatchSQL+`)
			AND ($3::timestamptz IS NULL OR n.accepted_at >= $3)
			AND ($4::timestamptz IS NULL OR n.accepted_at < $4)
			AND ($5 = '' OR n.template_id = $5)
			AND ($6 = '' OR n.status = $6)
			AND ($7::timestamptz IS NULL OR (n.accepted_at, n.id) < ($7, $8))
		ORDER BY n.accepted_at DESC, n.id DESC
		LIMIT $9`,
		tenantID, f.UserID, f.From, f.To, f.TemplateID, f.Status, f.Before, f.BeforeID, f.Limit, f.KeyHash)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []SupportNotification
	for rows.Next() {
		var n SupportNotification
		var hasDedup bool
		var dups *int
		var first, last, until *time.Time
		if err := rows.Scan(&n.ID, &n.UserID, &n.TemplateID, &n.Status, &n.AcceptedAt, &n.UpdatedAt, &n.WorkflowID, &n.RunID, &n.DedupKeyHash,
			&hasDedup, &dups, &first, &last, &until, &n.Deliveries); err != nil {
			return nil, err
		}
		if hasDedup && dups != nil && first != nil && last != nil {
			n.Dedup = &Dedup{NotificationID: n.ID, KeyHash: n.DedupKeyHash, Duplicates: *dups, FirstSeenAt: *first, LastSeenAt: *last, DedupUntil: until}
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// ledgerSQL answers a submission from the ledger alone when it proves an open
// window for the key: a row for key $2 whose body hash is recorded, whose
// workflow has recorded the notification (so the run is real and running), and
// whose window ends more than $5 seconds from now (the margin covers clock skew
// between the API host that wrote dedup_until and the database). Then, in this one
// statement:
//
//   - same body ($3): the duplicate is counted (duplicates + 1, last_seen_at $4)
//     and the original's id, status and accepted_at are returned ('duplicate');
//   - another body: the original's id is returned, nothing counted ('reused').
//
// No row: the caller goes on to the workflow start, which decides.
var ledgerSQL = `
WITH async AS (SELECT set_config('synchronous_commit', 'off', true)),
open AS (
    SELECT d.notification_id, d.body_hash, n.status, n.accepted_at
    FROM notification_dedup d JOIN notifications n ON n.tenant_id = d.tenant_id AND n.id = d.notification_id
    WHERE d.tenant_id = $1 AND ` + ledgerKeySQL + ` AND d.body_hash IS NOT NULL
        AND d.dedup_until > now() + make_interval(secs => $5)
    ORDER BY d.first_seen_at DESC
    LIMIT 1
),
counted AS (
    UPDATE notification_dedup d SET duplicates = d.duplicates + 1, last_seen_at = greatest(` + ledgerLastSeen("d.") + `, $4)
    FROM open, async
    WHERE d.tenant_id = $1 AND d.notification_id = open.notification_id AND d.body_hash = $3
    RETURNING d.notification_id
)
SELECT 'duplicate', o.notification_id, o.status, o.accepted_at FROM open o JOIN counted c ON c.notification_id = o.notification_id
UNION ALL
SELECT 'reused', o.notification_id, o.status, o.accepted_at FROM open o WHERE o.body_hash <> $3`

// LedgerAnswer is what the ledger alone could answer for a submission.
type LedgerAnswer struct {
	// Outcome is "duplicate" (counted) or "reused" (another body); "" when the
	// ledger cannot answer and the workflow start must.
	Outcome        string
	NotificationID string
	Status         herald.NotificationStatus
	AcceptedAt     time.Time
}

// Ledger outcomes.
const (
	LedgerDuplicate = "duplicate"
	LedgerReused    = "reused"
)

// AnswerFromLedgerParams is a submission AnswerFromLedger looks up.
type AnswerFromLedgerParams struct {
	TenantID string
	KeyHash  string
	BodyHash []byte // the submission's body
	SeenAt   time.Time
	// Margin is how long the window must still stay open (clock skew between
	// the API hosts and the database).
	Margin time.Duration
}

// AnswerFromLedger answers a submission of key KeyHash with body BodyHash from the
// dedup ledger when it proves an open window (see ledgerSQL), in one round trip.
func (s *Store) AnswerFromLedger(ctx context.Context, p AnswerFromLedgerParams) (LedgerAnswer, error) {
	var a LedgerAnswer
	err := s.db.QueryRow(ctx, ledgerSQL, p.TenantID, p.KeyHash, p.BodyHash, p.SeenAt, p.Margin.Seconds()).
		Scan(&a.Outcome, &a.NotificationID, &a.Status, &a.AcceptedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return LedgerAnswer{}, nil
	}
	return a, err
}
