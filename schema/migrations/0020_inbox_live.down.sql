DROP TABLE IF EXISTS inbox_settings;
DROP TABLE IF EXISTS inbox_events;
DROP TABLE IF EXISTS inbox_state;
DROP INDEX IF EXISTS inbox_category_idx;
ALTER TABLE inbox DROP COLUMN IF EXISTS category;
