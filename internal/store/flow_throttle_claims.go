package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// ClaimThrottle claims one run of a throttle bucket (a tenant's flow, user, key
// and window, named by bucket) for an event's step: allowed while the bucket
// has admitted fewer than limit. Claims of one bucket serialize on an advisory
// lock, so concurrent events never admit more than limit; claiming again for
// the same event and step (an activity retry) returns the first answer.
func (s *Store) ClaimThrottle(ctx context.Context, tenantID, bucket, notificationID, path string, limit int) (bool, error) {
	var allowed bool
	err := s.InTx(ctx, func(tx *Store) error {
		if _, err := tx.db.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('throttle/' || $1 || '/' || $2, 0))`, tenantID, bucket); err != nil {
			return err
		}
		err := tx.db.QueryRow(ctx, `SELECT allowed FROM flow_throttle_claims WHERE tenant_id = $1 AND notification_id = $2 AND path = $3`,
			tenantID, notificationID, path).Scan(&allowed)
		if err == nil {
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		var used int
		if err := tx.db.QueryRow(ctx, `SELECT count(*) FROM flow_throttle_claims WHERE tenant_id = $1 AND bucket = $2 AND allowed`,
			tenantID, bucket).Scan(&used); err != nil {
			return err
		}
		allowed = used < limit
		_, err = tx.db.Exec(ctx, `INSERT INTO flow_throttle_claims (tenant_id, bucket, notification_id, path, allowed) VALUES ($1, $2, $3, $4, $5)`,
			tenantID, bucket, notificationID, path, allowed)
		return err
	})
	return allowed, err
}
