DROP INDEX campaigns_active_idx;

ALTER TABLE campaigns
    DROP COLUMN quota_day,
    DROP COLUMN failure_message,
    DROP COLUMN failure_reason;

ALTER TABLE tenant_limits
    DROP COLUMN max_list_bytes,
    DROP COLUMN max_concurrent_campaigns,
    DROP COLUMN max_audience_size;
