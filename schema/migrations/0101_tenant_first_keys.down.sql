ALTER TABLE webhook_attempts DROP CONSTRAINT webhook_attempts_message_fkey;
DROP INDEX webhook_attempts_message_idx;
CREATE INDEX webhook_attempts_message_idx ON webhook_attempts (message_id);
ALTER TABLE webhook_attempts DROP CONSTRAINT webhook_attempts_pkey, ADD PRIMARY KEY (id);
ALTER TABLE webhook_messages DROP CONSTRAINT webhook_messages_msg_id_key, ADD CONSTRAINT webhook_messages_msg_id_key UNIQUE (msg_id);
ALTER TABLE webhook_messages DROP CONSTRAINT webhook_messages_pkey, ADD PRIMARY KEY (id);
ALTER TABLE webhook_attempts ADD CONSTRAINT webhook_attempts_message_id_fkey
    FOREIGN KEY (message_id) REFERENCES webhook_messages (id) ON DELETE CASCADE;
ALTER TABLE digest_events DROP CONSTRAINT digest_events_pkey, ADD PRIMARY KEY (seq);
ALTER TABLE sandbox_messages DROP CONSTRAINT sandbox_messages_pkey, ADD PRIMARY KEY (id);
ALTER TABLE provider_receipts DROP CONSTRAINT provider_receipts_pkey, ADD PRIMARY KEY (id);
ALTER TABLE dead_letters DROP CONSTRAINT dead_letters_pkey, ADD PRIMARY KEY (id);
