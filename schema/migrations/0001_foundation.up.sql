-- Foundation: tenants, their API keys, users, notifications, per-channel deliveries
-- and the in-app inbox. Every table carries tenant_id and every query filters by it.

CREATE TABLE tenants (
    id         text PRIMARY KEY,
    name       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Only the SHA-256 of a key is stored; the key itself is shown once at creation.
CREATE TABLE api_keys (
    key_hash   bytea PRIMARY KEY,
    tenant_id  text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    prefix     text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz
);
CREATE INDEX api_keys_tenant_idx ON api_keys (tenant_id);

CREATE TABLE users (
    tenant_id  text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    user_id    text NOT NULL,
    name       text,
    email      text,
    phone      text,
    locale     text,
    timezone   text,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, user_id)
);

-- One row per accepted notification (one run of its workflow).
CREATE TABLE notifications (
    tenant_id      text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id             text NOT NULL,
    user_id        text NOT NULL,
    template_id    text NOT NULL,
    channels       text[] NOT NULL,
    workflow_id    text NOT NULL,
    run_id         text NOT NULL,
    dedup_key_hash text NOT NULL,
    status         text NOT NULL,
    accepted_at    timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX notifications_user_idx ON notifications (tenant_id, user_id, accepted_at DESC);

-- The Layer-2 delivery guard: one row per (notification, channel). A channel is
-- recorded 'sent' only after its provider accepted.
CREATE TABLE deliveries (
    tenant_id           text NOT NULL,
    notification_id     text NOT NULL,
    channel             text NOT NULL,
    status              text NOT NULL,
    provider            text,
    provider_message_id text,
    attempts            integer NOT NULL DEFAULT 0,
    last_error          text,
    sent_at             timestamptz,
    delivered_at        timestamptz,
    updated_at          timestamptz NOT NULL DEFAULT now(),
    UNIQUE (notification_id, channel),
    FOREIGN KEY (tenant_id, notification_id) REFERENCES notifications (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX deliveries_tenant_idx ON deliveries (tenant_id, notification_id);

CREATE TABLE inbox (
    tenant_id       text NOT NULL,
    user_id         text NOT NULL,
    notification_id text NOT NULL,
    title           text NOT NULL,
    body            text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    read_at         timestamptz,
    seen_at         timestamptz,
    archived_at     timestamptz,
    PRIMARY KEY (tenant_id, user_id, notification_id),
    FOREIGN KEY (tenant_id, user_id) REFERENCES users (tenant_id, user_id) ON DELETE CASCADE
);
-- Newest-first keyset pagination.
CREATE INDEX inbox_feed_idx ON inbox (tenant_id, user_id, created_at DESC, notification_id DESC);
