-- Writes the derived values back before the constraints return (every row
-- written since 0174: a full pass over the ledger, which holds one dedup window).
UPDATE notification_dedup SET key_hash = substr(notification_id, 3, 32) WHERE key_hash IS NULL;
UPDATE notification_dedup SET last_seen_at = first_seen_at WHERE last_seen_at IS NULL;
ALTER TABLE notification_dedup
    ALTER COLUMN key_hash SET NOT NULL,
    ALTER COLUMN last_seen_at SET NOT NULL,
    SET (fillfactor = 70);
