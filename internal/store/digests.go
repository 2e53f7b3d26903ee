package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-notify/herald/internal/dbx"
	"github.com/herald-notify/herald/internal/herald"
)

// DigestWindow is a digest's open window.
type DigestWindow struct {
	TenantID  string
	DigestKey string
	FlowID    string
	UserID    string
	Key       string
	OpenedAt  time.Time
	// ClosesAt: the fixed or scheduled close; zero for a sliding window, whose
	// close is computed from its latest event (Window) capped by OpenedAt + MaxWait.
	ClosesAt time.Time
	Window   time.Duration
	MaxWait  time.Duration
}

// OpenDigestWindow records (or re-records, for a new window) a digest key's
// open window.
func (s *Store) OpenDigestWindow(ctx context.Context, w DigestWindow) error {
	var closes *time.Time
	if !w.ClosesAt.IsZero() {
		closes = &w.ClosesAt
	}
	_, err := s.db.Exec(ctx, `
		INSERT INTO digests (tenant_id, id, digest_key, flow_id, user_id, key, status, opened_at, closes_at, window_ms, max_wait_ms)
		VALUES ($1, $2, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT (tenant_id, id) DO UPDATE
		SET opened_at = EXCLUDED.opened_at, closes_at = EXCLUDED.closes_at, window_ms = EXCLUDED.window_ms, max_wait_ms = EXCLUDED.max_wait_ms`,
		w.TenantID, w.DigestKey, w.FlowID, w.UserID, w.Key, herald.DigestOpen, w.OpenedAt, closes,
		w.Window.Milliseconds(), w.MaxWait.Milliseconds())
	return err
}

// OpenDigest is one open digest of a user (GET /v1/users/{user_id}/digests).
type OpenDigest struct {
	FlowID string `json:"flow_id"`
	Key    string `json:"key"`
	// Count is the events it holds so far, counted up to MaxCountedDigestEvents
	// (CountCapped when there are more).
	Count       int       `json:"count"`
	CountCapped bool      `json:"count_capped"`
	OpenedAt    time.Time `json:"opened_at"`
	ClosesAt    time.Time `json:"closes_at"`
}

// MaxCountedDigestEvents bounds what listing a user's open digests counts per
// digest: the count walks the key's open index entries, so it stops here
// rather than reading a 100,000-event digest for every page.
const MaxCountedDigestEvents = 10000

// OpenDigestsAfter is the keyset position of a page of open digests: the
// (flow, key) of the last digest of the page before.
type OpenDigestsAfter struct {
	FlowID string
	Key    string
}

// OpenDigests lists a page of a user's open digests, by flow and key, after
// the given position (nil: from the start), at most limit of them, and
// whether more follow. Each carries the events it holds so far (counted up to
// MaxCountedDigestEvents, on the open-events index) and when it closes (a
// sliding window's close moves with its latest event, read as the newest open
// row). A window whose events all left (cancelled) still shows, count 0.
func (s *Store) OpenDigests(ctx context.Context, tenantID, userID string, after *OpenDigestsAfter, limit int) ([]OpenDigest, bool, error) {
	var afterFlow, afterKey *string
	if after != nil {
		afterFlow, afterKey = &after.FlowID, &after.Key
	}
	rows, err := s.db.Query(ctx, `
		SELECT d.flow_id, d.key, d.opened_at,
			COALESCE(d.closes_at, least(COALESCE(last.at, d.opened_at) + d.window_ms * interval '1 millisecond',
				d.opened_at + d.max_wait_ms * interval '1 millisecond')),
			(SELECT count(*) FROM (
				SELECT 1 FROM digest_events e
				WHERE e.digest_key = d.digest_key AND e.digest_id IS NULL AND NOT e.cancelled AND e.tenant_id = d.tenant_id
				LIMIT $6) capped)
		FROM digests d
		LEFT JOIN LATERAL (
			SELECT e.at FROM digest_events e
			WHERE e.digest_key = d.digest_key AND e.digest_id IS NULL AND NOT e.cancelled AND e.tenant_id = d.tenant_id
				AND d.closes_at IS NULL
			ORDER BY e.seq DESC LIMIT 1
		) last ON true
		WHERE d.tenant_id = $1 AND d.user_id = $2 AND d.status = $3
			AND ($4::text IS NULL OR (d.flow_id, d.key) > ($4, $5))
		ORDER BY d.flow_id, d.key
		LIMIT $7`, tenantID, userID, herald.DigestOpen, afterFlow, afterKey, MaxCountedDigestEvents+1, limit+1)
	if err != nil {
		return nil, false, err
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (OpenDigest, error) {
		var d OpenDigest
		err := row.Scan(&d.FlowID, &d.Key, &d.OpenedAt, &d.ClosesAt, &d.Count)
		if d.Count > MaxCountedDigestEvents {
			d.Count, d.CountCapped = MaxCountedDigestEvents, true
		}
		return d, err
	})
	if err != nil || len(out) <= limit {
		return out, false, err
	}
	return out[:limit], true, nil
}

