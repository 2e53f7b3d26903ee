-- Shared rate-limit state for internal/ratelimit: token buckets (per-tenant API
-- limits, provider-account send rates) and daily quotas. The state lives here, not
-- in any process, so a limit holds across every API replica and worker.

-- One row per bucket key. tokens is the level at updated_at (database clock); the
-- refill since then is computed on the next Take, so an idle bucket costs nothing.
-- Neither updated column is indexed, so each Take is a HOT update; the fillfactor
-- leaves room on the page for it.
CREATE TABLE rate_limit_buckets (
    key        text PRIMARY KEY,
    tokens     double precision NOT NULL,
    updated_at timestamptz NOT NULL
) WITH (fillfactor = 50);

-- One row per quota key per UTC day: how many calls were admitted that day.
CREATE TABLE rate_limit_quotas (
    key  text NOT NULL,
    day  date NOT NULL,
    used integer NOT NULL CHECK (used >= 0),
    PRIMARY KEY (key, day)
);

-- Prune deletes past days.
CREATE INDEX rate_limit_quotas_day ON rate_limit_quotas (day);
