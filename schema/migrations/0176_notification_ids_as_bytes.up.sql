-- A notification's id is n_ + 64 hex digits (ids.NotificationID: key hash and
-- run id; ids.CampaignNotificationID: a hash). As text it is 67 bytes in every
-- row and index entry that names a notification; as its 32 bytes it is 33.
-- An in-app + email notification names itself eight times in what it keeps
-- (its row and key, two deliveries and their guard entries, its inbox item and
-- key) and twice more while its dedup window lasts (docs/retention.md, sixth
-- round). Every column that holds a notification id becomes bytea; the
-- processes still see the string: internal/dbx/notification_ids.go converts,
-- once. A value that is not an id (only tests wrote others) keeps its
-- characters as bytes, as the codec binds and reads it. webhook_messages'
-- notification_id stays text: a campaign.completed message holds its
-- campaign's id there, a client's string.
--
-- The rewrite holds each table's ACCESS EXCLUSIVE lock while it copies the
-- table and rebuilds its indexes: a maintenance window with the processes
-- stopped (a process of an earlier release would bind an id as its 66
-- characters). Nothing was released before it (schema/migrations/README.md).
-- Each column is converted only while it is text, so a run forced back over
-- this file (TestForceRecoversADirtyVersion) finds nothing to do.
ALTER TABLE flow_steps DROP CONSTRAINT IF EXISTS flow_steps_tenant_id_notification_id_fkey;
DROP FUNCTION IF EXISTS notification_key_hash(text, text);
DROP FUNCTION IF EXISTS notification_run_id(text, text);
DROP FUNCTION IF EXISTS notification_workflow_id(text, text, text);

DO $$
DECLARE
    c record;
BEGIN
    FOR c IN SELECT r.rel::text AS tab, t.col FROM (VALUES
        ('notifications', 'id'), ('deliveries', 'notification_id'), ('delivery_attempts', 'notification_id'),
        ('inbox', 'notification_id'), ('inbox_events', 'notification_id'), ('notification_dedup', 'notification_id'),
        ('notification_sequences', 'notification_id'), ('campaign_pending', 'notification_id'),
        ('cap_ledger', 'notification_id'), ('dead_letters', 'notification_id'), ('provider_receipts', 'notification_id'),
        ('sandbox_messages', 'notification_id'),
        ('digest_event_keys', 'notification_id'), ('digest_events', 'notification_id'), ('digests', 'notification_id'),
        ('flow_runs', 'notification_id'), ('flow_steps', 'notification_id'),
        ('flow_throttle_claims', 'notification_id'), ('flow_waiters', 'notification_id'),
        ('order_handoffs', 'notification_id'), ('order_handoffs', 'behind_notification_id')
    ) AS t(tab, col)
    -- and a day partition made but never attached (store.EnsurePartitions
    -- attaches it later, and only a table of the parent's column types)
    CROSS JOIN LATERAL (SELECT t.tab::regclass AS rel
        UNION ALL SELECT pc.oid::regclass FROM pg_class pc
        WHERE pc.relnamespace = 'public'::regnamespace AND pc.relkind = 'r' AND NOT pc.relispartition
          AND pc.relname ~ ('^' || t.tab || '_p[0-9]{8}$')) r
    JOIN pg_attribute a ON a.attrelid = r.rel AND a.attname = t.col
    WHERE a.atttypid = 'text'::regtype LOOP
        EXECUTE format('ALTER TABLE %I ALTER COLUMN %I TYPE bytea USING CASE WHEN %I ~ ''^n_[0-9a-f]{64}$'' '
                       'THEN decode(substr(%I, 3), ''hex'') ELSE convert_to(%I, ''UTF8'') END', c.tab, c.col, c.col, c.col, c.col);
    END LOOP;
END $$;

ALTER TABLE flow_steps ADD CONSTRAINT flow_steps_tenant_id_notification_id_fkey
    FOREIGN KEY (tenant_id, notification_id) REFERENCES flow_runs (tenant_id, notification_id) ON DELETE CASCADE NOT VALID;
ALTER TABLE flow_steps VALIDATE CONSTRAINT flow_steps_tenant_id_notification_id_fkey;

-- 0122's derivations, from the id's bytes: the key hash is the first 16, the
-- run id the last 16 (a UUID).
CREATE OR REPLACE FUNCTION notification_workflow_id(tenant_id text, id bytea, campaign_id text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN campaign_id IS NULL THEN 'notification/' || tenant_id || '/' || encode(substring(id FROM 1 FOR 16), 'hex')
                ELSE 'campaign/' || tenant_id || '/' || campaign_id END;

CREATE OR REPLACE FUNCTION notification_run_id(id bytea, campaign_id text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN campaign_id IS NULL AND octet_length(id) = 32 THEN encode(substring(id FROM 17 FOR 16), 'hex')::uuid::text ELSE '' END;

CREATE OR REPLACE FUNCTION notification_key_hash(id bytea, campaign_id text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN COALESCE(campaign_id, encode(substring(id FROM 1 FOR 16), 'hex'));
