-- Campaigns and list uploads under the operator's limits (docs/campaigns.md,
-- "Limits"), and why a campaign failed.
--
-- tenant_limits gains three operator-only caps (0: the server default,
-- HERALD_CAMPAIGN_MAX_AUDIENCE, HERALD_CAMPAIGN_MAX_CONCURRENT,
-- HERALD_LIST_MAX_BYTES): the largest audience one campaign may send to, how many
-- of the tenant's campaigns may be scheduled, running or paused at once
-- (store.CreateCampaign), and the largest list upload (POST /v1/lists). Only
-- `herald tenant limits` and the operator API write them (store.PutTenantLimits).
--
-- campaigns gains failure_reason and failure_message (a failed campaign says why:
-- its daily quota, its audience over the cap, a batch that failed for good, or a
-- workflow that ended without finishing it; store.FailCampaign) and quota_day:
-- the UTC day the campaign's audience was reserved on against the tenant's daily
-- quota (activities.CampaignStart), so a retried start never reserves twice.
ALTER TABLE tenant_limits
    ADD COLUMN max_audience_size        bigint NOT NULL DEFAULT 0 CHECK (max_audience_size >= 0),
    ADD COLUMN max_concurrent_campaigns integer NOT NULL DEFAULT 0 CHECK (max_concurrent_campaigns >= 0),
    ADD COLUMN max_list_bytes           bigint NOT NULL DEFAULT 0 CHECK (max_list_bytes >= 0);

ALTER TABLE campaigns
    ADD COLUMN failure_reason  text,
    ADD COLUMN failure_message text,
    ADD COLUMN quota_day       date;

-- The tenant's unfinished campaigns, counted against max_concurrent_campaigns on
-- every create (and reconciled with Temporal when the cap is reached).
CREATE INDEX campaigns_active_idx ON campaigns (tenant_id) WHERE status IN ('scheduled', 'running', 'paused');
