ALTER TABLE tenant_settings DROP COLUMN IF EXISTS retry_policies;
DROP TABLE IF EXISTS dead_letters;
DROP TABLE IF EXISTS delivery_attempts;
