DROP TABLE IF EXISTS webhook_attempts;
DROP TABLE IF EXISTS webhook_messages;
DROP TABLE IF EXISTS webhook_endpoints;
