-- Limiter leases (internal/ratelimit.Leases): an API replica takes many tokens from a
-- bucket in one statement and hands them out from memory. granted is how many the
-- latest statement took (RETURNING cannot show the level before the update). Not
-- indexed, so a take stays a HOT update.
ALTER TABLE rate_limit_buckets ADD COLUMN granted double precision NOT NULL DEFAULT 0;
