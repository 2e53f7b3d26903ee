DROP INDEX CONCURRENTLY IF EXISTS dead_letters_unresolved_idx;
