DROP INDEX IF EXISTS push_tokens_user_idx;
CREATE INDEX push_tokens_user_idx ON push_tokens (tenant_id, user_id, created_at);
DROP INDEX IF EXISTS dead_letters_page_idx;
DROP INDEX IF EXISTS dead_letters_list_idx;
CREATE INDEX dead_letters_list_idx ON dead_letters (tenant_id, status, created_at DESC);
