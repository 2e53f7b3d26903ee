package sandbox

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/herald-notify/herald/providers"
)

// PGRecorder records into the sandbox_messages table. It works on a pool or a
// transaction.
type PGRecorder struct {
	db providers.DB
}

// NewPGRecorder wraps a pool or a transaction.
func NewPGRecorder(db providers.DB) *PGRecorder { return &PGRecorder{db: db} }

// Record implements Recorder.
func (r *PGRecorder) Record(ctx context.Context, m Message) (Message, error) {
	var subject *string
	if m.Subject != "" {
		subject = &m.Subject
	}
	err := r.db.QueryRow(ctx, `
		INSERT INTO sandbox_messages (tenant_id, notification_id, channel, idempotency_key, recipient, subject, body, payload)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		RETURNING id, created_at`,
		m.TenantID, m.NotificationID, m.Channel, m.IdempotencyKey, m.Recipient, subject, m.Body, []byte(m.Payload)).
		Scan(&m.ID, &m.CreatedAt)
	return m, err
}

// List implements Recorder.
func (r *PGRecorder) List(ctx context.Context, tenantID string, limit int) ([]Message, error) {
	rows, err := r.db.Query(ctx, `
		SELECT id, tenant_id, notification_id, channel, idempotency_key, recipient, COALESCE(subject, ''), body, payload, created_at
		FROM sandbox_messages WHERE tenant_id = $1 ORDER BY id DESC LIMIT $2`, tenantID, ClampLimit(limit))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Message, error) {
		var m Message
		var payload []byte
		err := row.Scan(&m.ID, &m.TenantID, &m.NotificationID, &m.Channel, &m.IdempotencyKey, &m.Recipient, &m.Subject, &m.Body, &payload, &m.CreatedAt)
		m.Payload = payload
		return m, err
	})
}
