CREATE INDEX CONCURRENTLY IF NOT EXISTS inbox_created_idx ON inbox (tenant_id, created_at);
