-- Time partitions for the high-volume tables (docs/retention.md#time-partitions):
-- notifications and deliveries by the notification's accepted_at and delivery
-- attempts by their time (one partition a UTC day each), inbox events by
-- created_at and the audit log by at (one a week, from Monday: their
-- retentions are 90 and 365 days). Expiry is then the
-- maintenance workflow detaching and dropping whole partitions
-- (store.DropPartition) instead of deleting rows; it also creates them ahead
-- (store.EnsurePartitions). This migration creates every partition from the
-- day (week) of the oldest row (or of a week ago) to a week (two weeks) ahead, copies every row
-- into the partitioned table and swaps it in under the old name.
--
-- PostgreSQL requires every unique constraint of a partitioned table to hold
-- the partition key. The delivery guard, deliveries UNIQUE (notification_id,
-- channel), becomes UNIQUE (tenant_id, notification_id, channel, accepted_at):
-- accepted_at is the notification's, which every writer knows and always
-- writes the same (the workflow input's; a campaign recipient's is its
-- campaign's start), so it is still one row per (notification, channel).
-- Notifications' primary key becomes (tenant_id, id, accepted_at) the same way.
-- The foreign keys from deliveries, attempts, receipts and dead letters to
-- notifications go (a partition referenced by a foreign key cannot be
-- dropped without checking every referencing row): store.Prune deletes a
-- notification's rows itself, and partitions of one retention drop together.
--
-- Run on a large database it copies every row under an exclusive lock: plan
-- a maintenance window (docs/retention.md says how long per million rows).

CREATE FUNCTION pg_temp.herald_partitions(parent text, unit text, first timestamptz, ahead interval) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    s timestamptz := date_trunc(unit, first, 'UTC');
    e timestamptz;
BEGIN
    WHILE s <= now() + ahead LOOP
        e := s + ('1 ' || unit)::interval;
        EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
            parent || '_p' || to_char(s AT TIME ZONE 'UTC', 'YYYYMMDD'), parent, s, e);
        s := e;
    END LOOP;
END $$;

ALTER TABLE deliveries DROP CONSTRAINT deliveries_tenant_id_notification_id_fkey;
ALTER TABLE delivery_attempts DROP CONSTRAINT delivery_attempts_tenant_id_notification_id_fkey;
ALTER TABLE provider_receipts DROP CONSTRAINT provider_receipts_tenant_id_notification_id_fkey;
ALTER TABLE dead_letters DROP CONSTRAINT dead_letters_tenant_id_notification_id_fkey;
-- Receipts and due-sequence numbers outlive no partition by much:
-- maintenance deletes them by age (store.PruneReceipts, PruneSequences).
CREATE INDEX provider_receipts_received_idx ON provider_receipts (tenant_id, received_at);
CREATE INDEX notification_sequences_assigned_idx ON notification_sequences (tenant_id, assigned_at);

-- notifications
ALTER TABLE notifications RENAME TO notifications_old;
ALTER TABLE notifications_old DROP CONSTRAINT notifications_pkey, DROP CONSTRAINT notifications_tenant_id_fkey;
DROP INDEX notifications_user_idx, notifications_dedup_key_idx, notifications_campaign_idx, notifications_accepted_idx;
CREATE TABLE notifications (LIKE notifications_old INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY RANGE (accepted_at);
ALTER TABLE notifications ADD PRIMARY KEY (tenant_id, id, accepted_at),
    ADD FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE;
CREATE INDEX notifications_user_idx ON notifications (tenant_id, user_id, accepted_at DESC, id DESC);
CREATE INDEX notifications_dedup_key_idx ON notifications (tenant_id, dedup_key_hash);
CREATE INDEX notifications_campaign_idx ON notifications (tenant_id, campaign_id) WHERE campaign_id IS NOT NULL;
CREATE INDEX notifications_accepted_idx ON notifications (tenant_id, accepted_at);
SELECT pg_temp.herald_partitions('notifications', 'day', least((SELECT min(accepted_at) FROM notifications_old), now() - interval '7 days'), interval '7 days');
INSERT INTO notifications SELECT * FROM notifications_old;
DROP TABLE notifications_old;

-- deliveries: the notification's accepted_at joins the guard.
ALTER TABLE deliveries RENAME TO deliveries_old;
ALTER TABLE deliveries_old DROP CONSTRAINT deliveries_notification_id_channel_key;
DROP INDEX deliveries_tenant_idx, deliveries_campaign_idx;
CREATE TABLE deliveries (LIKE deliveries_old INCLUDING DEFAULTS INCLUDING CONSTRAINTS, accepted_at timestamptz NOT NULL)
    PARTITION BY RANGE (accepted_at);
ALTER TABLE deliveries ADD CONSTRAINT deliveries_guard_key UNIQUE (tenant_id, notification_id, channel, accepted_at);
CREATE INDEX deliveries_campaign_idx ON deliveries (tenant_id, campaign_id) WHERE campaign_id IS NOT NULL;
CREATE TEMP TABLE deliveries_moved ON COMMIT DROP AS
    SELECT d.*, COALESCE(n.accepted_at, d.updated_at) AS accepted_at
    FROM deliveries_old d LEFT JOIN notifications n ON n.tenant_id = d.tenant_id AND n.id = d.notification_id;
SELECT pg_temp.herald_partitions('deliveries', 'day', least((SELECT min(accepted_at) FROM deliveries_moved), now() - interval '7 days'), interval '7 days');
INSERT INTO deliveries SELECT * FROM deliveries_moved;
DROP TABLE deliveries_old;

-- delivery_attempts, by the attempt's time; the id sequence carries over.
ALTER TABLE delivery_attempts RENAME TO delivery_attempts_old;
ALTER SEQUENCE delivery_attempts_id_seq OWNED BY NONE;
ALTER TABLE delivery_attempts_old DROP CONSTRAINT delivery_attempts_pkey, DROP CONSTRAINT delivery_attempts_outcome_check;
DROP INDEX delivery_attempts_idx;
CREATE TABLE delivery_attempts (LIKE delivery_attempts_old INCLUDING DEFAULTS) PARTITION BY RANGE (at);
ALTER TABLE delivery_attempts ADD PRIMARY KEY (tenant_id, id, at),
    ADD CONSTRAINT delivery_attempts_outcome_check CHECK (outcome IN ('accepted', 'retryable', 'permanent'));
CREATE INDEX delivery_attempts_idx ON delivery_attempts (tenant_id, notification_id, channel, id);
SELECT pg_temp.herald_partitions('delivery_attempts', 'day', least((SELECT min(at) FROM delivery_attempts_old), now() - interval '7 days'), interval '7 days');
INSERT INTO delivery_attempts SELECT * FROM delivery_attempts_old;
DROP TABLE delivery_attempts_old;
ALTER SEQUENCE delivery_attempts_id_seq OWNED BY delivery_attempts.id;

-- inbox_events
ALTER TABLE inbox_events RENAME TO inbox_events_old;
ALTER TABLE inbox_events_old DROP CONSTRAINT inbox_events_pkey, DROP CONSTRAINT inbox_events_tenant_id_user_id_fkey;
DROP INDEX inbox_events_created_idx;
CREATE TABLE inbox_events (LIKE inbox_events_old INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY RANGE (created_at);
ALTER TABLE inbox_events ADD PRIMARY KEY (tenant_id, user_id, seq, created_at),
    ADD FOREIGN KEY (tenant_id, user_id) REFERENCES users (tenant_id, user_id) ON DELETE CASCADE;
CREATE INDEX inbox_events_created_idx ON inbox_events (tenant_id, created_at);
SELECT pg_temp.herald_partitions('inbox_events', 'week', least((SELECT min(created_at) FROM inbox_events_old), now() - interval '7 days'), interval '14 days');
INSERT INTO inbox_events SELECT * FROM inbox_events_old;
DROP TABLE inbox_events_old;

-- audit_log, by week; ids go on from the highest.
ALTER TABLE audit_log RENAME TO audit_log_old;
ALTER TABLE audit_log_old DROP CONSTRAINT audit_log_pkey, DROP CONSTRAINT audit_log_tenant_id_fkey;
DROP INDEX audit_log_page_idx, audit_log_action_idx;
CREATE SEQUENCE audit_log_ids;
SELECT setval('audit_log_ids', COALESCE((SELECT max(id) FROM audit_log_old), 0) + 1, false);
CREATE TABLE audit_log (LIKE audit_log_old INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY RANGE (at);
ALTER TABLE audit_log ALTER COLUMN id SET DEFAULT nextval('audit_log_ids');
ALTER TABLE audit_log ADD PRIMARY KEY (tenant_id, id, at),
    ADD FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE;
CREATE INDEX audit_log_page_idx ON audit_log (tenant_id, at DESC, id DESC);
CREATE INDEX audit_log_action_idx ON audit_log (tenant_id, action, at DESC, id DESC);
SELECT pg_temp.herald_partitions('audit_log', 'week', least((SELECT min(at) FROM audit_log_old), now() - interval '7 days'), interval '14 days');
INSERT INTO audit_log SELECT * FROM audit_log_old;
DROP TABLE audit_log_old;
ALTER SEQUENCE audit_log_ids OWNED BY audit_log.id;
ALTER SEQUENCE audit_log_ids RENAME TO audit_log_id_seq;
