DROP INDEX notification_dedup_key_idx;
CREATE INDEX notification_dedup_key_idx ON notification_dedup (tenant_id, key_hash, first_seen_at DESC);
