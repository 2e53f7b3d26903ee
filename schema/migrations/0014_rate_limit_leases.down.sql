ALTER TABLE rate_limit_buckets DROP COLUMN granted;
