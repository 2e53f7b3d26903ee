-- The per-user due order (docs/inbox.md#feed-order): every notification gets a
-- number when it becomes due, counting 1, 2, 3, … per (tenant, user) with no gap
-- and no repeat, and the in-app feed lists by it. A notification due at once is
-- numbered by the accept path before its 202 (store.AssignDue; RecordAccepted
-- numbers it if the API could not), a scheduled one when its send_at timer
-- fires (the AssignDue activity), a campaign recipient when its batch writes it
-- (store.InsertCampaignNotifications). store.insertInboxItems copies the number
-- onto the inbox row.

-- The user's last number. Its row lock, held by the numbering statement or
-- transaction, serialises one user's numbering only. No foreign key to users:
-- a notification accepted just before its user was deleted is still numbered,
-- and a user id's numbers never restart (so never repeat).
CREATE TABLE due_sequences (
    tenant_id text   NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    user_id   text   NOT NULL,
    seq       bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, user_id)
);

-- Each notification's number, written once (the accept path numbers a
-- notification before its run has written the notifications row, so the number
-- lives here, keyed like it).
CREATE TABLE notification_sequences (
    tenant_id       text        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    notification_id text        NOT NULL,
    user_id         text        NOT NULL,
    seq             bigint      NOT NULL CHECK (seq > 0),
    assigned_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, notification_id),
    UNIQUE (tenant_id, user_id, seq)
);

-- The feed lists by due_seq, newest first (0: written before due sequences).
ALTER TABLE inbox ADD COLUMN due_seq bigint NOT NULL DEFAULT 0;
CREATE INDEX inbox_due_idx ON inbox (tenant_id, user_id, due_seq DESC, notification_id DESC);
CREATE INDEX inbox_category_due_idx ON inbox (tenant_id, user_id, category, due_seq DESC, notification_id DESC);

-- The highest due_seq in the user's inbox: an item written below it is late
-- (its item.created event says so, and its sequence says where it goes).
ALTER TABLE inbox_state ADD COLUMN due_seq bigint NOT NULL DEFAULT 0;
ALTER TABLE inbox_events ADD COLUMN late boolean NOT NULL DEFAULT false;

-- Existing notifications are numbered in accept order (scheduled ones still
-- waiting get theirs when due), and their inbox rows carry the numbers.
INSERT INTO notification_sequences (tenant_id, notification_id, user_id, seq, assigned_at)
SELECT tenant_id, id, user_id, row_number() OVER (PARTITION BY tenant_id, user_id ORDER BY accepted_at, id), accepted_at
FROM notifications WHERE status <> 'scheduled';
INSERT INTO due_sequences (tenant_id, user_id, seq)
SELECT tenant_id, user_id, max(seq) FROM notification_sequences GROUP BY tenant_id, user_id;
UPDATE inbox i SET due_seq = s.seq FROM notification_sequences s
WHERE s.tenant_id = i.tenant_id AND s.notification_id = i.notification_id;
UPDATE inbox_state s SET due_seq = x.m FROM (SELECT tenant_id, user_id, max(due_seq) AS m FROM inbox GROUP BY tenant_id, user_id) x
WHERE s.tenant_id = x.tenant_id AND s.user_id = x.user_id;
