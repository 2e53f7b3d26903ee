-- A notification's workflow id, run id and dedup key hash are, for nearly
-- every row, spelled out by its id and campaign (docs/retention.md#measured):
-- a notification's id is n_ + its key hash + its run id without dashes
-- (ids.NotificationID), its workflow notification/<tenant>/<key hash>; a
-- campaign recipient's workflow is its campaign's, its run id empty and its
-- key its campaign id. They cost ~130 bytes a row and the key hash index
-- ~100 more. The columns now hold NULL where the value is the one these
-- functions derive (the writers store NULLIF(value, derived), the readers
-- COALESCE(column, derived): store.notificationDerivedSQL), and the
-- value itself otherwise, so every row reads back as it was written.
-- A notification's key hash is found by a range of its primary key
-- (store.ListUserNotifications); notifications_dedup_key_idx keeps only
-- the rows whose key is not spelled by their id.
CREATE FUNCTION notification_workflow_id(tenant_id text, id text, campaign_id text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN campaign_id IS NULL THEN 'notification/' || tenant_id || '/' || substr(id, 3, 32)
                ELSE 'campaign/' || tenant_id || '/' || campaign_id END;

CREATE FUNCTION notification_run_id(id text, campaign_id text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN campaign_id IS NULL
                THEN substr(id, 35, 8) || '-' || substr(id, 43, 4) || '-' || substr(id, 47, 4) || '-' || substr(id, 51, 4) || '-' || substr(id, 55, 12)
                ELSE '' END;

CREATE FUNCTION notification_key_hash(id text, campaign_id text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN COALESCE(campaign_id, substr(id, 3, 32));

ALTER TABLE notifications ALTER COLUMN workflow_id DROP NOT NULL,
    ALTER COLUMN run_id DROP NOT NULL,
    ALTER COLUMN dedup_key_hash DROP NOT NULL;

UPDATE notifications SET
    workflow_id = NULLIF(workflow_id, notification_workflow_id(tenant_id, id, campaign_id)),
    run_id = NULLIF(run_id, notification_run_id(id, campaign_id)),
    dedup_key_hash = NULLIF(dedup_key_hash, notification_key_hash(id, campaign_id))
WHERE workflow_id = notification_workflow_id(tenant_id, id, campaign_id)
   OR run_id = notification_run_id(id, campaign_id)
   OR dedup_key_hash = notification_key_hash(id, campaign_id);

DROP INDEX notifications_dedup_key_idx;
CREATE INDEX notifications_dedup_key_idx ON notifications (tenant_id, dedup_key_hash) WHERE dedup_key_hash IS NOT NULL;
