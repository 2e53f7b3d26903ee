DROP INDEX notifications_dedup_key_idx;

UPDATE notifications SET
    workflow_id = COALESCE(workflow_id, notification_workflow_id(tenant_id, id, campaign_id)),
    run_id = COALESCE(run_id, notification_run_id(id, campaign_id)),
    dedup_key_hash = COALESCE(dedup_key_hash, notification_key_hash(id, campaign_id))
WHERE workflow_id IS NULL OR run_id IS NULL OR dedup_key_hash IS NULL;

ALTER TABLE notifications ALTER COLUMN workflow_id SET NOT NULL,
    ALTER COLUMN run_id SET NOT NULL,
    ALTER COLUMN dedup_key_hash SET NOT NULL;
CREATE INDEX notifications_dedup_key_idx ON notifications (tenant_id, dedup_key_hash);

DROP FUNCTION notification_key_hash(text, text);
DROP FUNCTION notification_run_id(text, text);
DROP FUNCTION notification_workflow_id(text, text, text);
