ALTER TABLE inbox_settings DROP COLUMN hmac_rotated_at;
