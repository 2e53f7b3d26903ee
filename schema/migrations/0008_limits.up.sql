-- Rate limits: a send rate per provider account (enforced across all workers with
-- the PostgreSQL token buckets of 0006), and per-tenant API limits.
ALTER TABLE provider_configs ADD COLUMN rate_per_second double precision NOT NULL DEFAULT 0 CHECK (rate_per_second >= 0);
ALTER TABLE tenant_settings ADD COLUMN api_rate_per_second double precision NOT NULL DEFAULT 0 CHECK (api_rate_per_second >= 0);
ALTER TABLE tenant_settings ADD COLUMN api_burst integer NOT NULL DEFAULT 0 CHECK (api_burst >= 0);
ALTER TABLE tenant_settings ADD COLUMN daily_quota integer NOT NULL DEFAULT 0 CHECK (daily_quota >= 0);
