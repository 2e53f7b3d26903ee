CREATE INDEX CONCURRENTLY IF NOT EXISTS dead_letters_unresolved_idx ON dead_letters (tenant_id, notification_id) WHERE status IN ('open', 'redriving');
