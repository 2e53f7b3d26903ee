package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// AuditEntry is one change a tenant (or the operator, for a tenant) made.
type AuditEntry struct {
	ID int64     `json:"id"`
	At time.Time `json:"at"`
	// APIKeyID is the public id of the key that made the change ("operator" for
	// the operator API); never the key.
	APIKeyID string `json:"api_key_id"`
	Action   string `json:"action"`
	Target   string `json:"target"`
	// Status is the HTTP status the change was answered with.
	Status int `json:"status"`
	// Details is what changed: the request's fields with secrets removed.
	Details json.RawMessage `json:"details"`
}

// AuditPending is an entry's Status from the moment the change is about to run
// until it is answered (BeginAudit, FinishAudit): an entry left so means the
// process stopped in between, and the change may or may not have been applied.
const AuditPending = 0

// foreignKeyViolation is PostgreSQL's SQLSTATE for a row referencing a row that
// does not exist.
const foreignKeyViolation = "23503"

// BeginAudit writes the entry of a change about to run, with Status
// AuditPending, and returns its id for FinishAudit. Written before the change, so
// no change is applied without its entry.
func (s *Store) BeginAudit(ctx context.Context, tenantID string, e AuditEntry) (int64, error) {
	details := e.Details
	if len(details) == 0 {
		details = json.RawMessage(`{}`)
	}
	var id int64
	err := s.db.QueryRow(ctx, `
		INSERT INTO audit_log (tenant_id, api_key_id, action, target, status, details) VALUES ($1, $2, $3, $4, $5, $6)
		RETURNING id`,
		tenantID, e.APIKeyID, e.Action, e.Target, AuditPending, details).Scan(&id)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == foreignKeyViolation {
		return 0, herald.ErrNotFound // no such tenant
	}
	return id, err
}

// FinishAudit records how the change of entry id was answered: its status, or,
// when nothing was changed (a refused request), no entry at all.
func (s *Store) FinishAudit(ctx context.Context, tenantID string, id int64, status int, changed bool) error {
	if !changed {
		_, err := s.db.Exec(ctx, `DELETE FROM audit_log WHERE tenant_id = $1 AND id = $2 AND at > now() - interval '1 day'`, tenantID, id)
		return err
	}
	// The entry was written moments ago (BeginAudit): the time bound lets the
	// weekly partitions (migration 0102) prune to the newest one or two.
	_, err := s.db.Exec(ctx, `UPDATE audit_log SET status = $3 WHERE tenant_id = $1 AND id = $2 AND at > now() - interval '1 day'`, tenantID, id, status)
	return err
}

// AuditFilter narrows ListAudit: Action exact, Since inclusive, Until exclusive;
// Before/BeforeID is the keyset cursor (the last entry of the previous page).
type AuditFilter struct {
	Action       string
	Since, Until *time.Time
	Before       *time.Time
	BeforeID     int64
	Limit        int
}

// ListAudit pages the tenant's audit log newest first by (at, id).
func (s *Store) ListAudit(ctx context.Context, tenantID string, f AuditFilter) ([]AuditEntry, error) {
	rows, err := s.db.Query(ctx, `
		SELECT id, at, api_key_id, action, target, status, details FROM audit_log
		WHERE tenant_id = $1 AND ($2 = '' OR action = $2)
			AND ($3::timestamptz IS NULL OR at >= $3) AND ($4::timestamptz IS NULL OR at < $4)
			AND ($5::timestamptz IS NULL OR (at, id) < ($5, $6))
		ORDER BY at DESC, id DESC LIMIT $7`,
		tenantID, f.Action, f.Since, f.Until, f.Before, f.BeforeID, f.Limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (AuditEntry, error) {
		var e AuditEntry
		err := row.Scan(&e.ID, &e.At, &e.APIKeyID, &e.Action, &e.Target, &e.Status, &e.Details)
		e.At = e.At.UTC()
		return e, err
	})
}
