-- Inbox events keep their item in a short form (docs/retention.md#measured):
-- short keys, no notification_id (the event's own column holds it) and no
-- null fields, about a third of the item's API JSON, which store.InboxEventsAfter
-- rebuilds from it (store.storedInboxItem). Every stored item is rewritten here.
UPDATE inbox_events SET item = jsonb_strip_nulls(jsonb_build_object(
        't', item->'title', 'b', item->'body', 'u', item->'action_url',
        'c', NULLIF(item->'category', '""'::jsonb), 'at', item->'created_at',
        's', NULLIF(item->'sequence', '0'::jsonb),
        'r', item->'read_at', 'n', item->'seen_at', 'a', item->'archived_at'))
    WHERE item ? 'title';
