-- Back to plain tables, every row kept (the partitions' rows copied).
ALTER TABLE audit_log RENAME TO audit_log_part;
ALTER TABLE audit_log_part ALTER COLUMN id DROP DEFAULT;
ALTER TABLE audit_log_part DROP CONSTRAINT audit_log_pkey;
DROP INDEX audit_log_page_idx, audit_log_action_idx;
CREATE TABLE audit_log (LIKE audit_log_part INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
ALTER TABLE audit_log ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY;
INSERT INTO audit_log OVERRIDING SYSTEM VALUE SELECT * FROM audit_log_part;
SELECT setval(pg_get_serial_sequence('audit_log', 'id'), COALESCE((SELECT max(id) FROM audit_log), 0) + 1, false);
DROP TABLE audit_log_part;
ALTER TABLE audit_log ADD PRIMARY KEY (tenant_id, id), ADD FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE;
CREATE INDEX audit_log_page_idx ON audit_log (tenant_id, at DESC, id DESC);
CREATE INDEX audit_log_action_idx ON audit_log (tenant_id, action, at DESC, id DESC);

ALTER TABLE inbox_events RENAME TO inbox_events_part;
ALTER TABLE inbox_events_part DROP CONSTRAINT inbox_events_pkey;
DROP INDEX inbox_events_created_idx;
CREATE TABLE inbox_events (LIKE inbox_events_part INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
INSERT INTO inbox_events SELECT * FROM inbox_events_part;
DROP TABLE inbox_events_part;
ALTER TABLE inbox_events ADD PRIMARY KEY (tenant_id, user_id, seq),
    ADD FOREIGN KEY (tenant_id, user_id) REFERENCES users (tenant_id, user_id) ON DELETE CASCADE;
CREATE INDEX inbox_events_created_idx ON inbox_events (tenant_id, created_at);

ALTER TABLE delivery_attempts RENAME TO delivery_attempts_part;
ALTER SEQUENCE delivery_attempts_id_seq OWNED BY NONE;
ALTER TABLE delivery_attempts_part DROP CONSTRAINT delivery_attempts_pkey, DROP CONSTRAINT delivery_attempts_outcome_check;
DROP INDEX delivery_attempts_idx;
CREATE TABLE delivery_attempts (LIKE delivery_attempts_part INCLUDING DEFAULTS);
INSERT INTO delivery_attempts SELECT * FROM delivery_attempts_part;
DROP TABLE delivery_attempts_part;
ALTER SEQUENCE delivery_attempts_id_seq OWNED BY delivery_attempts.id;
ALTER TABLE delivery_attempts ADD PRIMARY KEY (id),
    ADD CONSTRAINT delivery_attempts_outcome_check CHECK (outcome IN ('accepted', 'retryable', 'permanent'));
CREATE INDEX delivery_attempts_idx ON delivery_attempts (tenant_id, notification_id, channel, id);

ALTER TABLE deliveries RENAME TO deliveries_part;
ALTER TABLE deliveries_part DROP CONSTRAINT deliveries_guard_key;
DROP INDEX deliveries_campaign_idx;
CREATE TABLE deliveries (LIKE deliveries_part INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
INSERT INTO deliveries SELECT * FROM deliveries_part;
DROP TABLE deliveries_part;
ALTER TABLE deliveries DROP COLUMN accepted_at;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_notification_id_channel_key UNIQUE (notification_id, channel);
CREATE INDEX deliveries_tenant_idx ON deliveries (tenant_id, notification_id);
CREATE INDEX deliveries_campaign_idx ON deliveries (tenant_id, campaign_id) WHERE campaign_id IS NOT NULL;

ALTER TABLE notifications RENAME TO notifications_part;
ALTER TABLE notifications_part DROP CONSTRAINT notifications_pkey;
DROP INDEX notifications_user_idx, notifications_dedup_key_idx, notifications_campaign_idx, notifications_accepted_idx;
CREATE TABLE notifications (LIKE notifications_part INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
INSERT INTO notifications SELECT * FROM notifications_part;
DROP TABLE notifications_part;
ALTER TABLE notifications ADD PRIMARY KEY (tenant_id, id), ADD FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE;
CREATE INDEX notifications_user_idx ON notifications (tenant_id, user_id, accepted_at DESC, id DESC);
CREATE INDEX notifications_dedup_key_idx ON notifications (tenant_id, dedup_key_hash);
CREATE INDEX notifications_campaign_idx ON notifications (tenant_id, campaign_id) WHERE campaign_id IS NOT NULL;
CREATE INDEX notifications_accepted_idx ON notifications (tenant_id, accepted_at);

DROP INDEX provider_receipts_received_idx;
DROP INDEX notification_sequences_assigned_idx;
ALTER TABLE dead_letters ADD FOREIGN KEY (tenant_id, notification_id) REFERENCES notifications (tenant_id, id) ON DELETE CASCADE NOT VALID;
ALTER TABLE provider_receipts ADD FOREIGN KEY (tenant_id, notification_id) REFERENCES notifications (tenant_id, id) ON DELETE CASCADE NOT VALID;
ALTER TABLE delivery_attempts ADD FOREIGN KEY (tenant_id, notification_id) REFERENCES notifications (tenant_id, id) ON DELETE CASCADE NOT VALID;
ALTER TABLE deliveries ADD FOREIGN KEY (tenant_id, notification_id) REFERENCES notifications (tenant_id, id) ON DELETE CASCADE NOT VALID;
