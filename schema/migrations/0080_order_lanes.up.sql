-- Ordered delivery on provider channels (docs/ordering.md). Notifications with
-- the same (tenant, user, channel, ordering key) are handed to the provider in
-- the order they became due: each such channel takes the next seq of its lane
-- (order_lanes.next_seq, claimed under the lane row's lock by
-- store.ClaimOrderHandoffs) and one order_handoffs row; it waits while a lower
-- seq of the lane is still pending (done_at NULL) and, when it ends,
-- store.ReleaseOrderHandoff marks its row done under the same lock and names
-- the waiting successor to signal.
CREATE TABLE order_lanes (
    id           bigserial PRIMARY KEY,
    tenant_id    text NOT NULL,
    user_id      text NOT NULL,
    channel      text NOT NULL,
    ordering_key text NOT NULL,
    next_seq     bigint NOT NULL DEFAULT 1,
    created_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, user_id, channel, ordering_key)
);

-- One row per ordered (notification, channel): its place in the lane and what
-- its wait was (shown by GET /v1/notifications/{id}). No foreign key to
-- notifications: the API claims the place right after the workflow start,
-- before the workflow has written the notification row.
CREATE TABLE order_handoffs (
    tenant_id       text NOT NULL,
    lane_id         bigint NOT NULL REFERENCES order_lanes (id) ON DELETE CASCADE,
    seq             bigint NOT NULL,
    notification_id text NOT NULL,
    channel         text NOT NULL,
    workflow_id     text NOT NULL,
    run_id          text NOT NULL,
    claimed_at      timestamptz NOT NULL DEFAULT now(),
    -- behind: the pending notification of a lower seq this one found when it
    -- joined the workflow's side of the lane (NULL: nothing to wait for).
    behind_notification_id text,
    waited_ms       bigint,
    order_timeout   boolean NOT NULL DEFAULT false,
    done_at         timestamptz,
    PRIMARY KEY (lane_id, seq),
    UNIQUE (tenant_id, notification_id, channel)
);
-- The pending hand-offs of a lane, the only ones the claim and the release look at.
CREATE INDEX order_handoffs_pending_idx ON order_handoffs (lane_id, seq) WHERE done_at IS NULL;
-- The bounded clean-up of done hand-offs (store.PruneOrderHandoffs).
CREATE INDEX order_handoffs_done_idx ON order_handoffs (tenant_id, done_at) WHERE done_at IS NOT NULL;

-- The tenant's hold bound (PUT /v1/settings ordering_max_hold), within the
-- operator's HERALD_ORDERING_MAX_HOLD_MIN..MAX; NULL: the server default.
ALTER TABLE tenant_settings ADD COLUMN ordering_max_hold_ms bigint CHECK (ordering_max_hold_ms > 0);
