-- The notifications a time partition must keep (docs/retention.md#time-partitions):
-- those not ended (queued, scheduled, sending) and those that ended more than
-- an hour after they were accepted (a send_at far ahead, quiet hours, long
-- retries). store.DropPartitions asks this index whether a partition past the
-- operator's retention still holds a notification that has not ended, or ended
-- within the retention, and keeps it if so: a probe of a small index instead
-- of a scan of a day of notifications. A notification outside it ended within
-- an hour of its accepted_at, so it is past the retention once its partition
-- ended an hour before the cut-off (store.LateEnd). Only expressions that are
-- immutable may stand in an index predicate: timestamptz - timestamptz is,
-- timestamptz + interval is not.
CREATE INDEX notifications_open_idx ON notifications (tenant_id, accepted_at)
    WHERE status IN ('queued', 'scheduled', 'sending') OR updated_at - accepted_at > interval '1 hour';
