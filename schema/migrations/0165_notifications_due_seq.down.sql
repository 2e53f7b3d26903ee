-- The numbers moved onto ended notifications go back to notification_sequences
-- (assigned_at: the notification's last update, the closest time kept) before
-- the column goes.
INSERT INTO notification_sequences (tenant_id, notification_id, user_id, seq, assigned_at)
SELECT tenant_id, id, user_id, due_seq, updated_at FROM notifications WHERE due_seq IS NOT NULL
ON CONFLICT DO NOTHING;
ALTER TABLE notifications DROP COLUMN IF EXISTS due_seq;
