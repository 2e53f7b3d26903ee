ALTER TABLE inbox_events DROP COLUMN late;
ALTER TABLE inbox_state DROP COLUMN due_seq;
DROP INDEX inbox_category_due_idx;
DROP INDEX inbox_due_idx;
ALTER TABLE inbox DROP COLUMN due_seq;
DROP INDEX notifications_undue_idx;
DROP INDEX notifications_due_seq_idx;
ALTER TABLE notifications DROP COLUMN due_seq, DROP COLUMN due_at;
DROP TABLE due_sequences;
