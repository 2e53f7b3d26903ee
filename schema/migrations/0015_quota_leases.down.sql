ALTER TABLE rate_limit_quotas DROP COLUMN granted;
