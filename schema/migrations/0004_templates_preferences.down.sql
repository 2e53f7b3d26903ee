ALTER TABLE notifications DROP COLUMN IF EXISTS category;
ALTER TABLE notifications DROP COLUMN IF EXISTS template_version;
DROP TABLE IF EXISTS cap_ledger;
DROP TABLE IF EXISTS tenant_settings;
DROP TABLE IF EXISTS user_preferences;
DROP TABLE IF EXISTS templates;
