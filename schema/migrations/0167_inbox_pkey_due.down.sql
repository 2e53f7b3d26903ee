-- The primary key goes back to (tenant_id, user_id, notification_id), on the
-- index 0169's down file built concurrently; the due key's index goes with
-- its constraint.
ALTER TABLE inbox DROP CONSTRAINT inbox_pkey, ADD CONSTRAINT inbox_pkey PRIMARY KEY USING INDEX inbox_notification_key;
