-- Lookups the status view and the open-digests list make (docs/digests.md).

-- The status view joins an event's digest to the digest's own run
-- (store.digestMembership reads flow_runs by (tenant_id, digest_id)).
CREATE INDEX flow_runs_digest_idx ON flow_runs (tenant_id, digest_id) WHERE digest_id IS NOT NULL;

-- GET /v1/users/{user_id}/digests pages a user's open digests by (flow, key)
-- (store.OpenDigests); this replaces digests_user_idx, its prefix.
CREATE INDEX digests_user_open_idx ON digests (tenant_id, user_id, flow_id, key) WHERE status = 'open';
DROP INDEX digests_user_idx;
