-- Restores topic_subscribers → topics (ON DELETE CASCADE). A subscription
-- whose topic row is missing (possible while the constraint was dropped) gets
-- its topic row back first, as the subscribing code would have written it.
INSERT INTO topics (tenant_id, topic)
SELECT DISTINCT s.tenant_id, s.topic FROM topic_subscribers s
WHERE EXISTS (SELECT 1 FROM tenants t WHERE t.id = s.tenant_id)
ON CONFLICT DO NOTHING;
DELETE FROM topic_subscribers s WHERE NOT EXISTS (SELECT 1 FROM topics t WHERE t.tenant_id = s.tenant_id AND t.topic = s.topic);
ALTER TABLE topic_subscribers ADD CONSTRAINT topic_subscribers_tenant_id_topic_fkey
    FOREIGN KEY (tenant_id, topic) REFERENCES topics (tenant_id, topic) ON DELETE CASCADE;
