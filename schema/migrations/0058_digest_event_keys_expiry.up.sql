-- The sweeper deletes digest-first events' dedup keys whose window ended
-- (store.PruneDigestEventKeys) in batches, oldest first.
CREATE INDEX digest_event_keys_until_idx ON digest_event_keys (dedup_until);
