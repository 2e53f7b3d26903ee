-- Undoes 0155: the item.created events the inbox rows carry go back into
-- inbox_events (in 0121's short item form) before the columns are dropped, so
-- the release before still serves them.
INSERT INTO inbox_events (tenant_id, user_id, seq, kind, notification_id, item, total, unread, unseen, created_at, late)
SELECT tenant_id, user_id, ev_seq, 'item.created', notification_id,
       jsonb_strip_nulls(jsonb_build_object('t', title, 'b', body, 'u', action_url,
           'c', NULLIF(category, ''), 'at', created_at, 's', NULLIF(due_seq, 0))),
       ev_total, ev_unread, ev_unseen, ev_at, ev_late
FROM inbox WHERE ev_seq IS NOT NULL
ON CONFLICT DO NOTHING;
ALTER TABLE inbox
    DROP COLUMN IF EXISTS ev_late,
    DROP COLUMN IF EXISTS ev_unseen,
    DROP COLUMN IF EXISTS ev_unread,
    DROP COLUMN IF EXISTS ev_total,
    DROP COLUMN IF EXISTS ev_at,
    DROP COLUMN IF EXISTS ev_seq;
