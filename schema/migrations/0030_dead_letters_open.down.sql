DROP INDEX IF EXISTS dead_letters_open_idx;
