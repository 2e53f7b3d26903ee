-- The dead letters not yet resolved (open or redriving), by notification:
-- store.DropPartitions asks, for every day partition of the notification
-- history past the cut-off, whether an unresolved dead letter keeps one of its
-- notifications (internal/store/partitions.go, unresolvedDeadLettersSQL). Without
-- it that check reads the whole dead_letters table (every tenant's, resolved
-- ones too) once per partition and run; with it, only the unresolved ones.
-- Built concurrently, alone in its file (schema/migrations/README.md#indexes-on-big-tables).
CREATE INDEX CONCURRENTLY IF NOT EXISTS dead_letters_unresolved_idx ON dead_letters (tenant_id, notification_id) WHERE status IN ('open', 'redriving');
