DROP TABLE IF EXISTS inbox_token_revocations;
