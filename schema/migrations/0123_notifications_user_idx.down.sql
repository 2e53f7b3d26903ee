DROP INDEX notifications_user_idx;
CREATE INDEX notifications_user_idx ON notifications (tenant_id, user_id, accepted_at DESC, id DESC);
