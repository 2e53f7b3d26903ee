-- The inbox's age limit finds the users to visit by a bound per user instead of
-- an index entry per item (docs/retention.md#bytes-per-notification: ~70 bytes
-- an inbox item): inbox_state.oldest_at is a lower bound of the created_at of
-- the user's items (store.PruneInboxAge says how it is kept). Step 1 of 3: the
-- column, NULL (unknown: visited once by the next age prune, which sets it) on
-- every existing row; a nullable column without a default, no rewrite. 0172
-- indexes it, 0173 drops inbox_created_idx.
ALTER TABLE inbox_state ADD COLUMN IF NOT EXISTS oldest_at timestamptz;
