-- Undoes 0155: the item.created events the inbox rows carry go back into
-- inbox_events (in 0121's short item form) before the columns are dropped, so
-- the release before still serves them: only those within the last
-- InboxEventRetention (1000) seqs of their user, as that release would have
-- kept them (it finds a hole only before a page's first event, so an older one
-- brought back would hide the pruned events after it). A created event whose
-- week partition was dropped already (the age prune behind its row) lands in a
-- default partition made for this statement and goes with it.
CREATE TABLE inbox_events_down_0155 PARTITION OF inbox_events DEFAULT;
INSERT INTO inbox_events (tenant_id, user_id, seq, kind, notification_id, item, total, unread, unseen, created_at, late)
SELECT tenant_id, user_id, ev_seq, 'item.created', notification_id,
       jsonb_strip_nulls(jsonb_build_object('t', title, 'b', body, 'u', action_url,
           'c', NULLIF(category, ''), 'at', created_at, 's', NULLIF(due_seq, 0))),
       ev_total, ev_unread, ev_unseen, ev_at, ev_late
FROM inbox i
WHERE i.ev_seq IS NOT NULL
  AND i.ev_seq > (SELECT s.seq FROM inbox_state s WHERE s.tenant_id = i.tenant_id AND s.user_id = i.user_id) - 1000
ON CONFLICT DO NOTHING;
DROP TABLE inbox_events_down_0155;
ALTER TABLE inbox
    DROP COLUMN IF EXISTS ev_late,
    DROP COLUMN IF EXISTS ev_unseen,
    DROP COLUMN IF EXISTS ev_unread,
    DROP COLUMN IF EXISTS ev_total,
    DROP COLUMN IF EXISTS ev_at,
    DROP COLUMN IF EXISTS ev_seq;
