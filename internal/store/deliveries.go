package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/herald-notify/herald/internal/dbx"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/jackc/pgx/v5"
)

// deliveryRankSQL is herald.DeliveryRank as a SQL CASE over a status
// expression (%s), so an UPDATE never moves a channel backwards.
var deliveryRankSQL = func() string {
	statuses := slices.SortedFunc(maps.Keys(herald.DeliveryRank), func(a, b herald.DeliveryStatus) int {
		return cmp.Or(cmp.Compare(herald.DeliveryRank[a], herald.DeliveryRank[b]), cmp.Compare(a, b))
	})
	var b strings.Builder
	b.WriteString("CASE %s")
	for _, st := range statuses {
		fmt.Fprintf(&b, " WHEN '%s' THEN %d", st, herald.DeliveryRank[st])
	}
	b.WriteString(" END")
	return b.String()
}()

// Delivery is the durable (notification_id, channel) record.
type Delivery struct {
	Channel           herald.Channel        `json:"channel"`
	Status            herald.DeliveryStatus `json:"status"`
	Provider          *string               `json:"provider"`
	ProviderMessageID *string               `json:"provider_message_id"`
	Attempts          int                   `json:"attempts"`
	LastError         *string               `json:"last_error"`
	Reason            *herald.Reason        `json:"reason"`
	SentAt            *time.Time            `json:"sent_at"`
	DeliveredAt       *time.Time            `json:"delivered_at"`
	UpdatedAt         time.Time             `json:"updated_at"`
}

// ListDeliveries returns a notification's deliveries in channel order.
func (s *Store) ListDeliveries(ctx context.Context, tenantID, notificationID string) ([]Delivery, error) {
	return s.listDeliveries(ctx, tenantID, notificationID, "")
}

