UPDATE inbox_events SET item = jsonb_build_object(
        'notification_id', notification_id, 'title', item->'t', 'body', item->'b', 'action_url', item->'u',
        'category', COALESCE(item->'c', '""'::jsonb), 'created_at', item->'at', 'sequence', COALESCE(item->'s', '0'::jsonb),
        'read_at', item->'r', 'seen_at', item->'n', 'archived_at', item->'a')
    WHERE item ? 't';
