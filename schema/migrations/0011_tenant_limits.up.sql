-- Operator-owned per-tenant limits. A tenant's API limits and its right to send
-- critical notifications (which bypass caps and quiet hours and run on the shared
-- critical lane) are the operator's decision, so they leave tenant_settings (which
-- the tenant's own key writes with PUT /v1/settings) for a table only the operator
-- writes: `herald tenant limits` and PUT /v1/operator/tenants/{tenant_id}/limits.
-- No row (or 0) means the server defaults (HERALD_TENANT_RATE, HERALD_TENANT_BURST,
-- HERALD_TENANT_DAILY_QUOTA) and no critical notifications.
--
-- The limits tenants set for themselves before this migration are dropped, not
-- copied: they were never the operator's decision (a tenant could give itself
-- 100000/s). After upgrading, set the limits you approve with `herald tenant limits`.
-- Likewise no tenant may send critical notifications until the operator allows it:
-- its existing critical templates are then accepted as ordinary ones.
CREATE TABLE tenant_limits (
    tenant_id           text PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    api_rate_per_second double precision NOT NULL DEFAULT 0 CHECK (api_rate_per_second >= 0),
    api_burst           integer NOT NULL DEFAULT 0 CHECK (api_burst >= 0),
    daily_quota         integer NOT NULL DEFAULT 0 CHECK (daily_quota >= 0),
    allow_critical      boolean NOT NULL DEFAULT false,
    updated_at          timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE tenant_settings DROP COLUMN api_rate_per_second;
ALTER TABLE tenant_settings DROP COLUMN api_burst;
ALTER TABLE tenant_settings DROP COLUMN daily_quota;

