-- Templates (versioned), user preferences, tenant-wide defaults and caps, and the
-- per-user cap ledger.

-- Every save is a new version; a notification records the version it was accepted
-- with, so editing a template never changes notifications already accepted.
-- Deleting marks every version deleted but keeps them for those notifications.
CREATE TABLE templates (
    tenant_id   text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    template_id text NOT NULL,
    version     integer NOT NULL CHECK (version > 0),
    category    text NOT NULL,
    critical    boolean NOT NULL DEFAULT false,
    body        jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    deleted_at  timestamptz,
    PRIMARY KEY (tenant_id, template_id, version)
);

CREATE TABLE user_preferences (
    tenant_id   text NOT NULL,
    user_id     text NOT NULL,
    preferences jsonb NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, user_id),
    FOREIGN KEY (tenant_id, user_id) REFERENCES users (tenant_id, user_id) ON DELETE CASCADE
);

-- Tenant-wide settings: preference defaults, per-category caps (at most N per user
-- per rolling 24 h) and the default locale.
CREATE TABLE tenant_settings (
    tenant_id           text PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    preference_defaults jsonb NOT NULL DEFAULT '{}'::jsonb,
    category_caps       jsonb NOT NULL DEFAULT '{}'::jsonb,
    default_locale      text NOT NULL DEFAULT 'en',
    updated_at          timestamptz NOT NULL DEFAULT now()
);

-- One row per notification that counted against a user's category cap. The unique
-- notification key makes a retried claim count once.
CREATE TABLE cap_ledger (
    tenant_id       text NOT NULL,
    user_id         text NOT NULL,
    category        text NOT NULL,
    notification_id text NOT NULL,
    claimed_at      timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, notification_id)
);
CREATE INDEX cap_ledger_window_idx ON cap_ledger (tenant_id, user_id, category, claimed_at);

ALTER TABLE notifications ADD COLUMN template_version integer;
ALTER TABLE notifications ADD COLUMN category text;
