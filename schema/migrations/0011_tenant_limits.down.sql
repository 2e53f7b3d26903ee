-- The operator's limits go back where 0008 kept them; the right to send critical
-- notifications has no place there (every tenant had it before 0011).
ALTER TABLE tenant_settings ADD COLUMN api_rate_per_second double precision NOT NULL DEFAULT 0 CHECK (api_rate_per_second >= 0);
ALTER TABLE tenant_settings ADD COLUMN api_burst integer NOT NULL DEFAULT 0 CHECK (api_burst >= 0);
ALTER TABLE tenant_settings ADD COLUMN daily_quota integer NOT NULL DEFAULT 0 CHECK (daily_quota >= 0);
INSERT INTO tenant_settings (tenant_id, api_rate_per_second, api_burst, daily_quota)
SELECT tenant_id, api_rate_per_second, api_burst, daily_quota FROM tenant_limits
ON CONFLICT (tenant_id) DO UPDATE SET api_rate_per_second = EXCLUDED.api_rate_per_second,
    api_burst = EXCLUDED.api_burst, daily_quota = EXCLUDED.daily_quota;
DROP TABLE IF EXISTS tenant_limits;
