-- Campaigns (docs/campaigns.md): one row per campaign, the audiences a campaign sends to
-- (uploaded recipient lists, API-managed topics, or every user), and the
-- per-recipient work a campaign still owes (quiet-hours deferrals and retries).
-- Each recipient's message is an ordinary notifications row (with campaign_id
-- set) plus one deliveries row per channel: the Layer-2 guard is the same
-- unique (notification_id, channel) for a campaign as for a single send.

-- Recipient lists: uploaded (CSV / NDJSON) or written by the API for an inline
-- audience (kind 'inline', not listed by GET /v1/lists).
CREATE TABLE recipient_lists (
    tenant_id     text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id            text NOT NULL,
    name          text NOT NULL,
    kind          text NOT NULL DEFAULT 'uploaded',
    line_count    bigint NOT NULL DEFAULT 0,
    member_count  bigint NOT NULL DEFAULT 0,
    unknown_count bigint NOT NULL DEFAULT 0,
    -- A few of the unknown user ids, for the summary.
    unknown_sample text[] NOT NULL DEFAULT '{}',
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX recipient_lists_page_idx ON recipient_lists (tenant_id, kind, created_at DESC, id DESC);

-- Members are keyed by user id: the campaign pages them by keyset (user_id).
-- Unknown users stay here (the summary counts them); the campaign skips them.
CREATE TABLE recipient_list_members (
    tenant_id text NOT NULL,
    list_id   text NOT NULL,
    user_id   text NOT NULL,
    -- Per-recipient data, merged over the campaign's (NULL: none).
    data      jsonb,
    PRIMARY KEY (tenant_id, list_id, user_id),
    FOREIGN KEY (tenant_id, list_id) REFERENCES recipient_lists (tenant_id, id) ON DELETE CASCADE
);

CREATE TABLE topics (
    tenant_id  text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    topic      text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, topic)
);

CREATE TABLE topic_subscribers (
    tenant_id  text NOT NULL,
    topic      text NOT NULL,
    user_id    text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, topic, user_id),
    FOREIGN KEY (tenant_id, topic) REFERENCES topics (tenant_id, topic) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, user_id) REFERENCES users (tenant_id, user_id) ON DELETE CASCADE
);

CREATE TABLE campaigns (
    tenant_id        text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id               text NOT NULL,
    workflow_id      text NOT NULL,
    template_id      text NOT NULL,
    template_version integer NOT NULL,
    category         text NOT NULL DEFAULT '',
    channels         text[] NOT NULL,
    data             jsonb NOT NULL DEFAULT '{}',
    audience_kind    text NOT NULL,
    audience_ref     text NOT NULL DEFAULT '',
    audience_size    bigint,
    unknown_users    bigint NOT NULL DEFAULT 0,
    rate_per_second  double precision NOT NULL DEFAULT 0,
    status           text NOT NULL,
    send_at          timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz,
    finished_at      timestamptz,
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX campaigns_page_idx ON campaigns (tenant_id, created_at DESC, id DESC);

-- A campaign recipient's notification names its campaign; the campaign's counts
-- are its notifications' deliveries, grouped.
ALTER TABLE notifications ADD COLUMN campaign_id text;
CREATE INDEX notifications_campaign_idx ON notifications (tenant_id, campaign_id) WHERE campaign_id IS NOT NULL;

-- Work a campaign still owes a recipient's channel: a quiet-hours deferral (due
-- at the window's end) or a retry after a failed provider call (due after the
-- backoff). The campaign workflow drains the due rows in batches.
CREATE TABLE campaign_pending (
    tenant_id       text NOT NULL,
    campaign_id     text NOT NULL,
    user_id         text NOT NULL,
    channel         text NOT NULL,
    notification_id text NOT NULL,
    due_at          timestamptz NOT NULL,
    attempt         integer NOT NULL DEFAULT 1,
    reason          text NOT NULL,
    last_error      text,
    PRIMARY KEY (tenant_id, campaign_id, user_id, channel),
    FOREIGN KEY (tenant_id, campaign_id) REFERENCES campaigns (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX campaign_pending_due_idx ON campaign_pending (tenant_id, campaign_id, due_at);
