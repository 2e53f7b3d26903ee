-- A user's notifications (store.ListUserNotifications: newest first by
-- (accepted_at, id), a keyset cursor; erasure's batches) are found by
-- (tenant_id, user_id, accepted_at): the index no longer repeats the
-- 66-character id (~70 bytes a notification, docs/retention.md#measured).
-- Two notifications of one user accepted in the same microsecond are put in
-- id order by an incremental sort of those few rows; the cursor's
-- (accepted_at, id) < (…) bounds the index walk by accepted_at.
DROP INDEX notifications_user_idx;
CREATE INDEX notifications_user_idx ON notifications (tenant_id, user_id, accepted_at DESC);
