CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS inbox_notification_key ON inbox (tenant_id, user_id, notification_id);
