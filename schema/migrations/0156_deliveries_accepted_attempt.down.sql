-- Undoes 0156. The accepted provider calls the delivery rows carry
-- (accepted_attempt) go back into delivery_attempts first, one row each as
-- the code before 0156 wrote them (the attempt's number, the row's provider,
-- 'accepted', no error, at = sent_at), so that code shows the same history;
-- only then is the column dropped. A call whose day partition of
-- delivery_attempts is gone (sent_at older than the attempts kept) has no
-- partition to go to: its history was past retention anyway. Both statements
-- run in one transaction (one file, several statements).
INSERT INTO delivery_attempts (tenant_id, notification_id, channel, attempt, provider, outcome, error, at)
SELECT d.tenant_id, d.notification_id, d.channel, d.accepted_attempt, COALESCE(d.provider, ''), 'accepted', NULL,
       COALESCE(d.sent_at, d.updated_at)
FROM deliveries d
WHERE d.accepted_attempt IS NOT NULL
  AND to_regclass('delivery_attempts_p' || to_char(COALESCE(d.sent_at, d.updated_at) AT TIME ZONE 'UTC', 'YYYYMMDD')) IS NOT NULL;
ALTER TABLE deliveries DROP COLUMN IF EXISTS accepted_attempt;
