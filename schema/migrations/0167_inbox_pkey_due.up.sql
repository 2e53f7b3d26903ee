-- Step 2 of 4 (0166): the inbox's primary key moves onto the index 0166
-- built: (tenant_id, user_id, due_seq, notification_id). Both actions take
-- the table's ACCESS EXCLUSIVE lock for an instant: dropping a constraint's
-- index, and adopting a built one whose columns are NOT NULL (nothing scanned).
-- The feed (store.ListInbox) and the cap (capInboxSQL) read it backwards for
-- "due_seq DESC, notification_id DESC"; a lookup of one item by notification
-- id reads the user's entries (the inbox cap bounds them: 100 by default).
ALTER TABLE inbox DROP CONSTRAINT inbox_pkey, ADD CONSTRAINT inbox_pkey PRIMARY KEY USING INDEX inbox_due_key;
