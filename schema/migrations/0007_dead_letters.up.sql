-- Failure handling: every provider attempt with its outcome (visible in the status
-- API), dead letters for channels whose retries ran out, and per-tenant retry
-- policy overrides.

CREATE TABLE delivery_attempts (
    id              bigserial PRIMARY KEY,
    tenant_id       text NOT NULL,
    notification_id text NOT NULL,
    channel         text NOT NULL,
    attempt         integer NOT NULL,
    provider        text NOT NULL,
    outcome         text NOT NULL CHECK (outcome IN ('accepted', 'retryable', 'permanent')),
    error           text,
    at              timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (tenant_id, notification_id) REFERENCES notifications (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX delivery_attempts_idx ON delivery_attempts (tenant_id, notification_id, channel, id);

-- One dead letter per (notification, channel). payload is the delivery activity's
-- input, so a redrive repeats exactly the same send under the same guard.
CREATE TABLE dead_letters (
    id              bigserial PRIMARY KEY,
    tenant_id       text NOT NULL,
    notification_id text NOT NULL,
    channel         text NOT NULL,
    template_id     text NOT NULL,
    attempts        integer NOT NULL,
    last_error      text NOT NULL,
    payload         jsonb NOT NULL,
    status          text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'redriving', 'redriven')),
    redrives        integer NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, notification_id, channel),
    FOREIGN KEY (tenant_id, notification_id) REFERENCES notifications (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX dead_letters_list_idx ON dead_letters (tenant_id, status, created_at DESC);

ALTER TABLE tenant_settings ADD COLUMN retry_policies jsonb NOT NULL DEFAULT '{}'::jsonb;