// CloseDigestParams closes a window for DigestID: the digest key's unclaimed,
// uncancelled events with seq <= MaxSeq, at most Limit, in seq order (or only
// OnlySeq when set).
type CloseDigestParams struct {
	TenantID  string
	DigestKey string
	DigestID  string
	FlowID    string
	UserID    string
	Key       string
	MaxSeq    int64
	Limit     int
	OnlySeq   int64
	Items     int
	ClosedAt  time.Time
	// KeepOpen leaves the open window's row (first: send_now sends one event
	// while the window goes on).
	KeepOpen bool
}

// ClosedDigest is what a close claimed.
type ClosedDigest struct {
	Count   int
	FirstAt time.Time
	LastAt  time.Time
	Items   []map[string]any
	// Remaining counts the key's unclaimed events up to MaxSeq after the close.
	Remaining int
}

// CloseDigest claims the events for the digest in one transaction. Each event
// row is claimed at most once (digest_id IS NULL, under the row lock), so an
// event is in exactly one digest however closes, retries and cancels
// interleave. Closing again with the same DigestID (an activity retry) claims
// nothing more and returns what the first close claimed.
func (s *Store) CloseDigest(ctx context.Context, p CloseDigestParams) (ClosedDigest, error) {
	var out ClosedDigest
	err := s.InTx(ctx, func(tx *Store) error {
		var exists bool
		if err := tx.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM digests WHERE tenant_id = $1 AND id = $2)`, p.TenantID, p.DigestID).
			Scan(&exists); err != nil {
			return err
		}
		if !exists {
			limit := p.Limit
			if limit <= 0 {
				limit = 1 << 30
			}
			tag, err := tx.db.Exec(ctx, `
				UPDATE digest_events SET digest_id = $3
				WHERE tenant_id = $1 AND seq IN (
					SELECT seq FROM digest_events
					WHERE digest_key = $2 AND digest_id IS NULL AND NOT cancelled AND tenant_id = $1
						AND seq <= $4 AND ($6 = 0 OR seq = $6)
					ORDER BY seq LIMIT $5 FOR UPDATE)`,
				p.TenantID, p.DigestKey, p.DigestID, p.MaxSeq, limit, p.OnlySeq)
			if err != nil {
				return err
			}
			status := herald.DigestSent
			if tag.RowsAffected() == 0 {
				status = herald.DigestEmpty
			}
			if _, err := tx.db.Exec(ctx, `
				INSERT INTO digests (tenant_id, id, digest_key, flow_id, user_id, key, status, opened_at, closed_at, count)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9)`,
				p.TenantID, p.DigestID, p.DigestKey, p.FlowID, p.UserID, p.Key, status, p.ClosedAt, tag.RowsAffected()); err != nil {
				return err
			}
			if !p.KeepOpen {
				if _, err := tx.db.Exec(ctx, `DELETE FROM digests WHERE tenant_id = $1 AND id = $2 AND status = $3`,
					p.TenantID, p.DigestKey, herald.DigestOpen); err != nil {
					return err
				}
			}
		}
		if err := tx.db.QueryRow(ctx, `
			SELECT count(*), COALESCE(min(at), $3), COALESCE(max(at), $3) FROM digest_events WHERE digest_id = $2 AND tenant_id = $1`,
			p.TenantID, p.DigestID, p.ClosedAt).Scan(&out.Count, &out.FirstAt, &out.LastAt); err != nil {
			return err
		}
		rows, err := tx.db.Query(ctx, `SELECT data FROM digest_events WHERE digest_id = $2 AND tenant_id = $1 ORDER BY seq LIMIT $3`,
			p.TenantID, p.DigestID, p.Items)
		if err != nil {
			return err
		}
		raws, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
		if err != nil {
			return err
		}
		out.Items = make([]map[string]any, 0, len(raws))
		for _, raw := range raws {
			item, err := decodeData(raw)
			if err != nil {
				return err
			}
			out.Items = append(out.Items, item)
		}
		return tx.db.QueryRow(ctx, `
			SELECT count(*) FROM digest_events
			WHERE digest_key = $2 AND digest_id IS NULL AND NOT cancelled AND tenant_id = $1 AND seq <= $3`,
			p.TenantID, p.DigestKey, p.MaxSeq).Scan(&out.Remaining)
	})
	return out, err
}

// DigestEvent is one event's row in its digest.
type DigestEvent struct {
	TenantID       string
	DigestKey      string
	NotificationID string
	At             time.Time
	Data           map[string]any
}

// AddDigestEvent writes an event's row and returns its seq; adding the same
// notification again (an activity retry) returns the first row's seq.
func (s *Store) AddDigestEvent(ctx context.Context, e DigestEvent) (int64, error) {
	data, err := json.Marshal(e.Data)
	if err != nil {
		return 0, err
	}
	var seq int64
	err = s.db.QueryRow(ctx, `
		INSERT INTO digest_events (tenant_id, digest_key, notification_id, at, data) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (tenant_id, notification_id) DO UPDATE SET notification_id = EXCLUDED.notification_id
		RETURNING seq`, e.TenantID, e.DigestKey, e.NotificationID, e.At, data).Scan(&seq)
	return seq, err
}

// RemoveDigestEvent takes a cancelled event out of its digest if the digest has
// not closed with it: removed, or the id of the digest that has it.
// herald.ErrNotFound when the event never joined a digest.
func (s *Store) RemoveDigestEvent(ctx context.Context, tenantID, notificationID string) (removed bool, digestID string, err error) {
	err = s.InTx(ctx, func(tx *Store) error {
		var id *string
		if err := tx.db.QueryRow(ctx, `SELECT digest_id FROM digest_events WHERE tenant_id = $1 AND notification_id = $2 FOR UPDATE`,
			tenantID, notificationID).Scan(&id); err != nil {
			return dbx.NotFound(err)
		}
		if id != nil {
			digestID = *id
			return nil
		}
		removed = true
		_, err := tx.db.Exec(ctx, `UPDATE digest_events SET cancelled = true WHERE tenant_id = $1 AND notification_id = $2`, tenantID, notificationID)
		return err
	})
	return removed, digestID, err
}

// decodeData decodes stored event data keeping numbers as JSON wrote them.
func decodeData(raw []byte) (map[string]any, error) {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, errors.Join(errors.New("decode digest event data"), err)
	}
	return m, nil
}

// AcceptDigestEventParams is an event of a flow whose first step is a digest,
// as the API accepts it without a workflow of its own.
type AcceptDigestEventParams struct {
	TenantID    string
	UserID      string
	FlowID      string
	FlowVersion int
	Category    string
	// KeyHash is the event's Layer-1 dedup key; NotificationID the id it gets
	// when the key is free (ids.NotificationID of the key and a new run id), and
	// WorkflowID/RunID what that id parses to.
	KeyHash        string
	NotificationID string
	WorkflowID     string
	RunID          string
	// DigestKey is the digest's workflow ID, Key the rendered key, StepPath
	// the digest step's path ("0").
	DigestKey  string
	Key        string
	StepPath   string
	Data       map[string]any
	AcceptedAt time.Time
	BodyHash   []byte
	DedupUntil time.Time
}

// AcceptedDigestEvent is what accepting an event did: a new event (its row's
// Seq), or a duplicate of the key's event inside its window (NotificationID
// is then that event's).
type AcceptedDigestEvent struct {
	NotificationID string
	Duplicate      bool
	Seq            int64
}

// AcceptDigestEvent accepts an event of a digest-first flow in one statement
// (so one round trip and one commit, which is most of what accepting costs):
// it takes the dedup key (digest_event_keys: a key whose window is open
// belongs to its event, so a second event with it is a duplicate, concurrent
// ones included: the second waits on the first's row lock and then sees it),
// and only when it took the key writes the event's notifications and dedup
// ledger rows, its flow_runs row, its digest step (digested) and its
// digest_events row (with what the sweeper needs to signal its digest again:
// OverdueDigests). A duplicate is answered with the key's event.
func (s *Store) AcceptDigestEvent(ctx context.Context, p AcceptDigestEventParams) (AcceptedDigestEvent, error) {
	data, err := json.Marshal(p.Data)
	if err != nil {
		return AcceptedDigestEvent{}, err
	}
	var out AcceptedDigestEvent
	var id *string
	var seq *int64
	err = s.db.QueryRow(ctx, `
		WITH k AS (
			INSERT INTO digest_event_keys AS k (tenant_id, key_hash, notification_id, dedup_until) VALUES ($1, $2, $3, $4)
			ON CONFLICT (tenant_id, key_hash) DO UPDATE SET notification_id = EXCLUDED.notification_id, dedup_until = EXCLUDED.dedup_until
			WHERE k.dedup_until <= $5
			RETURNING notification_id
		), n AS (
			INSERT INTO notifications (tenant_id, id, user_id, template_id, channels, workflow_id, run_id, dedup_key_hash, status, accepted_at, category)
			SELECT $1, $3, $6, '', NULL, `+derivedNotificationIDs("$7", "$8", "$2", "$1", "$3", "NULL")+`, $9, $5, NULLIF($10, '') FROM k
		), l AS (
			INSERT INTO notification_dedup (tenant_id, notification_id, key_hash, body_hash, first_seen_at, last_seen_at, duplicates, dedup_until)
			SELECT $1, $3, `+ledgerKeyHash("$2", "$3")+`, $11, $5, NULL, 0, $4 FROM k
		), r AS (
			INSERT INTO flow_runs (tenant_id, notification_id, flow_id, flow_version, user_id, created_at)
			SELECT $1, $3, $12, $13, $6, $5 FROM k
		), st AS (
			INSERT INTO flow_steps (tenant_id, notification_id, path, type, outcome, ref_notification_id, started_at, finished_at)
			SELECT $1, $3, $14, 'digest', $15, $16, $5, $5 FROM k
		), e AS (
			INSERT INTO digest_events (tenant_id, digest_key, notification_id, at, data, flow_id, flow_version, user_id, key)
			SELECT $1, $16, $3, $5, $17, $12, $13, $6, $18 FROM k
			RETURNING seq
		)
		SELECT (SELECT notification_id FROM k), (SELECT seq FROM e)`,
		p.TenantID, p.KeyHash, p.NotificationID, p.DedupUntil, p.AcceptedAt, p.UserID, p.WorkflowID, p.RunID,
		herald.NotificationDigested, p.Category, p.BodyHash, p.FlowID, p.FlowVersion, p.StepPath, herald.StepDigested,
		p.DigestKey, data, p.Key).Scan(&id, &seq)
	if err != nil {
		return out, err
	}
	if id != nil && seq != nil {
		return AcceptedDigestEvent{NotificationID: *id, Seq: *seq}, nil
	}
	out.Duplicate = true
	err = s.db.QueryRow(ctx, `SELECT notification_id FROM digest_event_keys WHERE tenant_id = $1 AND key_hash = $2`,
		p.TenantID, p.KeyHash).Scan(&out.NotificationID)
	return out, err
}

// OverdueDigest is a digest key whose accepted events no digest knows of: its
// newest such event (a signal carries its seq, and the digest's close claims
// every unclaimed row up to it).
type OverdueDigest struct {
	TenantID    string
	DigestKey   string
	FlowID      string
	FlowVersion int
	UserID      string
	Key         string
	Seq         int64
	At          time.Time
}

// OverdueDigests lists up to limit digest keys with events accepted without
// a run of their own before olderThan, still unclaimed and not cancelled, and
// no window open for the key that could still claim them (none, or a fixed or
// scheduled one past its close since olderThan). A signal reaching its digest
// opens a window at once, and a close claims its events, so such rows are the
// ones whose signal was lost: a crash, or a Temporal error, between the
// accept's commit and its signal. The scan walks the waiting rows' index
// (digest_events_open_idx) in key order.
func (s *Store) OverdueDigests(ctx context.Context, olderThan time.Time, limit int) ([]OverdueDigest, error) {
	rows, err := s.db.Query(ctx, `
		SELECT DISTINCT ON (e.digest_key) e.tenant_id, e.digest_key, e.flow_id, e.flow_version, e.user_id, COALESCE(e.key, ''), e.seq, e.at
		FROM digest_events e
		WHERE e.digest_id IS NULL AND NOT e.cancelled AND e.flow_id IS NOT NULL AND e.at < $1
			AND NOT EXISTS (
				SELECT 1 FROM digests d
				WHERE d.tenant_id = e.tenant_id AND d.id = e.digest_key AND d.status = $3
					AND (d.closes_at IS NULL OR d.closes_at > $1))
		ORDER BY e.digest_key, e.seq DESC
		LIMIT $2`, olderThan, limit, herald.DigestOpen)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (OverdueDigest, error) {
		var d OverdueDigest
		err := row.Scan(&d.TenantID, &d.DigestKey, &d.FlowID, &d.FlowVersion, &d.UserID, &d.Key, &d.Seq, &d.At)
		return d, err
	})
}

// PruneDigestEventKeys deletes up to limit digest-first events' dedup keys
// whose window ended before the given time (a key used again after its window
// takes its row over anyway; a key never used again would stay for ever). It
// returns how many it deleted.
func (s *Store) PruneDigestEventKeys(ctx context.Context, endedBefore time.Time, limit int) (int, error) {
	tag, err := s.db.Exec(ctx, `
		DELETE FROM digest_event_keys WHERE (tenant_id, key_hash) IN (
			SELECT tenant_id, key_hash FROM digest_event_keys WHERE dedup_until < $1 ORDER BY dedup_until LIMIT $2)`,
		endedBefore, limit)
	return int(tag.RowsAffected()), err
}
