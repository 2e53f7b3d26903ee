-- The channels go back onto the rows that left them to their deliveries
-- (canonical order: by name, as the deliveries are listed), then NOT NULL.
UPDATE notifications n SET channels = coalesce(
    (SELECT array_agg(d.channel ORDER BY d.channel) FROM deliveries d
     WHERE d.tenant_id = n.tenant_id AND d.notification_id = n.id AND d.accepted_at = n.accepted_at), '{}')
WHERE n.channels IS NULL;
ALTER TABLE notifications ALTER COLUMN channels SET NOT NULL;
