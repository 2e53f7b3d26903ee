-- The partial index of the ledger rows whose id does not spell their key
-- (0124, 0174) names the id as text in its predicate; 0176 makes the id
-- bytes. It is dropped here, on its own (no write waits), and built again
-- over the bytes by 0177.
DROP INDEX CONCURRENTLY IF EXISTS notification_dedup_key_idx;
