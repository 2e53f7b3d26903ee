DROP INDEX IF EXISTS webhook_messages_notification_idx;
DROP INDEX IF EXISTS campaign_pending_user_idx;
DROP INDEX IF EXISTS topic_subscribers_user_idx;
DROP INDEX IF EXISTS recipient_list_members_user_idx;
DROP INDEX IF EXISTS flow_runs_user_idx;
DROP INDEX IF EXISTS digests_user_idx;
DROP INDEX IF EXISTS digest_events_user_idx;
DELETE FROM inbox_token_revocations r
    WHERE NOT EXISTS (SELECT 1 FROM users u WHERE u.tenant_id = r.tenant_id AND u.user_id = r.user_id);
ALTER TABLE inbox_token_revocations ADD CONSTRAINT inbox_token_revocations_tenant_id_user_id_fkey
    FOREIGN KEY (tenant_id, user_id) REFERENCES users (tenant_id, user_id) ON DELETE CASCADE;
DROP TABLE IF EXISTS user_erasures;
