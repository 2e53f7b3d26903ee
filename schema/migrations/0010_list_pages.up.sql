-- Keyset pagination of the lists that used to be loaded whole: GET /v1/dead-letters
-- pages newest first by (created_at, id), with or without a status filter;
-- GET /v1/users/{id}/push-tokens oldest first by (created_at, token).
-- GET /v1/templates pages by template_id on the primary key and needs no index.
DROP INDEX dead_letters_list_idx;
CREATE INDEX dead_letters_list_idx ON dead_letters (tenant_id, status, created_at DESC, id DESC);
CREATE INDEX dead_letters_page_idx ON dead_letters (tenant_id, created_at DESC, id DESC);
DROP INDEX push_tokens_user_idx;
CREATE INDEX push_tokens_user_idx ON push_tokens (tenant_id, user_id, created_at, token);
