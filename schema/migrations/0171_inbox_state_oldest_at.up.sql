-- The inbox's age limit finds the users to visit by a bound per user instead of
-- an index entry per item (docs/retention.md#bytes-per-notification: ~70 bytes
-- an inbox item): inbox_state.oldest_at is never later than the created_at of
-- the user's oldest item (store.PruneInboxAge says how it is kept). Step 1 of
-- 3: the column. Its default '-infinity' is "unknown": every existing row, and
-- a row a process of an earlier release creates, is visited once by the next
-- age prune, which sets it; the store creates a row with 'infinity' (no item
-- yet). A constant default: no rewrite, the lock is held for an instant.
-- 0172 indexes it, 0173 drops inbox_created_idx.
ALTER TABLE inbox_state ADD COLUMN IF NOT EXISTS oldest_at timestamptz NOT NULL DEFAULT '-infinity';
