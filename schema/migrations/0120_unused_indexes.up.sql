-- Indexes that no query needs, dropped for their bytes (docs/retention.md#measured):
--
-- inbox_feed_idx and inbox_category_idx order a user's inbox by created_at:
-- since the due order (0085) the feed, its pages and the cap
-- (store.ListInbox, capInboxSQL) walk inbox_due_idx, and the age limit
-- (store.PruneInboxAge) inbox_created_idx. inbox_category_due_idx served the
-- category filter of store.ListInbox; the filter now walks the user's
-- inbox_due_idx entries, which the inbox cap bounds (100 by default), and
-- keeps those of the category. The three cost ~650 bytes per inbox item.
--
-- delivery_attempts had a primary key (tenant_id, id, at) nobody looks up and
-- delivery_attempts_idx (tenant_id, notification_id, channel, id) every read
-- uses (store.ListAttempts, CountAttempts, the prune and erasure): the key
-- becomes the second with the partition key, one index instead of two.
DROP INDEX inbox_feed_idx, inbox_category_idx, inbox_category_due_idx;

ALTER TABLE delivery_attempts DROP CONSTRAINT delivery_attempts_pkey;
DROP INDEX delivery_attempts_idx;
ALTER TABLE delivery_attempts ADD PRIMARY KEY (tenant_id, notification_id, channel, id, at);
