package sandbox

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/herald-notify/herald/internal/dbx"
	"github.com/herald-notify/herald/internal/herald"
)

// PGRecorder records into the sandbox_messages table. It works on a pool or a
// transaction.
//
// Concurrent Records share statements (group commit): a call queues its message
// and waits; up to maxWriters writers (one on a transaction) each take what is
// queued and record it in one statement (RecordBatch), so a campaign's hundreds
// of concurrent SMS and push "sends" cost a few statements instead of one each,
// and a lone call still goes at once. Two calls with the same idempotency key and
// recipient never share a statement (a batch records such a pair as one message,
// counted once): the second waits for the next one, so Calls still counts every
// repeat.
type PGRecorder struct {
	db         dbx.DB
	maxWriters int

	mu      sync.Mutex
	queue   []*queuedRecord
	writers int
}

// queuedRecord is one Record call waiting for a writer.
type queuedRecord struct {
	m    Message
	done chan struct{}
	out  Message
	err  error
}

// maxWriters bounds the statements a pool recorder runs at once;
// maxCoalesced the messages one of them records.
const (
	maxWriters   = 4
	maxCoalesced = 500
)

// NewPGRecorder wraps a pool or a transaction.
func NewPGRecorder(db dbx.DB) *PGRecorder {
	n := maxWriters
	if _, ok := db.(pgx.Tx); ok {
		n = 1 // a transaction runs one statement at a time
	}
	return &PGRecorder{db: dbx.WithNotificationIDs(db), maxWriters: n}
}

// The PostgreSQL recorder is idempotent as a provider with idempotency keys
// would be: a message is one row per (tenant, idempotency key, recipient) (the
// unique index of migration 0042; the recipient because a push goes to each of a
// user's devices under one key), and a repeat is answered with that row's id,
// its calls counted up, in the same statement. ON CONFLICT DO UPDATE rather than
// DO NOTHING plus a read: it returns the row even when a concurrent send
// committed it after the statement's snapshot was taken, which a read in the same
// statement cannot see.
//
// With an email or SMS of a notification the tenant has, the statement also
// records an "accepted" receipt naming it (provider_receipts), as SendGrid's
// processed event and Twilio's status callback do, so the delivery guard's
// receipt check (providers.Store.LatestReceipt; LatestReceipts for a campaign
// batch) finds a send whose answer Herald lost. A repeat adds none (same message,
// same time: the receipts' unique index). Push gets none: FCM sends none, and a
// receipt would end a push to several devices at the first one accepted.

// recordSQL records one message (or counts a repeat) and its receipt: $1..$8 the
// message, $9 the channel that gets no receipt.
const recordSQL = `
	WITH m AS (
		INSERT INTO sandbox_messages AS sm (tenant_id, notification_id, channel, idempotency_key, recipient, subject, body, payload)
		VALUES ($1, $2, $3, $4, $5, NULLIF($6, ''), $7, $8::jsonb)
		ON CONFLICT (tenant_id, idempotency_key, recipient) DO UPDATE SET calls = sm.calls + 1
		RETURNING id, tenant_id, notification_id, channel, created_at, calls
	), receipt AS (` + receiptSQL + `)
	SELECT id, created_at, calls FROM m`

// recordBatchSQL records many messages (or counts repeats) and their receipts
// in one statement: $1..$8 arrays of the messages' fields, $9 the channel that
// gets no receipt. A key and recipient listed twice is one message. The rows are
// written in key order, so concurrent batches of the same recipients take their
// row locks in one order and cannot deadlock.
const recordBatchSQL = `
	WITH x AS (
		SELECT DISTINCT ON (t, k, r) t, n, c, k, r, s, b, p
		FROM unnest($1::text[], $2::bytea[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[])
			WITH ORDINALITY AS x(t, n, c, k, r, s, b, p, o)
		ORDER BY t, k, r, o
	), m AS (
		INSERT INTO sandbox_messages AS sm (tenant_id, notification_id, channel, idempotency_key, recipient, subject, body, payload)
		SELECT t, n, c, k, r, NULLIF(s, ''), b, p::jsonb FROM x ORDER BY t, k, r
		ON CONFLICT (tenant_id, idempotency_key, recipient) DO UPDATE SET calls = sm.calls + 1
		RETURNING id, tenant_id, notification_id, channel, idempotency_key, recipient, created_at, calls
	), receipt AS (` + receiptSQL + `)
	SELECT tenant_id, idempotency_key, recipient, id, created_at, calls FROM m`

// receiptSQL is the receipts of the messages in m (see above).
const receiptSQL = `
		INSERT INTO provider_receipts (tenant_id, notification_id, channel, provider, provider_message_id, status, provider_status, occurred_at)
		SELECT m.tenant_id, m.notification_id, m.channel, '` + Name + `', '` + messageIDPrefix + `' || m.id, 'accepted', 'recorded', m.created_at
		FROM m
		WHERE m.channel <> $9 AND EXISTS (SELECT 1 FROM notifications WHERE tenant_id = m.tenant_id AND id = m.notification_id)
		ON CONFLICT DO NOTHING`

