ALTER TABLE tenant_settings DROP COLUMN ordering_max_hold_ms;
DROP TABLE order_handoffs;
DROP TABLE order_lanes;
