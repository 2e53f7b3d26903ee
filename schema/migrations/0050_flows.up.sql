-- Flows: a tenant's flow definitions, versioned like templates
-- (migration 0004): every PUT /v1/flows/{flow_id} is a new row with the next
-- version, a run is pinned to the version it started with, and a delete marks
-- every version deleted (the latest is no longer found, a given version always
-- is, for the runs still open). store.PutFlow, store.GetFlow, store.ListFlows,
-- store.DeleteFlow; the definition is flows.Definition as JSON. The tenant
-- guide is docs/flows.md.
CREATE TABLE flows (
    tenant_id  text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    flow_id    text NOT NULL,
    version    integer NOT NULL CHECK (version > 0),
    category   text NOT NULL,
    definition jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    deleted_at timestamptz,
    PRIMARY KEY (tenant_id, flow_id, version)
);
