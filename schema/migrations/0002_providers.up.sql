-- Real channels: per-tenant provider configuration, users' push tokens, delivery
-- receipts from provider webhooks, and the sandbox provider's record of what it
-- would have sent. Every table carries tenant_id and every query filters by it.

-- One row per (tenant, channel, provider). config holds the non-secret settings
-- (sender address, messaging service, FCM project, webhook public key);
-- secret_ciphertext holds the credentials sealed with AES-256-GCM by
-- internal/secrets (key from HERALD_SECRETS_KEY). It is never returned by the API.
-- priority orders several providers of one channel (lowest first), for failover.
CREATE TABLE provider_configs (
    tenant_id         text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    channel           text NOT NULL CHECK (channel IN ('email', 'sms', 'push')),
    provider          text NOT NULL,
    priority          integer NOT NULL DEFAULT 0,
    enabled           boolean NOT NULL DEFAULT true,
    config            jsonb NOT NULL DEFAULT '{}'::jsonb,
    secret_ciphertext bytea,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, channel, provider)
);

-- A device token belongs to one user of one tenant at a time; registering it again
-- (for another user) moves it.
CREATE TABLE push_tokens (
    tenant_id    text NOT NULL,
    user_id      text NOT NULL,
    token        text NOT NULL,
    platform     text NOT NULL CHECK (platform IN ('android', 'ios', 'web')),
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, token),
    FOREIGN KEY (tenant_id, user_id) REFERENCES users (tenant_id, user_id) ON DELETE CASCADE
);
CREATE INDEX push_tokens_user_idx ON push_tokens (tenant_id, user_id, created_at);

-- Receipts from provider webhooks that name their notification (SendGrid custom_args,
-- Twilio StatusCallback query). Any receipt proves the provider accepted the message:
-- a delivery retry checks here before calling the provider again, which closes the
-- window "provider accepted, worker died before recording it" whenever the receipt
-- arrived first. Duplicated webhook deliveries collapse on the unique index.
CREATE TABLE provider_receipts (
    id                  bigserial PRIMARY KEY,
    tenant_id           text NOT NULL,
    notification_id     text NOT NULL,
    channel             text NOT NULL,
    provider            text NOT NULL,
    provider_message_id text NOT NULL DEFAULT '',
    status              text NOT NULL CHECK (status IN ('accepted', 'sent', 'deferred', 'delivered', 'failed')),
    provider_status     text NOT NULL,
    reason              text,
    event_id            text,
    occurred_at         timestamptz NOT NULL,
    received_at         timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (tenant_id, notification_id) REFERENCES notifications (tenant_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX provider_receipts_dedup_idx ON provider_receipts
    (tenant_id, notification_id, channel, provider, provider_message_id, provider_status, occurred_at);
CREATE INDEX provider_receipts_message_idx ON provider_receipts (provider, provider_message_id);

-- What the sandbox provider would have sent (dev stack, tenants without credentials).
-- Every call is recorded, duplicates included, as a real provider would send them.
CREATE TABLE sandbox_messages (
    id              bigserial PRIMARY KEY,
    tenant_id       text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    notification_id text NOT NULL,
    channel         text NOT NULL,
    idempotency_key text NOT NULL,
    recipient       text NOT NULL,
    subject         text,
    body            text NOT NULL,
    payload         jsonb NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sandbox_messages_tenant_idx ON sandbox_messages (tenant_id, id DESC);
CREATE INDEX sandbox_messages_notification_idx ON sandbox_messages (tenant_id, notification_id);