// listDeliveries is ListDeliveries with a bound on the partition key (bound:
// SQL with parameters from $3 on, args).
func (s *Store) listDeliveries(ctx context.Context, tenantID, notificationID, bound string, args ...any) ([]Delivery, error) {
	rows, err := s.db.Query(ctx, `
		SELECT channel, status, provider, provider_message_id, attempts, last_error, reason, sent_at, delivered_at, updated_at
		FROM deliveries WHERE tenant_id = $1 AND notification_id = $2 `+bound+` ORDER BY channel`, append([]any{tenantID, notificationID}, args...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Delivery
	for rows.Next() {
		var d Delivery
		if err := rows.Scan(&d.Channel, &d.Status, &d.Provider, &d.ProviderMessageID, &d.Attempts, &d.LastError, &d.Reason, &d.SentAt, &d.DeliveredAt, &d.UpdatedAt); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// GetDelivery reads the guard record for one channel.
func (s *Store) GetDelivery(ctx context.Context, tenantID, notificationID string, channel herald.Channel) (Delivery, error) {
	var d Delivery
	err := s.queryDeliveryRow(ctx, tenantID, notificationID, channel,
		`channel, status, provider, provider_message_id, attempts, last_error, reason, sent_at, delivered_at, updated_at`,
		&d.Channel, &d.Status, &d.Provider, &d.ProviderMessageID, &d.Attempts, &d.LastError, &d.Reason, &d.SentAt, &d.DeliveredAt, &d.UpdatedAt)
	return d, dbx.NotFound(err)
}

// queryDeliveryRow scans cols of a channel's delivery row into dest, looking
// in the id's windows in order (acceptedWindows: one or two partitions for an
// id with a UUIDv7 run id, then every one); pgx.ErrNoRows when none holds it.
func (s *Store) queryDeliveryRow(ctx context.Context, tenantID, notificationID string, channel herald.Channel, cols string, dest ...any) error {
	err := pgx.ErrNoRows
	for _, w := range acceptedWindows(notificationID) {
		err = s.db.QueryRow(ctx, `SELECT `+cols+` FROM deliveries
			WHERE tenant_id = $1 AND notification_id = $2 AND channel = $3 AND accepted_at BETWEEN $4 AND $5`,
			tenantID, notificationID, channel, w.from, w.to).Scan(dest...)
		if !errors.Is(err, pgx.ErrNoRows) {
			break
		}
	}
	return err
}

// keepCarriedCallSQL is the new value of the delivery row's provider or
// provider_message_id column col (of row alias prefix "d." or ""): value
// when given, unless the row carries an accepted call (accepted_attempt),
// whose provider and message id it keeps against later calls and receipts
// (the history shows the carried attempt with them).
func keepCarriedCallSQL(row, col, value string) string {
	return `CASE WHEN ` + row + `accepted_attempt IS NULL THEN COALESCE(` + value + `, ` + row + col + `) ELSE COALESCE(` + row + col + `, ` + value + `) END`
}

// DeliveryUpdate moves a channel's status forward. Nil fields are left as they are.
type DeliveryUpdate struct {
	Status            herald.DeliveryStatus
	Provider          *string
	ProviderMessageID *string
	LastError         *string
	Reason            *herald.Reason
	CountAttempt      bool
	// AcceptedAttempt, when not 0, is the number of the provider call this
	// update records as accepted: the row carries it (accepted_attempt)
	// unless it already carries another call's, and the history shows it as
	// the channel's accepted attempt (ListAttemptsOf) with no
	// delivery_attempts row of its own. Only with Status sent.
	AcceptedAttempt int
}

// UpdateDelivery applies u unless it would move the status backwards; applied
// reports whether it did. It looks in the id's run id's window first and in
// every partition only when that window holds no row of the channel: an
// update the near row refuses (a "sent" after "delivered") is refused, never
// tried again on every partition (~38 probes, and a second row of the id,
// which no writer makes, would take it).
func (s *Store) UpdateDelivery(ctx context.Context, tenantID, notificationID string, channel herald.Channel, u DeliveryUpdate) (applied bool, err error) {
	applied, _, err = s.updateDeliveryAnyWindow(ctx, tenantID, notificationID, channel, u)
	return applied, err
}

// RecordAccepted is UpdateDelivery of the guard's "sent" record after the
// provider accepted call number u.AcceptedAttempt; carried reports whether
// the row now carries that call as the channel's accepted attempt. When it
// does not (the update was refused: a webhook already recorded the channel
// delivered; or the row carries another call: a second accepted call, the
// guard's residual window, or a redrive's, whose numbering starts at 1
// again), the caller records the attempt as a delivery_attempts row, as every
// accepted call was before migration 0156. A call is the row's carried call
// when the row's accepted_attempt, provider and (when u has one) provider
// message id are u's after the update: a row that carries a call keeps that
// call's provider and message id (updateDelivery), so a retried write of the
// same call is carried and another call is not, whatever its number. (A
// second call of the same provider, number and no message id cannot be told
// apart from a retried write, and is taken for one.)
func (s *Store) RecordAccepted(ctx context.Context, tenantID, notificationID string, channel herald.Channel, u DeliveryUpdate) (carried bool, err error) {
	if u.AcceptedAttempt <= 0 || u.Provider == nil {
		return false, fmt.Errorf("record accepted %s of %s: attempt %d, provider %v", channel, notificationID, u.AcceptedAttempt, u.Provider)
	}
	applied, carried, err := s.updateDeliveryAnyWindow(ctx, tenantID, notificationID, channel, u)
	return applied && carried, err
}

func (s *Store) updateDeliveryAnyWindow(ctx context.Context, tenantID, notificationID string, channel herald.Channel, u DeliveryUpdate) (applied, carried bool, err error) {
	for _, w := range acceptedWindows(notificationID) {
		found, applied, carried, err := s.updateDelivery(ctx, tenantID, notificationID, channel, u, w)
		if found || err != nil {
			return applied, carried, err
		}
	}
	return false, false, nil
}

// updateDelivery is UpdateDelivery in one window, in one statement: found
// says whether the window holds the row, applied whether it was updated,
// carried whether the row carries u's accepted call after the update (u has
// AcceptedAttempt). A row that carries an accepted call (accepted_attempt
// set) keeps that call's provider and message id: the history shows the
// carried attempt with the row's provider, which neither a receipt (of an
// earlier call whose record was lost, maybe through another provider) nor a
// second accepted call (its own delivery_attempts row) may change.
func (s *Store) updateDelivery(ctx context.Context, tenantID, notificationID string, channel herald.Channel, u DeliveryUpdate, w acceptedWindow) (found, applied, carried bool, err error) {
	err = s.db.QueryRow(ctx, `
		WITH target AS (
			SELECT 1 FROM deliveries WHERE tenant_id = $1 AND notification_id = $2 AND channel = $3 AND accepted_at BETWEEN $12 AND $13
		), updated AS (
			UPDATE deliveries SET
				status = $4,
				provider = `+keepCarriedCallSQL("", "provider", "$5")+`,
				provider_message_id = `+keepCarriedCallSQL("", "provider_message_id", "$6")+`,
				last_error = COALESCE($7, last_error),
				attempts = attempts + CASE WHEN $8 THEN 1 ELSE 0 END,
				reason = COALESCE($9, reason),
				sent_at = CASE WHEN $4 IN ($10, $11) THEN COALESCE(sent_at, now()) ELSE sent_at END,
				delivered_at = CASE WHEN $4 = $11 THEN COALESCE(delivered_at, now()) ELSE delivered_at END,
				accepted_attempt = COALESCE(accepted_attempt, NULLIF($14::int, 0)),
				updated_at = now()
			WHERE tenant_id = $1 AND notification_id = $2 AND channel = $3 AND accepted_at BETWEEN $12 AND $13
			  AND `+rank("$4::text")+` >= `+rank("status")+`
			RETURNING accepted_attempt = $14::int AND provider IS NOT DISTINCT FROM $5 AND ($6::text IS NULL OR provider_message_id = $6) AS carried
		)
		SELECT EXISTS (SELECT 1 FROM target) OR EXISTS (SELECT 1 FROM updated), EXISTS (SELECT 1 FROM updated),
			COALESCE((SELECT carried FROM updated), false)`,
		tenantID, notificationID, channel, u.Status, u.Provider, u.ProviderMessageID, u.LastError, u.CountAttempt, u.Reason,
		herald.DeliverySent, herald.DeliveryDelivered, w.from, w.to, u.AcceptedAttempt).Scan(&found, &applied, &carried)
	return found, applied, carried, err
}

func rank(expr string) string {
	return "(" + fmt.Sprintf(deliveryRankSQL, expr) + ")"
}

// SetDeliveryReason sets a channel's reason without touching its status (an
// ordered channel that went past its hold bound: herald.ReasonOrderTimeout).
func (s *Store) SetDeliveryReason(ctx context.Context, tenantID, notificationID string, channel herald.Channel, reason herald.Reason) error {
	_, err := s.db.Exec(ctx, `UPDATE deliveries SET reason = $4, updated_at = now() WHERE tenant_id = $1 AND notification_id = $2 AND channel = $3`,
		tenantID, notificationID, channel, reason)
	return err
}
