-- The accepted attempts carried by deliveries since 0156 drop out of the
-- history (the code before 0156 reads only delivery_attempts).
ALTER TABLE deliveries DROP COLUMN IF EXISTS accepted_attempt;
