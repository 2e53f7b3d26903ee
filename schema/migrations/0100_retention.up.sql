-- Retention (docs/retention.md): a tenant's own, shorter retention settings
-- (PUT /v1/settings "retention"; store.TenantSettings.Retention), the
-- maintenance runs' record (store.RecordMaintenanceRun: the operator's audit of
-- what each run of the maintenance Schedule did), and the indexes the
-- maintenance workflow's bounded DELETEs walk (store.Prune): each finds a
-- tenant's rows older than a cut-off without scanning the table. Every index
-- starts with tenant_id: maintenance works tenant by tenant (each tenant's
-- cut-off is its own), which is also how a distributed deployment routes it
-- (docs/scaling.md).
ALTER TABLE tenant_settings ADD COLUMN retention jsonb NOT NULL DEFAULT '{}';

-- A global (reference) table: one row per maintenance run, not per tenant.
CREATE TABLE maintenance_runs (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workflow_id text NOT NULL,
    run_id      text NOT NULL,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz NOT NULL DEFAULT now(),
    report      jsonb NOT NULL
);
CREATE INDEX maintenance_runs_started_idx ON maintenance_runs (started_at DESC);

-- Notification history: a delete of notifications cascades to deliveries,
-- attempts, receipts and dead letters by their (tenant_id, notification_id)
-- indexes.
CREATE INDEX notifications_accepted_idx ON notifications (tenant_id, accepted_at);
-- Ledger rows are dropped once their window has ended.
CREATE INDEX notification_dedup_until_idx ON notification_dedup (tenant_id, dedup_until);
-- Cap claims older than the caps' rolling 24 hours count for nothing.
CREATE INDEX cap_ledger_claimed_idx ON cap_ledger (tenant_id, claimed_at);
CREATE INDEX sandbox_messages_created_idx ON sandbox_messages (tenant_id, created_at);
CREATE INDEX webhook_messages_age_idx ON webhook_messages (tenant_id, created_at);
CREATE INDEX webhook_attempts_at_idx ON webhook_attempts (tenant_id, at);
-- A webhook message's delete cascades to its attempts by message_id.
CREATE INDEX webhook_attempts_message_idx ON webhook_attempts (message_id);
-- Resolved dead letters, oldest resolution first.
CREATE INDEX dead_letters_resolved_idx ON dead_letters (tenant_id, updated_at) WHERE status = 'redriven';
CREATE INDEX campaigns_finished_idx ON campaigns (tenant_id, finished_at) WHERE finished_at IS NOT NULL;
-- The inbox's age limit (the audit log's is audit_log_page_idx).
CREATE INDEX inbox_created_idx ON inbox (tenant_id, created_at);
CREATE INDEX inbox_events_created_idx ON inbox_events (tenant_id, created_at);
