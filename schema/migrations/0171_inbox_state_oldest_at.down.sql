ALTER TABLE inbox_state DROP COLUMN IF EXISTS oldest_at;
