DROP TABLE IF EXISTS sandbox_messages;
DROP TABLE IF EXISTS provider_receipts;
DROP TABLE IF EXISTS push_tokens;
DROP TABLE IF EXISTS provider_configs;