// Record implements Recorder: the message is recorded in a statement of its own,
// or, when other calls are waiting too, in one shared with them (see PGRecorder).
// A call whose context ends first returns its error; its message may still be
// recorded, as a provider may accept a request whose answer the caller stopped
// waiting for.
func (r *PGRecorder) Record(ctx context.Context, m Message) (Message, error) {
	q := &queuedRecord{m: m, done: make(chan struct{})}
	r.mu.Lock()
	r.queue = append(r.queue, q)
	if r.writers < r.maxWriters {
		r.writers++
		go r.write(context.WithoutCancel(ctx))
	}
	r.mu.Unlock()
	select {
	case <-q.done:
		return q.out, q.err
	case <-ctx.Done():
		return m, ctx.Err()
	}
}

// write records queued messages until none is left.
func (r *PGRecorder) write(ctx context.Context) {
	for {
		r.mu.Lock()
		batch := r.take()
		if len(batch) == 0 {
			r.writers--
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		r.record(ctx, batch)
	}
}

// take removes from the queue, in order, up to maxCoalesced messages no two of
// which have the same tenant, idempotency key and recipient. r.mu is held.
func (r *PGRecorder) take() []*queuedRecord {
	type key struct{ tenant, idem, recipient string }
	var batch []*queuedRecord
	seen := map[key]bool{}
	rest := r.queue[:0]
	for _, q := range r.queue {
		k := key{q.m.TenantID, q.m.IdempotencyKey, q.m.Recipient}
		if len(batch) == maxCoalesced || seen[k] {
			rest = append(rest, q)
			continue
		}
		seen[k] = true
		batch = append(batch, q)
	}
	clear(r.queue[len(rest):])
	r.queue = rest
	return batch
}

// record records batch in one statement and answers each call.
func (r *PGRecorder) record(ctx context.Context, batch []*queuedRecord) {
	defer func() {
		for _, q := range batch {
			close(q.done)
		}
	}()
	if len(batch) == 1 {
		q := batch[0]
		m := q.m
		q.err = r.db.QueryRow(ctx, recordSQL,
			m.TenantID, m.NotificationID, m.Channel, m.IdempotencyKey, m.Recipient, m.Subject, m.Body, string(m.Payload), herald.ChannelPush).
			Scan(&m.ID, &m.CreatedAt, &m.Calls)
		q.out = m
		return
	}
	ms := make([]Message, len(batch))
	for i, q := range batch {
		ms[i] = q.m
	}
	out, err := r.RecordBatch(ctx, ms)
	for i, q := range batch {
		if err != nil {
			q.out, q.err = q.m, err
			continue
		}
		q.out = out[i]
	}
}

// RecordBatch records many messages in one statement, as Record each, and
// returns them in their order with ID, CreatedAt and Calls set.
func (r *PGRecorder) RecordBatch(ctx context.Context, ms []Message) ([]Message, error) {
	cols := make([][]string, 8)
	for _, m := range ms {
		for j, v := range []string{m.TenantID, m.NotificationID, string(m.Channel), m.IdempotencyKey, m.Recipient, m.Subject, m.Body, string(m.Payload)} {
			cols[j] = append(cols[j], v)
		}
	}
	rows, err := r.db.Query(ctx, recordBatchSQL, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[6], cols[7], herald.ChannelPush)
	if err != nil {
		return nil, err
	}
	type key struct{ tenant, idem, recipient string }
	stored := map[key]Message{}
	for rows.Next() {
		var k key
		var m Message
		if err := rows.Scan(&k.tenant, &k.idem, &k.recipient, &m.ID, &m.CreatedAt, &m.Calls); err != nil {
			rows.Close()
			return nil, err
		}
		stored[k] = m
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]Message, len(ms))
	for i, m := range ms {
		s, ok := stored[key{m.TenantID, m.IdempotencyKey, m.Recipient}]
		if !ok {
			return nil, fmt.Errorf("sandbox: batch message %d (%s to %s) was not recorded", i, m.IdempotencyKey, m.Recipient)
		}
		m.ID, m.CreatedAt, m.Calls = s.ID, s.CreatedAt, s.Calls
		out[i] = m
	}
	return out, nil
}

// List implements Recorder.
func (r *PGRecorder) List(ctx context.Context, tenantID string, limit int) ([]Message, error) {
	rows, err := r.db.Query(ctx, `
		SELECT id, tenant_id, notification_id, channel, idempotency_key, recipient, COALESCE(subject, ''), body, payload, calls, created_at
		FROM sandbox_messages WHERE tenant_id = $1 ORDER BY id DESC LIMIT $2`, tenantID, ClampLimit(limit))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Message, error) {
		var m Message
		var payload []byte
		err := row.Scan(&m.ID, &m.TenantID, &m.NotificationID, &m.Channel, &m.IdempotencyKey, &m.Recipient, &m.Subject, &m.Body, &payload, &m.Calls, &m.CreatedAt)
		m.Payload = payload
		return m, err
	})
}
