-- Tenant status webhooks: endpoints a tenant registers, the messages (events)
-- queued for each endpoint, and every delivery attempt of a message.

CREATE TABLE webhook_endpoints (
    tenant_id       text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id              text NOT NULL,
    url             text NOT NULL,
    description     text NOT NULL DEFAULT '',
    -- event types the endpoint receives; empty: every type
    events          text[] NOT NULL DEFAULT '{}',
    enabled         boolean NOT NULL DEFAULT true,
    -- the signing secret (whsec_...), sealed with HERALD_SECRETS_KEY
    secret_sealed   bytea NOT NULL,
    -- after a rotation the previous secret also signs until previous_until
    previous_sealed bytea,
    previous_until  timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);

-- One message per (endpoint, event). event_key makes emitting idempotent (an
-- activity retried after a crash emits the same key again).
CREATE TABLE webhook_messages (
    id              bigserial PRIMARY KEY,
    tenant_id       text NOT NULL,
    endpoint_id     text NOT NULL,
    msg_id          text NOT NULL UNIQUE,
    event_key       text NOT NULL,
    event_type      text NOT NULL,
    notification_id text NOT NULL,
    payload         jsonb NOT NULL,
    status          text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'dead_lettered')),
    attempts        integer NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (tenant_id, endpoint_id) REFERENCES webhook_endpoints (tenant_id, id) ON DELETE CASCADE,
    UNIQUE (tenant_id, endpoint_id, event_key)
);
CREATE INDEX webhook_messages_pending_idx ON webhook_messages (tenant_id, endpoint_id, id) WHERE status = 'pending';
CREATE INDEX webhook_messages_created_idx ON webhook_messages (tenant_id, endpoint_id, created_at);

CREATE TABLE webhook_attempts (
    id          bigserial PRIMARY KEY,
    tenant_id   text NOT NULL,
    endpoint_id text NOT NULL,
    message_id  bigint NOT NULL REFERENCES webhook_messages (id) ON DELETE CASCADE,
    attempt     integer NOT NULL,
    status_code integer,
    outcome     text NOT NULL CHECK (outcome IN ('delivered', 'failed')),
    error       text,
    duration_ms integer NOT NULL,
    at          timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (tenant_id, endpoint_id) REFERENCES webhook_endpoints (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX webhook_attempts_endpoint_idx ON webhook_attempts (tenant_id, endpoint_id, id DESC);
