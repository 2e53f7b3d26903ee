-- An inbox item carries its own item.created stream event (docs/inbox.md#the-event-log):
-- the event's seq in the user's event log, when it was written, the user's counts
-- right after it and its late flag. store.insertInboxItems writes them with the row
-- instead of an inbox_events row, and store.InboxEventsAfter merges the items whose
-- ev_seq is past the reader's id, in seq order, with the stored events (every
-- other kind). The created event lives as long as its item: the inbox cap, the
-- inbox's age limit and erasure take it with the row. Rows written before this
-- migration keep NULL: their item.created rows stay in inbox_events, served
-- until pruned, and nothing is derived for them (no event twice).
--
-- Nullable columns with no default: catalog-only, no table rewrite; the
-- ACCESS EXCLUSIVE lock is held for the catalog change only. No index: a
-- user's rows are read by the primary key's (tenant_id, user_id) prefix, which
-- the inbox cap bounds. IF NOT EXISTS: re-runnable (a forced version re-runs
-- what follows it, TestForceRecoversADirtyVersion).
ALTER TABLE inbox
    ADD COLUMN IF NOT EXISTS ev_seq    bigint,
    ADD COLUMN IF NOT EXISTS ev_at     timestamptz,
    ADD COLUMN IF NOT EXISTS ev_total  integer,
    ADD COLUMN IF NOT EXISTS ev_unread integer,
    ADD COLUMN IF NOT EXISTS ev_unseen integer,
    ADD COLUMN IF NOT EXISTS ev_late   boolean;
