ALTER TABLE order_handoffs DROP CONSTRAINT order_handoffs_lane_fkey;
DROP INDEX order_handoffs_lane_idx;
ALTER TABLE order_handoffs DROP CONSTRAINT order_handoffs_pkey, ADD PRIMARY KEY (lane_id, seq);
DROP INDEX order_lanes_id_idx;
ALTER TABLE order_lanes DROP CONSTRAINT order_lanes_pkey, ADD PRIMARY KEY (id);
ALTER TABLE order_handoffs ADD CONSTRAINT order_handoffs_lane_id_fkey
    FOREIGN KEY (lane_id) REFERENCES order_lanes (id) ON DELETE CASCADE;
