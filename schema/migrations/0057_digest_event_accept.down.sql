ALTER TABLE digest_events DROP COLUMN key, DROP COLUMN user_id, DROP COLUMN flow_version, DROP COLUMN flow_id;
DROP TABLE digest_event_keys;
