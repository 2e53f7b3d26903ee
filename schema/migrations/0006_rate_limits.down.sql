DROP TABLE IF EXISTS rate_limit_quotas;
DROP TABLE IF EXISTS rate_limit_buckets;
