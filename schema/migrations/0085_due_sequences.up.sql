-- The per-user due order (docs/inbox.md#feed-order): every notification gets a
-- sequence number when it becomes due (when its run records it, or at send_at
-- for a scheduled one; a campaign recipient when its batch writes it), gap-free
-- per (tenant, user), and the in-app feed lists by it. store.AssignDue and
-- store.InsertCampaignNotifications assign it; store.insertInboxItems copies it
-- onto the inbox row.

-- The user's last assigned due sequence. Its row lock, taken in the assigning
-- transaction, serialises one user's assignments only. No foreign key to users:
-- a notification accepted just before its user was deleted still records, and
-- the numbers of a user id never restart (so never repeat).
CREATE TABLE due_sequences (
    tenant_id text   NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    user_id   text   NOT NULL,
    seq       bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, user_id)
);

-- due_at: when the notification becomes due (accepted_at, send_at, the campaign
-- batch's time); due_seq: its number once due (NULL before).
ALTER TABLE notifications ADD COLUMN due_at timestamptz, ADD COLUMN due_seq bigint;
CREATE UNIQUE INDEX notifications_due_seq_idx ON notifications (tenant_id, user_id, due_seq) WHERE due_seq IS NOT NULL;
-- The not-yet-numbered notifications of a user (scheduled ones, mostly): an
-- assignment numbers those due before it first.
CREATE INDEX notifications_undue_idx ON notifications (tenant_id, user_id, due_at) WHERE due_seq IS NULL AND due_at IS NOT NULL;

-- The feed lists by due_seq, newest first (0: written before due sequences).
ALTER TABLE inbox ADD COLUMN due_seq bigint NOT NULL DEFAULT 0;
CREATE INDEX inbox_due_idx ON inbox (tenant_id, user_id, due_seq DESC, notification_id DESC);
CREATE INDEX inbox_category_due_idx ON inbox (tenant_id, user_id, category, due_seq DESC, notification_id DESC);

-- The highest due_seq in the user's inbox: an item written below it is late
-- (its created event says so, and where it goes).
ALTER TABLE inbox_state ADD COLUMN due_seq bigint NOT NULL DEFAULT 0;
ALTER TABLE inbox_events ADD COLUMN late boolean NOT NULL DEFAULT false;

-- Existing notifications are numbered in accept order (scheduled ones still
-- waiting get theirs when due), and their inbox rows carry the numbers.
UPDATE notifications n SET due_at = n.accepted_at, due_seq = x.rn
FROM (SELECT tenant_id, id, row_number() OVER (PARTITION BY tenant_id, user_id ORDER BY accepted_at, id) AS rn
      FROM notifications WHERE status <> 'scheduled') x
WHERE n.tenant_id = x.tenant_id AND n.id = x.id;
INSERT INTO due_sequences (tenant_id, user_id, seq)
SELECT tenant_id, user_id, max(due_seq) FROM notifications WHERE due_seq IS NOT NULL GROUP BY tenant_id, user_id;
UPDATE inbox i SET due_seq = n.due_seq FROM notifications n
WHERE n.tenant_id = i.tenant_id AND n.id = i.notification_id AND n.due_seq IS NOT NULL;
UPDATE inbox_state s SET due_seq = x.m FROM (SELECT tenant_id, user_id, max(due_seq) AS m FROM inbox GROUP BY tenant_id, user_id) x
WHERE s.tenant_id = x.tenant_id AND s.user_id = x.user_id;
