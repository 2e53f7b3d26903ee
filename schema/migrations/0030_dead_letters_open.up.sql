-- The herald_dead_letters_open gauge counts open dead letters of every tenant;
-- this partial index makes that count proportional to the open ones only.
CREATE INDEX dead_letters_open_idx ON dead_letters (id) WHERE status = 'open';
