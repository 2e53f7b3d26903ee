ALTER TABLE inbox_events DROP COLUMN late;
ALTER TABLE inbox_state DROP COLUMN due_seq;
DROP INDEX inbox_category_due_idx;
DROP INDEX inbox_due_idx;
ALTER TABLE inbox DROP COLUMN due_seq;
DROP TABLE notification_sequences;
DROP TABLE due_sequences;
