-- The audit log (docs/api.md, "Audit log"): every change a tenant makes through the
-- API, with the id of the API key that made it (api_keys.id, never the key), when,
-- the action ("template.put", "provider.delete", ...), its target and what changed
-- (the request's fields with secrets removed). Written by one middleware
-- (api/audit.go); read with GET /v1/audit-log.
CREATE TABLE audit_log (
    tenant_id  text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id         bigint GENERATED ALWAYS AS IDENTITY,
    at         timestamptz NOT NULL DEFAULT now(),
    api_key_id text NOT NULL,
    action     text NOT NULL,
    target     text NOT NULL DEFAULT '',
    status     integer NOT NULL,
    details    jsonb NOT NULL DEFAULT '{}',
    PRIMARY KEY (tenant_id, id)
);
-- Newest first, with or without an action filter.
CREATE INDEX audit_log_page_idx ON audit_log (tenant_id, at DESC, id DESC);
CREATE INDEX audit_log_action_idx ON audit_log (tenant_id, action, at DESC, id DESC);
