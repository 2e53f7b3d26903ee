-- The tenant-first key rule (docs/scaling.md) for the order lanes (0080):
-- their keys lead with tenant_id and the hand-offs reference their lane by
-- (tenant_id, lane_id). The ids stay unique (a global sequence); the lookups
-- by lane id alone (store.ClaimOrderHandoffs, ReleaseOrderHandoff, the
-- prune) keep indexes of their own. TestTenantFirstKeys reads the catalog.
ALTER TABLE order_handoffs DROP CONSTRAINT order_handoffs_lane_id_fkey;
ALTER TABLE order_lanes DROP CONSTRAINT order_lanes_pkey, ADD PRIMARY KEY (tenant_id, id);
CREATE INDEX order_lanes_id_idx ON order_lanes (id);
ALTER TABLE order_handoffs DROP CONSTRAINT order_handoffs_pkey, ADD PRIMARY KEY (tenant_id, lane_id, seq);
CREATE INDEX order_handoffs_lane_idx ON order_handoffs (lane_id, seq);
ALTER TABLE order_handoffs ADD CONSTRAINT order_handoffs_lane_fkey
    FOREIGN KEY (tenant_id, lane_id) REFERENCES order_lanes (tenant_id, id) ON DELETE CASCADE;
