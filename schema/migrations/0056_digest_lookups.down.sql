CREATE INDEX digests_user_idx ON digests (tenant_id, user_id) WHERE status = 'open';
DROP INDEX digests_user_open_idx;
DROP INDEX flow_runs_digest_idx;
