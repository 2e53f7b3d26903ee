-- The accepted attempts carried by deliveries since 0150 drop out of the
-- history (the code before 0150 reads only delivery_attempts).
ALTER TABLE deliveries DROP COLUMN IF EXISTS accepted_attempt;
