-- The code before 0160 reads numbers only from notification_sequences: the
-- numbers written onto notification rows since go back there first.
INSERT INTO notification_sequences (tenant_id, notification_id, user_id, seq, assigned_at)
SELECT tenant_id, id, user_id, due_seq, accepted_at FROM notifications WHERE due_seq IS NOT NULL
ON CONFLICT DO NOTHING;
ALTER TABLE notifications DROP COLUMN IF EXISTS due_seq;
