-- One row per call again, as the sandbox recorded before 0042: a message answered
-- `calls` times gets calls - 1 more rows (new ids, the first call's time). The
-- receipts the sandbox recorded meanwhile stay in provider_receipts (data, not
-- schema).
DROP INDEX sandbox_messages_idempotency_idx;
INSERT INTO sandbox_messages (tenant_id, notification_id, channel, idempotency_key, recipient, subject, body, payload, created_at)
SELECT s.tenant_id, s.notification_id, s.channel, s.idempotency_key, s.recipient, s.subject, s.body, s.payload, s.created_at
FROM sandbox_messages s, generate_series(2, s.calls)
ORDER BY s.id;
ALTER TABLE sandbox_messages DROP COLUMN calls;
