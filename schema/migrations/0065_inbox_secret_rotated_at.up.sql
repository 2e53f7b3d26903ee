-- When the tenant's inbox secret was last rotated (POST /v1/inbox/secret,
-- store.PutInboxHMACSecret). A user whose tokens were revoked after it
-- (DELETE /v1/users/{user_id}/tokens) gets no new session from a user_hash,
-- which never changes for a user until the secret does: a leaked hash must not
-- mint tokens again right after the revocation (api/user_tokens.go, docs/inbox.md).
ALTER TABLE inbox_settings ADD COLUMN hmac_rotated_at timestamptz;
UPDATE inbox_settings SET hmac_rotated_at = updated_at WHERE hmac_secret IS NOT NULL;
