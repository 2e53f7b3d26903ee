package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-notify/herald/internal/dbx"
	"github.com/herald-notify/herald/internal/herald"
)

// WebhookEndpoint is a tenant's registered status webhook receiver. The
// secrets are sealed (internal/webhooks opens them).
type WebhookEndpoint struct {
	TenantID       string
	ID             string
	URL            string
	Description    string
	Events         []string
	Enabled        bool
	SecretSealed   []byte
	PreviousSealed []byte
	PreviousUntil  *time.Time
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

const webhookEndpointColumns = `tenant_id, id, url, description, events, enabled, secret_sealed, previous_sealed, previous_until, created_at, updated_at`

func scanWebhookEndpoint(row pgx.Row) (WebhookEndpoint, error) {
	var e WebhookEndpoint
	err := row.Scan(&e.TenantID, &e.ID, &e.URL, &e.Description, &e.Events, &e.Enabled, &e.SecretSealed, &e.PreviousSealed,
		&e.PreviousUntil, &e.CreatedAt, &e.UpdatedAt)
	return e, dbx.NotFound(err)
}

// MaxWebhookEndpoints bounds a tenant's endpoints.
const MaxWebhookEndpoints = 20

// CreateWebhookEndpoint stores a new endpoint; herald.ErrNotFound (no row
// written) when the tenant has MaxWebhookEndpoints already.
func (s *Store) CreateWebhookEndpoint(ctx context.Context, e WebhookEndpoint) (WebhookEndpoint, error) {
	return scanWebhookEndpoint(s.db.QueryRow(ctx, `
		INSERT INTO webhook_endpoints (tenant_id, id, url, description, events, enabled, secret_sealed)
		SELECT $1, $2, $3, $4, $5, $6, $7
		WHERE (SELECT count(*) FROM webhook_endpoints WHERE tenant_id = $1) < $8
		RETURNING `+webhookEndpointColumns, e.TenantID, e.ID, e.URL, e.Description, e.Events, e.Enabled, e.SecretSealed, MaxWebhookEndpoints))
}

// GetWebhookEndpoint reads one endpoint; herald.ErrNotFound when the tenant has none of that id.
func (s *Store) GetWebhookEndpoint(ctx context.Context, tenantID, id string) (WebhookEndpoint, error) {
	return scanWebhookEndpoint(s.db.QueryRow(ctx, `SELECT `+webhookEndpointColumns+` FROM webhook_endpoints WHERE tenant_id = $1 AND id = $2`, tenantID, id))
}

// ListWebhookEndpoints lists the tenant's endpoints, oldest first (at most MaxWebhookEndpoints).
func (s *Store) ListWebhookEndpoints(ctx context.Context, tenantID string) ([]WebhookEndpoint, error) {
	rows, err := s.db.Query(ctx, `SELECT `+webhookEndpointColumns+` FROM webhook_endpoints WHERE tenant_id = $1 ORDER BY created_at, id`, tenantID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []WebhookEndpoint{}
	for rows.Next() {
		e, err := scanWebhookEndpoint(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// WebhookEndpointUpdate changes the fields that are set.
type WebhookEndpointUpdate struct {
	URL         *string
	Description *string
	Events      *[]string
	Enabled     *bool
	// SecretSealed rotates the secret: the current one becomes the previous,
	// signing too until PreviousUntil.
	SecretSealed  []byte
	PreviousUntil time.Time
}

// UpdateWebhookEndpoint applies u; herald.ErrNotFound when there is no such endpoint.
func (s *Store) UpdateWebhookEndpoint(ctx context.Context, tenantID, id string, u WebhookEndpointUpdate) (WebhookEndpoint, error) {
	var until *time.Time
	if u.SecretSealed != nil {
		until = &u.PreviousUntil
	}
	return scanWebhookEndpoint(s.db.QueryRow(ctx, `
		UPDATE webhook_endpoints SET
			url = COALESCE($3, url),
			description = COALESCE($4, description),
			events = COALESCE($5, events),
			enabled = COALESCE($6, enabled),
			previous_sealed = CASE WHEN $7::bytea IS NULL THEN previous_sealed ELSE secret_sealed END,
			previous_until = CASE WHEN $7::bytea IS NULL THEN previous_until ELSE $8 END,
			secret_sealed = COALESCE($7, secret_sealed),
			updated_at = now()
		WHERE tenant_id = $1 AND id = $2
		RETURNING `+webhookEndpointColumns, tenantID, id, u.URL, u.Description, u.Events, u.Enabled, u.SecretSealed, until))
}

// DeleteWebhookEndpoint removes the endpoint with its messages and attempts.
func (s *Store) DeleteWebhookEndpoint(ctx context.Context, tenantID, id string) error {
	tag, err := s.db.Exec(ctx, `DELETE FROM webhook_endpoints WHERE tenant_id = $1 AND id = $2`, tenantID, id)
	if err == nil && tag.RowsAffected() == 0 {
		return herald.ErrNotFound
	}
	return err
}

// WebhookEvent is one delivery state change to send to a tenant's endpoints.
type WebhookEvent struct {
	TenantID       string
	NotificationID string
	// Key is unique per event (notification:channel:type[:extra]).
	Key     string
	Type    string
	Payload json.RawMessage
}

// Webhook message statuses.
const (
	WebhookPending      = "pending"
	WebhookDelivered    = "delivered"
	WebhookDeadLettered = "dead_lettered"
)

// EnqueueWebhookEvent queues the event for every enabled endpoint of its tenant
// that subscribes to its type (once per endpoint: a repeat of the same Key adds
// nothing) and returns the endpoints that got a new message. msgID mints the
// message id per endpoint.
func (s *Store) EnqueueWebhookEvent(ctx context.Context, ev WebhookEvent, msgID func() string) ([]string, error) {
	rows, err := s.db.Query(ctx, `SELECT id FROM webhook_endpoints
		WHERE tenant_id = $1 AND enabled AND (cardinality(events) = 0 OR $2 = ANY(events)) ORDER BY id`, ev.TenantID, ev.Type)
	if err != nil {
		return nil, err
	}
	endpoints, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(endpoints) == 0 {
		return nil, err
	}
	var out []string
	for _, ep := range endpoints {
		tag, err := s.db.Exec(ctx, `
			INSERT INTO webhook_messages (tenant_id, endpoint_id, msg_id, event_key, event_type, notification_id, payload)
			VALUES ($1, $2, $3, $4, $5, $6, $7)
			ON CONFLICT (tenant_id, endpoint_id, event_key) DO NOTHING`,
			ev.TenantID, ep, msgID(), ev.Key, ev.Type, ev.NotificationID, ev.Payload)
		if err != nil {
			return out, err
		}
		if tag.RowsAffected() > 0 {
			out = append(out, ep)
		}
	}
	return out, nil
}

// EnqueueWebhookEvents is EnqueueWebhookEvent for many events of one tenant and
// type (a campaign chunk's deliveries): the endpoints are read once and each
// subscribed endpoint gets every event in one statement. It returns the
// endpoints that got at least one new message.
func (s *Store) EnqueueWebhookEvents(ctx context.Context, tenantID, eventType string, evs []WebhookEvent, msgID func() string) ([]string, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	rows, err := s.db.Query(ctx, `SELECT id FROM webhook_endpoints
		WHERE tenant_id = $1 AND enabled AND (cardinality(events) = 0 OR $2 = ANY(events)) ORDER BY id`, tenantID, eventType)
	if err != nil {
		return nil, err
	}
	endpoints, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(endpoints) == 0 {
		return nil, err
	}
	keys, nids, payloads := make([]string, len(evs)), make([]string, len(evs)), make([]string, len(evs))
	for i, ev := range evs {
		keys[i], nids[i], payloads[i] = ev.Key, ev.NotificationID, string(ev.Payload)
	}
	var out []string
	for _, ep := range endpoints {
		msgIDs := make([]string, len(evs))
		for i := range msgIDs {
			msgIDs[i] = msgID()
		}
		tag, err := s.db.Exec(ctx, `
			INSERT INTO webhook_messages (tenant_id, endpoint_id, msg_id, event_key, event_type, notification_id, payload)
			SELECT $1, $2, m, k, $3, n, p::jsonb FROM unnest($4::text[], $5::text[], $6::text[], $7::text[]) AS x(m, k, n, p)
			ON CONFLICT (tenant_id, endpoint_id, event_key) DO NOTHING`,
			tenantID, ep, eventType, msgIDs, keys, nids, payloads)
		if err != nil {
			return out, err
		}
		if tag.RowsAffected() > 0 {
			out = append(out, ep)
		}
	}
	return out, nil
}

// WebhookMessage is one event queued for one endpoint.
type WebhookMessage struct {
	ID             int64           `json:"-"`
	MsgID          string          `json:"id"`
	EndpointID     string          `json:"endpoint_id"`
	EventType      string          `json:"event_type"`
	NotificationID string          `json:"notification_id"`
	Payload        json.RawMessage `json:"payload"`
	Status         string          `json:"status"`
	Attempts       int             `json:"attempts"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
}

const webhookMessageColumns = `id, msg_id, endpoint_id, event_type, notification_id, payload, status, attempts, created_at, updated_at`

func scanWebhookMessage(row pgx.Row) (WebhookMessage, error) {
	var m WebhookMessage
	err := row.Scan(&m.ID, &m.MsgID, &m.EndpointID, &m.EventType, &m.NotificationID, &m.Payload, &m.Status, &m.Attempts, &m.CreatedAt, &m.UpdatedAt)
	return m, dbx.NotFound(err)
}

// PendingWebhookMessage is a message's place in its endpoint's queue.
type PendingWebhookMessage struct {
	ID             int64
	NotificationID string
}

// PendingWebhookMessages lists an endpoint's pending messages in the order
// they were queued, after afterID, at most limit.
func (s *Store) PendingWebhookMessages(ctx context.Context, tenantID, endpointID string, afterID int64, limit int) ([]PendingWebhookMessage, error) {
	rows, err := s.db.Query(ctx, `SELECT id, notification_id FROM webhook_messages
		WHERE tenant_id = $1 AND endpoint_id = $2 AND status = 'pending' AND id > $3 ORDER BY id LIMIT $4`,
		tenantID, endpointID, afterID, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (PendingWebhookMessage, error) {
		var p PendingWebhookMessage
		return p, r.Scan(&p.ID, &p.NotificationID)
	})
}

// GetWebhookMessage reads a message of the endpoint by its row id.
func (s *Store) GetWebhookMessage(ctx context.Context, tenantID, endpointID string, id int64) (WebhookMessage, error) {
	return scanWebhookMessage(s.db.QueryRow(ctx, `SELECT `+webhookMessageColumns+` FROM webhook_messages
		WHERE tenant_id = $1 AND endpoint_id = $2 AND id = $3`, tenantID, endpointID, id))
}

// WebhookAttempt is one HTTP delivery attempt of a message.
type WebhookAttempt struct {
	ID             int64     `json:"-"`
	MsgID          string    `json:"message_id"`
	EventType      string    `json:"event_type"`
	NotificationID string    `json:"notification_id"`
	MessageStatus  string    `json:"message_status"`
	Attempt        int       `json:"attempt"`
	StatusCode     *int      `json:"status_code"`
	Outcome        string    `json:"outcome"`
	Error          *string   `json:"error"`
	DurationMS     int       `json:"duration_ms"`
	At             time.Time `json:"at"`
}

// RecordWebhookAttempt appends an attempt and counts it on the message; a
// delivered attempt marks the message delivered.
func (s *Store) RecordWebhookAttempt(ctx context.Context, tenantID, endpointID string, messageID int64, a WebhookAttempt) error {
	return s.InTx(ctx, func(tx *Store) error {
		var n int
		if err := tx.db.QueryRow(ctx, `UPDATE webhook_messages SET attempts = attempts + 1,
				status = CASE WHEN $4 = 'delivered' THEN 'delivered' ELSE status END, updated_at = now()
			WHERE tenant_id = $1 AND endpoint_id = $2 AND id = $3 RETURNING attempts`, tenantID, endpointID, messageID, a.Outcome).Scan(&n); err != nil {
			return dbx.NotFound(err)
		}
		_, err := tx.db.Exec(ctx, `INSERT INTO webhook_attempts (tenant_id, endpoint_id, message_id, attempt, status_code, outcome, error, duration_ms)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, tenantID, endpointID, messageID, n, a.StatusCode, a.Outcome, a.Error, a.DurationMS)
		return err
	})
}

// DeadLetterWebhookMessage marks a pending message dead-lettered (its retries ran out).
func (s *Store) DeadLetterWebhookMessage(ctx context.Context, tenantID, endpointID string, messageID int64) (bool, error) {
	tag, err := s.db.Exec(ctx, `UPDATE webhook_messages SET status = 'dead_lettered', updated_at = now()
		WHERE tenant_id = $1 AND endpoint_id = $2 AND id = $3 AND status = 'pending'`, tenantID, endpointID, messageID)
	return tag.RowsAffected() > 0, err
}

// ReplayWebhookMessagesParams selects the messages ReplayWebhookMessages replays:
// the one MsgID names, or (MsgID "") every one created in [Since, Until).
type ReplayWebhookMessagesParams struct {
	TenantID   string
	EndpointID string
	MsgID      string
	Since      time.Time
	Until      time.Time
}

// ReplayWebhookMessages makes the endpoint's messages that p selects and that are
// not pending pending again; it returns how many. Their attempts stay listed.
func (s *Store) ReplayWebhookMessages(ctx context.Context, p ReplayWebhookMessagesParams) (int64, error) {
	var tag interface{ RowsAffected() int64 }
	var err error
	if p.MsgID != "" {
		tag, err = s.db.Exec(ctx, `UPDATE webhook_messages SET status = 'pending', updated_at = now()
			WHERE tenant_id = $1 AND endpoint_id = $2 AND msg_id = $3 AND status <> 'pending'`, p.TenantID, p.EndpointID, p.MsgID)
	} else {
		tag, err = s.db.Exec(ctx, `UPDATE webhook_messages SET status = 'pending', updated_at = now()
			WHERE tenant_id = $1 AND endpoint_id = $2 AND created_at >= $3 AND created_at < $4 AND status <> 'pending'`,
			p.TenantID, p.EndpointID, p.Since, p.Until)
	}
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// WebhookMessageExists reports whether the endpoint has a message msgID.
func (s *Store) WebhookMessageExists(ctx context.Context, tenantID, endpointID, msgID string) (bool, error) {
	var ok bool
	err := s.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM webhook_messages WHERE tenant_id = $1 AND endpoint_id = $2 AND msg_id = $3)`,
		tenantID, endpointID, msgID).Scan(&ok)
	return ok, err
}

// ListWebhookAttemptsParams selects a page of an endpoint's attempts.
type ListWebhookAttemptsParams struct {
	TenantID   string
	EndpointID string
	Status     string // the message's status ("" : any)
	BeforeID   int64  // attempts with a smaller id (0 : from the newest)
	Limit      int
}

// ListWebhookAttempts lists the endpoint's attempts that p selects, newest first.
func (s *Store) ListWebhookAttempts(ctx context.Context, p ListWebhookAttemptsParams) ([]WebhookAttempt, error) {
	rows, err := s.db.Query(ctx, `
		SELECT a.id, m.msg_id, m.event_type, m.notification_id, m.status, a.attempt, a.status_code, a.outcome, a.error, a.duration_ms, a.at
		FROM webhook_attempts a JOIN webhook_messages m ON m.tenant_id = a.tenant_id AND m.id = a.message_id
		WHERE a.tenant_id = $1 AND a.endpoint_id = $2 AND ($3 = '' OR m.status = $3) AND ($4 = 0 OR a.id < $4)
		ORDER BY a.id DESC LIMIT $5`, p.TenantID, p.EndpointID, p.Status, p.BeforeID, p.Limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (WebhookAttempt, error) {
		var a WebhookAttempt
		return a, r.Scan(&a.ID, &a.MsgID, &a.EventType, &a.NotificationID, &a.MessageStatus, &a.Attempt, &a.StatusCode, &a.Outcome,
			&a.Error, &a.DurationMS, &a.At)
	})
}
