ALTER TABLE tenant_settings DROP COLUMN IF EXISTS daily_quota;
ALTER TABLE tenant_settings DROP COLUMN IF EXISTS api_burst;
ALTER TABLE tenant_settings DROP COLUMN IF EXISTS api_rate_per_second;
ALTER TABLE provider_configs DROP COLUMN IF EXISTS rate_per_second;
