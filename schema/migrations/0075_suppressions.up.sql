-- The per-tenant suppression list (docs/suppressions.md): email addresses and
-- phone numbers no notification or campaign of the tenant goes to. Rows are added
-- by SendGrid's Event Webhook (a hard bounce, dropped, spamreport, unsubscribe),
-- by Twilio's inbound-message webhook (STOP and its synonyms; START, UNSTOP or YES
-- removes the row) and by the API (PUT / DELETE /v1/suppressions/{address}).
-- Gating reads it before rendering (store.SuppressedChannels for a notification,
-- store.SuppressedAddresses for a campaign batch): a send to a listed address ends
-- `suppressed` with reason `address_suppressed`.
--
-- address is normalised by store.NormalizeAddress: an email address lower-cased,
-- a phone number in E.164 form; channel says which ('email' or 'sms'), so the
-- primary key is also the gate's lookup. The listing pages newest first on
-- (created_at, address).
CREATE TABLE suppressions (
    tenant_id  text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    channel    text NOT NULL CHECK (channel IN ('email', 'sms')),
    address    text NOT NULL,
    reason     text NOT NULL,
    source     text NOT NULL,
    detail     text,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, channel, address)
);
CREATE INDEX suppressions_page_idx ON suppressions (tenant_id, created_at DESC, address DESC);
