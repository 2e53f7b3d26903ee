-- The dedup ledger's rows of a key are found by a range of its primary key
-- (docs/retention.md#measured): a notification's id is n_ + its key hash +
-- its run id (ids.NotificationID), so the rows of key K are those whose
-- notification_id lies between 'n_K' and 'n_Kg' (hex digits sort below g),
-- found in (tenant_id, notification_id) without an index of their own
-- (~120 bytes a notification). A row whose id does not spell its key_hash
-- (none is written so today) stays in a partial index, and the lookups
-- (store.AnswerFromLedger, NotificationsByKey: store.ledgerKeySQL) read both,
-- so they find exactly the rows key_hash = K found before.
DROP INDEX notification_dedup_key_idx;
CREATE INDEX notification_dedup_key_idx ON notification_dedup (tenant_id, key_hash, first_seen_at DESC)
    WHERE key_hash <> substr(notification_id, 3, 32);
