-- The dedup ledger (docs/design.md): one row per accepted notification
-- (one run of its workflow, one dedup window), written with the notification row by
-- the workflow's first activity (store.InsertNotification):
--   * body_hash: SHA-256 of the canonical request body (user, template, data,
--     channels, send_at) the key was first accepted with, so a later request with the
--     same idempotency_key and another body is answered 422 idempotency_key_reused.
--     NULL while only a duplicate has written the row (it got to PostgreSQL before
--     the original did); the original fills it in. The workflow's memo carries the
--     same hash, for that moment and for an API that died between start and write.
--   * duplicates: how many submissions the window suppressed, counted by each
--     duplicate in its one round trip (so 200 concurrent submissions count 199).
--   * first_seen_at / last_seen_at: the first and the latest submission.
--   * dedup_until: when the window ends (the key is free again after it).
-- No foreign key to notifications: a duplicate that arrives before the workflow's
-- first activity writes its row here first.
CREATE TABLE notification_dedup (
    tenant_id       text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    notification_id text NOT NULL,
    key_hash        text NOT NULL,
    body_hash       bytea,
    first_seen_at   timestamptz NOT NULL,
    last_seen_at    timestamptz NOT NULL,
    duplicates      integer NOT NULL DEFAULT 0 CHECK (duplicates >= 0),
    dedup_until     timestamptz,
    PRIMARY KEY (tenant_id, notification_id)
) WITH (fillfactor = 70); -- a duplicate's update touches no indexed column: HOT

-- GET /v1/notifications?dedup_key=: a client key's notifications, newest first.
CREATE INDEX notification_dedup_key_idx ON notification_dedup (tenant_id, key_hash, first_seen_at DESC);

-- The support view (GET /v1/users/{user_id}/notifications) pages a user's
-- notifications newest first by (accepted_at, id).
DROP INDEX notifications_user_idx;
CREATE INDEX notifications_user_idx ON notifications (tenant_id, user_id, accepted_at DESC, id DESC);

-- GET /v1/notifications?dedup_key=: the notifications recorded for one key.
CREATE INDEX notifications_dedup_key_idx ON notifications (tenant_id, dedup_key_hash);
