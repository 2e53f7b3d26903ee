ALTER TABLE delivery_attempts DROP CONSTRAINT delivery_attempts_pkey;
CREATE INDEX delivery_attempts_idx ON delivery_attempts (tenant_id, notification_id, channel, id);
ALTER TABLE delivery_attempts ADD PRIMARY KEY (tenant_id, id, at);

CREATE INDEX inbox_category_due_idx ON inbox (tenant_id, user_id, category, due_seq DESC, notification_id DESC);
CREATE INDEX inbox_category_idx ON inbox (tenant_id, user_id, category, created_at DESC, notification_id DESC);
CREATE INDEX inbox_feed_idx ON inbox (tenant_id, user_id, created_at DESC, notification_id DESC);
