package sandbox

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/herald-notify/herald/internal/dbx"
)

// PGRecorder records into the sandbox_messages table. It works on a pool or a
// transaction.
type PGRecorder struct {
	db dbx.DB
}

// NewPGRecorder wraps a pool or a transaction.
func NewPGRecorder(db dbx.DB) *PGRecorder { return &PGRecorder{db: db} }

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

// RecordBatch stores many messages in one statement and returns the first id.
func (r *PGRecorder) RecordBatch(ctx context.Context, ms []Message) (int64, error) {
	cols := make([][]string, 7)
	payloads := make([]string, len(ms))
	for i, m := range ms {
		for j, v := range []string{m.TenantID, m.NotificationID, m.Channel, m.IdempotencyKey, m.Recipient, m.Subject, m.Body} {
			cols[j] = append(cols[j], v)
		}
		payloads[i] = string(m.Payload)
	}
	var first *int64
	err := r.db.QueryRow(ctx, `
		WITH ins AS (
			INSERT INTO sandbox_messages (tenant_id, notification_id, channel, idempotency_key, recipient, subject, body, payload)
			SELECT t, n, c, k, r, NULLIF(s, ''), b, p::jsonb
			FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[]) AS x(t, n, c, k, r, s, b, p)
			RETURNING id)
		SELECT min(id) FROM ins`, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[6], payloads).Scan(&first)
	if err != nil || first == nil {
		return 0, err
	}
	return *first, nil
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
