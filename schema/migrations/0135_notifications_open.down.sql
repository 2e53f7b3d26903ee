DROP INDEX notifications_open_idx;
