DROP INDEX deliveries_campaign_idx;
ALTER TABLE deliveries DROP COLUMN campaign_id;
