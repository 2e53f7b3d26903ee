-- 0175's index again, its predicate over the id's bytes (0176): a ledger row
-- keeps its key only when its id does not spell it (0174).
CREATE INDEX CONCURRENTLY IF NOT EXISTS notification_dedup_key_idx ON notification_dedup (tenant_id, key_hash, first_seen_at DESC)
    WHERE key_hash <> encode(substring(notification_id FROM 1 FOR 16), 'hex');
