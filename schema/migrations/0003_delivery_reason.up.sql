-- Why a channel ended as it did, in words a tenant can act on: a suppression reason
-- (no_address, opted_out_channel, quiet_hours, ...) or the provider's refusal.
ALTER TABLE deliveries ADD COLUMN reason text;
