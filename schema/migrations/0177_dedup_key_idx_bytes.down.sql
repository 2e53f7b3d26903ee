DROP INDEX CONCURRENTLY IF EXISTS notification_dedup_key_idx;
