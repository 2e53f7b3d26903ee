-- Step 3 of 3 (0171): inbox_created_idx (tenant_id, created_at), an entry per
-- inbox item, found the users the age limit visits; inbox_state_oldest_idx
-- does now. GET /v1/usage's oldest inbox row is min(created_at) without it:
-- answered within store.UsageOldestTimeout for a small tenant, "unknown" for
-- a large one (docs/retention.md).
DROP INDEX CONCURRENTLY IF EXISTS inbox_created_idx;
