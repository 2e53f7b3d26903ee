-- API key management (GET/POST/DELETE /v1/api-keys, `herald key ...`): every key
-- gets a stable public id to list and revoke it by, an optional name, and the time
-- it was last used (written at most once a minute per key, on an auth cache miss).
-- The key itself is still never stored: only its SHA-256 (key_hash).
ALTER TABLE api_keys ADD COLUMN id text;
UPDATE api_keys SET id = 'key_' || substr(md5(encode(key_hash, 'hex') || random()::text), 1, 16);
ALTER TABLE api_keys ALTER COLUMN id SET NOT NULL;
-- Herald names new keys itself; the default covers writers that do not (an older
-- binary during a rolling deploy).
ALTER TABLE api_keys ALTER COLUMN id SET DEFAULT 'key_' || substr(md5(random()::text || clock_timestamp()::text), 1, 16);
ALTER TABLE api_keys ADD CONSTRAINT api_keys_id_key UNIQUE (id);
ALTER TABLE api_keys ADD COLUMN name text NOT NULL DEFAULT '';
ALTER TABLE api_keys ADD COLUMN last_used_at timestamptz;
