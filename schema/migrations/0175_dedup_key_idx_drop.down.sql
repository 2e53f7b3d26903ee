CREATE INDEX CONCURRENTLY IF NOT EXISTS notification_dedup_key_idx ON notification_dedup (tenant_id, key_hash, first_seen_at DESC)
    WHERE key_hash <> substr(notification_id, 3, 32);
