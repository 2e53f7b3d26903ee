package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-notify/herald/internal/herald"
)

// Order lanes (tables order_lanes and order_handoffs, docs/ordering.md): the
// notifications with the same (tenant, user, channel, ordering key) are one lane;
// each takes the lane's next seq when it becomes due and is handed to the
// provider only once no lower seq of the lane is pending (or its hold bound
// ran out). Every claim and release locks the lane's row first, so a release
// never misses a claim that is about to wait on it.

// OrderPlace is a channel's place in its lane.
type OrderPlace struct {
	Channel herald.Channel
	Seq     int64
	// Behind is the pending notification with the highest lower seq ("": none,
	// the channel may go at once).
	Behind string
}

// OrderSuccessor is the pending hand-off a release lets go: it waits and nothing
// below it is pending any more.
type OrderSuccessor struct {
	NotificationID string
	Channel        herald.Channel
	WorkflowID     string
	RunID          string
	Seq            int64
}

// ClaimOrderHandoffs takes a place for each claim (one notification's ordered
// channels) that has none yet: the lane's next seq, taken under the lane row's
// lock in one statement. A claim already made (the API's at acceptance, then
// the workflow's, or a retry) keeps its seq. With places it also returns each
// channel's place and whom it is behind now, recorded in the hand-off
// (the first answer is kept); without, it returns nil.
//
// Whom it is behind is read without the lane's lock: a lower place that is
// released meanwhile signals this one (the release takes the lock and sees
// it), so reading it just before or just after the release both work.
func (s *Store) ClaimOrderHandoffs(ctx context.Context, claims []herald.OrderClaim, places bool) ([]OrderPlace, error) {
	var out []OrderPlace
	for _, c := range claims {
		if places {
			p, ok, err := s.orderPlace(ctx, c)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, p)
				continue
			}
		}
		// Lock the lane (creating it on first use, next_seq 2: this claim is 1)
		// and take its next seq, in one statement. A hand-off already there keeps
		// its seq (the one taken here is skipped: waits look at the lower places
		// still pending, never at seq-1, so a gap is harmless).
		if _, err := s.db.Exec(ctx, `
			WITH lane AS (
				INSERT INTO order_lanes (tenant_id, user_id, channel, ordering_key, next_seq) VALUES ($1, $2, $3, $4, 2)
				ON CONFLICT (tenant_id, user_id, channel, ordering_key) DO UPDATE SET next_seq = order_lanes.next_seq + 1
				RETURNING id, next_seq - 1 AS seq
			)
			INSERT INTO order_handoffs (tenant_id, lane_id, seq, notification_id, channel, workflow_id, run_id)
			SELECT $1, lane.id, lane.seq, $5, $3, $6, $7 FROM lane
			ON CONFLICT (tenant_id, notification_id, channel) DO NOTHING`,
			c.TenantID, c.UserID, c.Channel, c.OrderingKey, c.NotificationID, c.WorkflowID, c.RunID); err != nil {
			return nil, err
		}
		if places {
			p, ok, err := s.orderPlace(ctx, c)
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, errors.New("order hand-off not found after it was claimed")
			}
			out = append(out, p)
		}
	}
	return out, nil
}

// orderPlace reads a claimed hand-off's seq and records (once) the pending
// notification with the highest lower seq, the one it waits behind.
func (s *Store) orderPlace(ctx context.Context, c herald.OrderClaim) (OrderPlace, bool, error) {
	p := OrderPlace{Channel: c.Channel}
	var behind *string
	err := s.db.QueryRow(ctx, `
		UPDATE order_handoffs h SET behind_notification_id = COALESCE(h.behind_notification_id, (
			SELECT p.notification_id FROM order_handoffs p
			WHERE p.lane_id = h.lane_id AND p.seq < h.seq AND p.done_at IS NULL ORDER BY p.seq DESC LIMIT 1))
		WHERE h.tenant_id = $1 AND h.notification_id = $2 AND h.channel = $3
		RETURNING h.seq, h.behind_notification_id`, c.TenantID, c.NotificationID, c.Channel).Scan(&p.Seq, &behind)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, false, nil
	}
	if behind != nil {
		p.Behind = *behind
	}
	return p, err == nil, err
}

// ReleaseOrderHandoff marks a channel's hand-off done (it was sent, failed,
// suppressed, cancelled or dead-lettered) and returns the successor to signal:
// the lowest pending seq above it, when no seq below that one is still pending
// (ok false: nothing to signal). A channel that never joined a lane, or a
// release repeated, is harmless. The lane's row is locked by a statement of its
// own first, so the statement that looks for the successor (a snapshot taken
// after the lock) sees every claim committed before.
func (s *Store) ReleaseOrderHandoff(ctx context.Context, tenantID, notificationID string, channel herald.Channel) (next OrderSuccessor, ok bool, err error) {
	err = s.InTx(ctx, func(tx *Store) error {
		var laneID, seq int64
		err := tx.db.QueryRow(ctx, `
			SELECT l.id, h.seq FROM order_handoffs h JOIN order_lanes l ON l.id = h.lane_id
			WHERE h.tenant_id = $1 AND h.notification_id = $2 AND h.channel = $3
			FOR UPDATE OF l`, tenantID, notificationID, channel).Scan(&laneID, &seq)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		var blocked bool
		err = tx.db.QueryRow(ctx, `
			WITH done AS (
				UPDATE order_handoffs SET done_at = now() WHERE lane_id = $1 AND seq = $2 AND done_at IS NULL
			)
			SELECT n.notification_id, n.channel, n.workflow_id, n.run_id, n.seq,
				EXISTS (SELECT 1 FROM order_handoffs p WHERE p.lane_id = n.lane_id AND p.seq < n.seq AND p.seq <> $2 AND p.done_at IS NULL)
			FROM order_handoffs n WHERE n.lane_id = $1 AND n.seq > $2 AND n.done_at IS NULL
			ORDER BY n.seq LIMIT 1`, laneID, seq).
			Scan(&next.NotificationID, &next.Channel, &next.WorkflowID, &next.RunID, &next.Seq, &blocked)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		ok = err == nil && !blocked
		return err
	})
	if !ok {
		next = OrderSuccessor{}
	}
	return next, ok, err
}

