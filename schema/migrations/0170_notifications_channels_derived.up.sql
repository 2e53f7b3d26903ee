-- A notification's channels are its delivery rows' (one per channel, written
-- by the same statement: store.InsertNotification, InsertCampaignNotifications),
-- so the notification row stops repeating them: rows written from now on hold
-- NULL (store.GetNotification reads the channels off the deliveries it lists
-- anyway), ~50 bytes a row for a two-channel text[]
-- (docs/retention.md#bytes-per-notification). Rows written before keep
-- theirs, read as before. Dropping NOT NULL changes the catalog only: no scan,
-- no rewrite, the lock is held for an instant.
ALTER TABLE notifications ALTER COLUMN channels DROP NOT NULL;
