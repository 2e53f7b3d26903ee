-- Daily-quota leases (internal/ratelimit.Leases.Quota): an API replica reserves
-- many units of a tenant's day in one statement and admits from memory. granted is
-- how many the latest statement reserved (RETURNING cannot show the count before
-- the update). Not indexed, so a reservation stays a HOT update.
ALTER TABLE rate_limit_quotas ADD COLUMN granted integer NOT NULL DEFAULT 0;
