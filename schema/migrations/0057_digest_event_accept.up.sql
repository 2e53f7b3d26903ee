-- Events of a flow whose first step is a digest are accepted without a
-- workflow of their own (docs/digests.md, "Accepting a digest event"): the
-- API writes the event's rows in one transaction, then signals the digest.

-- Layer 1 for those events: one row per tenant and dedup key, holding the
-- notification id of the event that owns the key until dedup_until. A second
-- event with the key inside the window finds the row (a duplicate); after the
-- window the row is taken over by the next event (store.AcceptDigestEvent).
CREATE TABLE digest_event_keys (
    tenant_id       text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    key_hash        text NOT NULL,
    notification_id text NOT NULL,
    dedup_until     timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, key_hash)
);

-- What the sweeper needs to signal an event's digest again after a crash (or a
-- Temporal error) between the row's commit and its signal
-- (store.OverdueDigests): the flow version, the user and the rendered key.
-- NULL on rows an event's own run writes (that run signals, and retries the
-- signal, itself).
ALTER TABLE digest_events
    ADD COLUMN flow_id      text,
    ADD COLUMN flow_version integer,
    ADD COLUMN user_id      text,
    ADD COLUMN key          text;
