-- Flow runs (docs/flows.md, docs/digests.md): what workflows.FlowWorkflow and
-- workflows.DigestWorkflow record so the API can show a flow event's run and a
-- user's open digests. Each flow event is also an ordinary notifications row
-- (its status, its Layer-1 id); each send step is an ordinary notification of
-- its own (its deliveries are the Layer-2 guard, unchanged).

-- One row per flow run: an event (digest_id NULL) or a digest's continuation
-- (the steps after a digest, run once per digest). store.RecordFlowRun.
CREATE TABLE flow_runs (
    tenant_id       text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    notification_id text NOT NULL,
    flow_id         text NOT NULL,
    flow_version    integer NOT NULL,
    user_id         text NOT NULL,
    digest_id       text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, notification_id)
);

-- Each step's outcome and time, keyed by its path in the definition ("2",
-- "1.case0.0"). store.RecordFlowStep.
CREATE TABLE flow_steps (
    tenant_id       text NOT NULL,
    notification_id text NOT NULL,
    path            text NOT NULL,
    step_id         text NOT NULL DEFAULT '',
    type            text NOT NULL,
    outcome         text NOT NULL,
    -- The notification a send step started; the digest a digest step joined.
    ref_notification_id text,
    started_at      timestamptz NOT NULL,
    finished_at     timestamptz,
    PRIMARY KEY (tenant_id, notification_id, path),
    FOREIGN KEY (tenant_id, notification_id) REFERENCES flow_runs (tenant_id, notification_id) ON DELETE CASCADE
);

-- A digest's events. The row is the event's membership: digest_id is set once,
-- by the close that claims it (UPDATE ... WHERE digest_id IS NULL), so an event
-- is in exactly one digest; the workflow's history carries only seq numbers.
-- store.AddDigestEvent, store.CloseDigest.
CREATE TABLE digest_events (
    seq             bigserial PRIMARY KEY,
    tenant_id       text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    digest_key      text NOT NULL,
    notification_id text NOT NULL,
    at              timestamptz NOT NULL,
    data            jsonb NOT NULL,
    digest_id       text,
    cancelled       boolean NOT NULL DEFAULT false,
    UNIQUE (tenant_id, notification_id)
);
CREATE INDEX digest_events_open_idx ON digest_events (digest_key, seq) WHERE digest_id IS NULL AND NOT cancelled;
CREATE INDEX digest_events_digest_idx ON digest_events (digest_id, seq) WHERE digest_id IS NOT NULL;

-- One row per digest key while a window is open (what GET
-- /v1/users/{user_id}/digests lists), and one per closed digest. store.OpenDigestWindow.
CREATE TABLE digests (
    tenant_id   text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    -- id: the digest key (its workflow ID) while open; the digest id once closed.
    id          text NOT NULL,
    digest_key  text NOT NULL,
    flow_id     text NOT NULL,
    user_id     text NOT NULL,
    key         text NOT NULL,
    status      text NOT NULL,
    opened_at   timestamptz NOT NULL,
    -- closes_at: the fixed or scheduled close; sliding windows compute theirs
    -- from the latest event (window_ms) capped by opened_at + max_wait_ms.
    closes_at   timestamptz,
    window_ms   bigint NOT NULL DEFAULT 0,
    max_wait_ms bigint NOT NULL DEFAULT 0,
    closed_at   timestamptz,
    count       integer NOT NULL DEFAULT 0,
    -- The digest's own send (a flow run's notification id).
    notification_id text,
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX digests_user_idx ON digests (tenant_id, user_id) WHERE status = 'open';

-- Throttle claims: one per (event, step); a bucket admits at most its limit.
-- store.ClaimThrottle.
CREATE TABLE flow_throttle_claims (
    tenant_id       text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    bucket          text NOT NULL,
    notification_id text NOT NULL,
    path            text NOT NULL,
    allowed         boolean NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, notification_id, path)
);
CREATE INDEX flow_throttle_claims_bucket_idx ON flow_throttle_claims (tenant_id, bucket) WHERE allowed;

-- Runs waiting for an inbox item to be seen or read: the inbox's mark path
-- signals them (store.FlowWaitersOf). store.AddFlowWaiter.
CREATE TABLE flow_waiters (
    tenant_id       text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    user_id         text NOT NULL,
    notification_id text NOT NULL,
    workflow_id     text NOT NULL,
    run_id          text NOT NULL,
    PRIMARY KEY (tenant_id, notification_id, workflow_id)
);
CREATE INDEX flow_waiters_user_idx ON flow_waiters (tenant_id, user_id);