// FinishOrderWait records how a channel's wait for its turn ended: after
// waited, released or (timedOut) past its hold bound; a timeout also becomes
// the delivery's reason (herald.ReasonOrderTimeout), in the same transaction.
func (s *Store) FinishOrderWait(ctx context.Context, tenantID, notificationID string, channel herald.Channel, waited time.Duration, timedOut bool) error {
	return s.InTx(ctx, func(tx *Store) error {
		if _, err := tx.db.Exec(ctx, `
			UPDATE order_handoffs SET waited_ms = $4, order_timeout = $5
			WHERE tenant_id = $1 AND notification_id = $2 AND channel = $3`,
			tenantID, notificationID, channel, waited.Milliseconds(), timedOut); err != nil {
			return err
		}
		if !timedOut {
			return nil
		}
		return tx.SetDeliveryReason(ctx, tenantID, notificationID, channel, herald.ReasonOrderTimeout)
	})
}

// OrderInfo is a channel's place in its lane as GET /v1/notifications/{id}
// shows it.
type OrderInfo struct {
	OrderingKey string `json:"ordering_key"`
	Seq         int64  `json:"seq"`
	// Waited: the channel found an earlier notification of its lane pending and
	// waited for it (WaitedMs, behind BehindNotificationID); Waiting: it still is.
	Waited               bool    `json:"waited"`
	Waiting              bool    `json:"waiting"`
	WaitedMs             *int64  `json:"waited_ms"`
	BehindNotificationID *string `json:"behind_notification_id"`
	// OrderTimeout: the wait reached the hold bound and the channel went anyway.
	OrderTimeout bool       `json:"order_timeout"`
	ClaimedAt    time.Time  `json:"claimed_at"`
	DoneAt       *time.Time `json:"done_at"`
}

// ListOrderHandoffs returns a notification's ordered channels' places.
func (s *Store) ListOrderHandoffs(ctx context.Context, tenantID, notificationID string) (map[herald.Channel]OrderInfo, error) {
	rows, err := s.db.Query(ctx, `
		SELECT h.channel, l.ordering_key, h.seq, h.behind_notification_id, h.waited_ms, h.order_timeout, h.claimed_at, h.done_at
		FROM order_handoffs h JOIN order_lanes l ON l.id = h.lane_id
		WHERE h.tenant_id = $1 AND h.notification_id = $2`, tenantID, notificationID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[herald.Channel]OrderInfo{}
	for rows.Next() {
		var ch herald.Channel
		var o OrderInfo
		if err := rows.Scan(&ch, &o.OrderingKey, &o.Seq, &o.BehindNotificationID, &o.WaitedMs, &o.OrderTimeout, &o.ClaimedAt, &o.DoneAt); err != nil {
			return nil, err
		}
		o.Waited = o.BehindNotificationID != nil
		o.Waiting = o.Waited && o.WaitedMs == nil && o.DoneAt == nil
		o.ClaimedAt = o.ClaimedAt.UTC()
		if o.DoneAt != nil {
			t := o.DoneAt.UTC()
			o.DoneAt = &t
		}
		out[ch] = o
	}
	return out, rows.Err()
}

// The maintenance workflow's statements for the lanes (Prune kinds
// PruneOrderHandoffs, PruneOrderLanes; $1 the tenant, $2 the cut-off, $3 the
// batch). A done hand-off is never read by a claim or a release again, only by
// the status view. An idle lane is locked before the delete, so a claim that
// holds it (about to insert its hand-off) is skipped, never cut off; a lane
// deleted and taken again starts at seq 1 under a new id.
const (
	pruneOrderHandoffsSQL = `DELETE FROM order_handoffs h USING (
			SELECT lane_id, seq FROM order_handoffs
			WHERE tenant_id = $1 AND done_at IS NOT NULL AND done_at < $2 LIMIT $3) x
		WHERE h.lane_id = x.lane_id AND h.seq = x.seq`
	pruneOrderLanesSQL = `DELETE FROM order_lanes WHERE id IN (
			SELECT id FROM order_lanes l WHERE l.tenant_id = $1 AND l.created_at < $2
			  AND NOT EXISTS (SELECT 1 FROM order_handoffs h WHERE h.lane_id = l.id)
			LIMIT $3 FOR UPDATE SKIP LOCKED)`
)

// PruneOrderHandoffs deletes at most limit of the tenant's hand-offs done
// before doneBefore, then at most limit of its lanes created before it and
// left with none; it returns how many rows it deleted (call it again until 0).
// The maintenance workflow runs the same statements (Prune).
func (s *Store) PruneOrderHandoffs(ctx context.Context, tenantID string, doneBefore time.Time, limit int) (int, error) {
	n := 0
	for _, q := range []string{pruneOrderHandoffsSQL, pruneOrderLanesSQL} {
		tag, err := s.db.Exec(ctx, q, tenantID, doneBefore, limit)
		if err != nil {
			return n, err
		}
		n += int(tag.RowsAffected())
	}
	return n, nil
}
