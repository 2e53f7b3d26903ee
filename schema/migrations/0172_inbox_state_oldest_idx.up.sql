-- Step 2 of 3 (0171): the users whose inbox may hold an item older than the
-- age limit, or whose bound is unknown (store.PruneInboxAge). One entry per
-- user; the inbox write changes the bound only for an item older than it, so
-- its state row's updates stay HOT.
CREATE INDEX CONCURRENTLY IF NOT EXISTS inbox_state_oldest_idx ON inbox_state (tenant_id, oldest_at);
