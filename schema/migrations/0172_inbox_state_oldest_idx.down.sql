DROP INDEX CONCURRENTLY IF EXISTS inbox_state_oldest_idx;
