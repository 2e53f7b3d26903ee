-- The tenant-first key rule (docs/scaling.md): every primary key and unique
-- constraint of a per-tenant table starts with tenant_id, and no foreign key
-- joins rows without it, so a distributed PostgreSQL (Citus, distribution
-- column tenant_id) can place every tenant's rows, and enforce every key, on
-- one node. These tables had keys of a bigserial id (or a message id) alone;
-- the ids stay unique (their sequences are global), the keys now lead with the
-- tenant. store.ListWebhookAttempts and store.CloseDigest join and filter by
-- tenant_id with them. TestTenantFirstKeys reads the catalog for the rule.
ALTER TABLE dead_letters DROP CONSTRAINT dead_letters_pkey, ADD PRIMARY KEY (tenant_id, id);
ALTER TABLE provider_receipts DROP CONSTRAINT provider_receipts_pkey, ADD PRIMARY KEY (tenant_id, id);
ALTER TABLE sandbox_messages DROP CONSTRAINT sandbox_messages_pkey, ADD PRIMARY KEY (tenant_id, id);
ALTER TABLE digest_events DROP CONSTRAINT digest_events_pkey, ADD PRIMARY KEY (tenant_id, seq);

ALTER TABLE webhook_attempts DROP CONSTRAINT webhook_attempts_message_id_fkey;
ALTER TABLE webhook_messages DROP CONSTRAINT webhook_messages_pkey, ADD PRIMARY KEY (tenant_id, id);
ALTER TABLE webhook_messages DROP CONSTRAINT webhook_messages_msg_id_key,
    ADD CONSTRAINT webhook_messages_msg_id_key UNIQUE (tenant_id, msg_id);
ALTER TABLE webhook_attempts DROP CONSTRAINT webhook_attempts_pkey, ADD PRIMARY KEY (tenant_id, id);
DROP INDEX webhook_attempts_message_idx;
CREATE INDEX webhook_attempts_message_idx ON webhook_attempts (tenant_id, message_id);
ALTER TABLE webhook_attempts ADD CONSTRAINT webhook_attempts_message_fkey
    FOREIGN KEY (tenant_id, message_id) REFERENCES webhook_messages (tenant_id, id) ON DELETE CASCADE;
