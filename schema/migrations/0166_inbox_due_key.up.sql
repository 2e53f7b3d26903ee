-- The inbox's primary key becomes (tenant_id, user_id, due_seq,
-- notification_id), the feed's order, so one index serves both what the
-- primary key did and what inbox_due_idx did (docs/retention.md#bytes-per-notification:
-- ~190 bytes an inbox item). Step 1 of 4: the new key's unique index, built
-- concurrently (writes go on); 0167 makes it the primary key, 0168 drops
-- inbox_due_idx. A notification has one due number (store.AssignDue), so the
-- key is as unique per notification as before; the in-app guard is the inbox
-- write's existence check under the user's inbox_state row lock
-- (store.insertInboxItems), the key its backstop.
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS inbox_due_key ON inbox (tenant_id, user_id, due_seq, notification_id);
