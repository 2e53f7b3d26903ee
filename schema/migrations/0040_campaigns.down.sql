DROP TABLE campaign_pending;
DROP INDEX notifications_campaign_idx;
ALTER TABLE notifications DROP COLUMN campaign_id;
DROP TABLE campaigns;
DROP TABLE topic_subscribers;
DROP TABLE topics;
DROP TABLE recipient_list_members;
DROP TABLE recipient_lists;
