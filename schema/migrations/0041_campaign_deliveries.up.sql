-- A campaign's deliveries carry its id, so its live counts are one scan of its
-- own deliveries (no join through notifications). Only (tenant_id, campaign_id)
-- is indexed: a status change stays a HOT update.
ALTER TABLE deliveries ADD COLUMN campaign_id text;
CREATE INDEX deliveries_campaign_idx ON deliveries (tenant_id, campaign_id) WHERE campaign_id IS NOT NULL;
