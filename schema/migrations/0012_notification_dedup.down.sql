DROP INDEX notifications_dedup_key_idx;
DROP INDEX notifications_user_idx;
CREATE INDEX notifications_user_idx ON notifications (tenant_id, user_id, accepted_at DESC);
DROP TABLE notification_dedup;
