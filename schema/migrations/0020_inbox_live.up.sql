-- The live inbox (docs/inbox.md): categories on inbox items, per-user counters and
-- event log, and the tenant's inbox settings.

-- The template's category, for the inbox's category filter.
ALTER TABLE inbox ADD COLUMN category text NOT NULL DEFAULT '';
CREATE INDEX inbox_category_idx ON inbox (tenant_id, user_id, category, created_at DESC, notification_id DESC);

-- One row per user with an inbox: the counts the API returns (maintained in the
-- same transaction as every inbox change, under this row's lock) and the user's
-- last event sequence number. The row lock serialises a user's inbox writes, so
-- a user's event seq numbers commit in order: a reader that saw seq N never
-- later finds a smaller one appear.
CREATE TABLE inbox_state (
    tenant_id text   NOT NULL,
    user_id   text   NOT NULL,
    seq       bigint NOT NULL DEFAULT 0,
    total     bigint NOT NULL DEFAULT 0 CHECK (total >= 0),
    unread    bigint NOT NULL DEFAULT 0 CHECK (unread >= 0),
    unseen    bigint NOT NULL DEFAULT 0 CHECK (unseen >= 0),
    PRIMARY KEY (tenant_id, user_id),
    FOREIGN KEY (tenant_id, user_id) REFERENCES users (tenant_id, user_id) ON DELETE CASCADE
);

-- Existing inboxes start with their recounted state.
INSERT INTO inbox_state (tenant_id, user_id, total, unread, unseen)
SELECT tenant_id, user_id,
       count(*) FILTER (WHERE archived_at IS NULL),
       count(*) FILTER (WHERE archived_at IS NULL AND read_at IS NULL),
       count(*) FILTER (WHERE archived_at IS NULL AND seen_at IS NULL)
FROM inbox GROUP BY tenant_id, user_id;

-- The per-user event log the stream replays from (Last-Event-ID = seq). Bounded:
-- older events are pruned as new ones arrive; a client further behind refetches.
CREATE TABLE inbox_events (
    tenant_id       text        NOT NULL,
    user_id         text        NOT NULL,
    seq             bigint      NOT NULL,
    kind            text        NOT NULL,
    notification_id text,
    item            jsonb,
    total           bigint      NOT NULL,
    unread          bigint      NOT NULL,
    unseen          bigint      NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, user_id, seq),
    FOREIGN KEY (tenant_id, user_id) REFERENCES users (tenant_id, user_id) ON DELETE CASCADE
);

-- The tenant's inbox settings: the origins browsers may call the inbox from, and
-- the sealed HMAC secret the tenant signs user hashes with.
CREATE TABLE inbox_settings (
    tenant_id       text PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    allowed_origins text[] NOT NULL DEFAULT '{}',
    hmac_secret     bytea,
    updated_at      timestamptz NOT NULL DEFAULT now()
);
