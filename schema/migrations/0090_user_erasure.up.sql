-- User erasure (DELETE /v1/users/{user_id}, store.EraseUser, docs/erasure.md).
--
-- user_erasures is the erasure's own progress row: written in the transaction
-- that deletes the profile, it keeps the user's addresses and the stable
-- anonymous id (erased_id) only until the bounded batches that scrub the
-- history have run, then it is deleted. A DELETE retried after a crash finds it
-- and resumes.
CREATE TABLE user_erasures (
    tenant_id  text NOT NULL,
    user_id    text NOT NULL,
    erased_id  text NOT NULL,
    email      text,
    phone      text,
    started_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, user_id)
);

-- An erased user's token revocation is kept under the anonymous id, which
-- names no users row: the revocation no longer references the profile (the
-- erasure and the tenant removal delete revocations themselves).
ALTER TABLE inbox_token_revocations DROP CONSTRAINT IF EXISTS inbox_token_revocations_tenant_id_user_id_fkey;

-- The indexes the erasure's per-user batches read by (tenant_id, user_id) or by
-- (tenant_id, notification_id), on tables that had none.
CREATE INDEX IF NOT EXISTS digest_events_user_idx ON digest_events (tenant_id, user_id);
CREATE INDEX IF NOT EXISTS digests_user_idx ON digests (tenant_id, user_id);
CREATE INDEX IF NOT EXISTS flow_runs_user_idx ON flow_runs (tenant_id, user_id);
CREATE INDEX IF NOT EXISTS recipient_list_members_user_idx ON recipient_list_members (tenant_id, user_id);
CREATE INDEX IF NOT EXISTS topic_subscribers_user_idx ON topic_subscribers (tenant_id, user_id);
CREATE INDEX IF NOT EXISTS campaign_pending_user_idx ON campaign_pending (tenant_id, user_id);
CREATE INDEX IF NOT EXISTS webhook_messages_notification_idx ON webhook_messages (tenant_id, notification_id);
