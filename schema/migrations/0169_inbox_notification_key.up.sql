-- Step 4 of 4 (0166), for the way down only: its down file builds, concurrently
-- and in a file of its own (schema/migrations/README.md#indexes-on-big-tables),
-- the unique index 0167's down file makes the primary key again. Up, it drops
-- that index if a migration down and up again left it behind.
DROP INDEX CONCURRENTLY IF EXISTS inbox_notification_key;
