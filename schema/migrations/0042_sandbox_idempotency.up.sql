-- The sandbox provider (providers/sandbox, PGRecorder.Record and RecordBatch) is
-- idempotent: a send repeated with the same idempotency key
-- ("notification_id:channel", providers.Tags.IdempotencyKey) to the same recipient
-- is answered with the first call's message id instead of being recorded again,
-- by INSERT … ON CONFLICT on the unique index below. The recipient is part of the
-- key because a push goes to each of a user's devices under the notification's one
-- key. `calls` counts the calls answered with the message, so a repeat (the
-- delivery guard calling the provider again) stays visible: with SendGrid, Twilio or
-- FCM, which take no idempotency key (providers/doc.go), it would have been sent
-- twice. Rows recorded before are merged here: each (tenant, key, recipient) keeps
-- its oldest row, the number of rows it had in calls.
ALTER TABLE sandbox_messages ADD COLUMN calls integer NOT NULL DEFAULT 1;

WITH dups AS (
    SELECT tenant_id, idempotency_key, recipient, min(id) AS keep, count(*) AS n
    FROM sandbox_messages
    GROUP BY tenant_id, idempotency_key, recipient
    HAVING count(*) > 1
), counted AS (
    UPDATE sandbox_messages s SET calls = d.n FROM dups d WHERE s.id = d.keep
)
DELETE FROM sandbox_messages s USING dups d
WHERE s.tenant_id = d.tenant_id AND s.idempotency_key = d.idempotency_key AND s.recipient = d.recipient
    AND s.id <> d.keep;

CREATE UNIQUE INDEX sandbox_messages_idempotency_idx ON sandbox_messages (tenant_id, idempotency_key, recipient);
