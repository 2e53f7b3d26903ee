ALTER TABLE inbox_settings DROP COLUMN brand_logo_url, DROP COLUMN brand_color, DROP COLUMN brand_name;
