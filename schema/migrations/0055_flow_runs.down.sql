DROP TABLE flow_waiters;
DROP TABLE flow_throttle_claims;
DROP TABLE digests;
DROP TABLE digest_events;
DROP TABLE flow_steps;
DROP TABLE flow_runs;
