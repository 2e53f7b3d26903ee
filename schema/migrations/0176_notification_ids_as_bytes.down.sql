ALTER TABLE flow_steps DROP CONSTRAINT IF EXISTS flow_steps_tenant_id_notification_id_fkey;
DROP FUNCTION IF EXISTS notification_key_hash(bytea, text);
DROP FUNCTION IF EXISTS notification_run_id(bytea, text);
DROP FUNCTION IF EXISTS notification_workflow_id(text, bytea, text);

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
    WHERE a.atttypid = 'bytea'::regtype LOOP
        EXECUTE format('ALTER TABLE %I ALTER COLUMN %I TYPE text USING CASE WHEN octet_length(%I) = 32 '
                       'THEN ''n_'' || encode(%I, ''hex'') ELSE convert_from(%I, ''UTF8'') END', c.tab, c.col, c.col, c.col, c.col);
    END LOOP;
END $$;

ALTER TABLE flow_steps ADD CONSTRAINT flow_steps_tenant_id_notification_id_fkey
    FOREIGN KEY (tenant_id, notification_id) REFERENCES flow_runs (tenant_id, notification_id) ON DELETE CASCADE NOT VALID;
ALTER TABLE flow_steps VALIDATE CONSTRAINT flow_steps_tenant_id_notification_id_fkey;

CREATE OR REPLACE FUNCTION notification_workflow_id(tenant_id text, id text, campaign_id text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN campaign_id IS NULL THEN 'notification/' || tenant_id || '/' || substr(id, 3, 32)
                ELSE 'campaign/' || tenant_id || '/' || campaign_id END;

CREATE OR REPLACE FUNCTION notification_run_id(id text, campaign_id text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN campaign_id IS NULL
                THEN substr(id, 35, 8) || '-' || substr(id, 43, 4) || '-' || substr(id, 47, 4) || '-' || substr(id, 51, 4) || '-' || substr(id, 55, 12)
                ELSE '' END;

CREATE OR REPLACE FUNCTION notification_key_hash(id text, campaign_id text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN COALESCE(campaign_id, substr(id, 3, 32));
