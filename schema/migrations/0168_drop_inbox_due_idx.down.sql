CREATE INDEX CONCURRENTLY IF NOT EXISTS inbox_due_idx ON inbox (tenant_id, user_id, due_seq DESC, notification_id DESC);
