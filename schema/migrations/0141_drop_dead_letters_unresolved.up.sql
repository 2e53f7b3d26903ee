-- Drops 0136's dead_letters_unresolved_idx: 0140's
-- dead_letters_unresolved_created_idx has its keys and predicate and
-- created_at besides, and serves every query it served (the partitions' hold
-- check, the prune's "an open dead letter keeps its notification"), those of
-- the release before included. Concurrently, alone in its file: a plain DROP
-- INDEX takes ACCESS EXCLUSIVE on dead_letters.
DROP INDEX CONCURRENTLY IF EXISTS dead_letters_unresolved_idx;
