-- The dedup ledger's row, 208 → 168 bytes (docs/retention.md, fourth round):
--   * key_hash is NULL when the notification id spells it (n_ + key hash + run
--     id, ids.NotificationID: every row written today), so the row stops
--     carrying the same 32 hex digits twice; readers take
--     COALESCE(key_hash, substr(notification_id, 3, 32)) (store.ledgerKeyHash).
--     A row whose id does not spell its key keeps it, and stays in the partial
--     notification_dedup_key_idx (0124), whose predicate is NULL for the others.
--   * last_seen_at is NULL until a duplicate arrives (it equals first_seen_at
--     until then); readers take COALESCE(last_seen_at, first_seen_at).
--   * fillfactor 70 → 100. The 30 % of every page kept free for a duplicate's
--     HOT update held ~90 bytes a notification for the rare key sent twice. A
--     duplicate mostly comes within seconds of its original (a client's retry),
--     while the original's page is still the one inserts fill and has room;
--     one that finds its page full makes a new row version with two index
--     entries, once per key (the next duplicates update that version in place).
-- Catalog only: no row is rewritten; old rows keep their values and read the same.
ALTER TABLE notification_dedup
    ALTER COLUMN key_hash DROP NOT NULL,
    ALTER COLUMN last_seen_at DROP NOT NULL,
    SET (fillfactor = 100);
