-- Step 3 of 4 (0166): inbox_due_idx (tenant_id, user_id, due_seq DESC,
-- notification_id DESC) holds what the primary key now holds, in the order a
-- backward scan of it gives.
DROP INDEX CONCURRENTLY IF EXISTS inbox_due_idx;
