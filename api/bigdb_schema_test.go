package api_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// bigKeys is what bigLoader takes off the notification tables before it
// COPYs into them and puts back after, read from the catalog: their indexes,
// primary keys and unique (and exclusion) constraints, on the partitioned
// parents and on every partition, and every foreign key from or to them
// (an insert checks each row against a foreign key, and one that references
// a unique constraint would have to go with it). A COPY into tables without
// them writes only the heap; building each index once, by a sort, is many
// times cheaper than inserting every row into every index.
//
// They are put back as pg_dump restores a partitioned table: each
// partition's own indexes and constraints under their own names (the
// heavy part, two at a time), the parents' ON ONLY, each partition's
// attached to its parent's (ALTER INDEX … ATTACH PARTITION: no build),
// then the foreign keys (one validating scan each).
type bigKeys struct {
	rels    []uint32 // the tables, parents and partitions
	fks     []bigKey // the foreign keys (the parent's only, on a partitioned table)
	parents []bigKey // the partitioned parents' indexes and constraints (ON ONLY)
	leaves  []bigKey // every other table's: the ones that are built
	attach  []string // ALTER INDEX … ATTACH PARTITION …
}

type bigKey struct {
	rel, name, drop, create string
	top                     bool // not attached to a parent's: dropping it drops its partitions' too
}

// bigRelations are the oids of tables and every partition of them.
func bigRelations(ctx context.Context, pool *pgxpool.Pool, tables []string) ([]uint32, error) {
	rows, err := pool.Query(ctx, `SELECT DISTINCT r FROM unnest($1::text[]) n,
		LATERAL (SELECT n::regclass::oid AS r UNION ALL SELECT relid::oid FROM pg_partition_tree(n::regclass)) t`, tables)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[uint32])
}

// bigSchemaDefs is every index and constraint definition of the relations
// (and foreign keys to them), with what it is attached to, sorted: equal
// before and after the load if the load put back the real schema.
func bigSchemaDefs(ctx context.Context, pool *pgxpool.Pool, rels []uint32) ([]string, error) {
	rows, err := pool.Query(ctx, `
		SELECT format('%s: %s%s%s', i.indrelid::regclass, pg_get_indexdef(i.indexrelid),
			CASE WHEN i.indisvalid AND i.indisready THEN '' ELSE ' (not valid)' END, ' attached to ' || p.inhparent::regclass::text)
		FROM pg_index i LEFT JOIN pg_inherits p ON p.inhrelid = i.indexrelid
		WHERE i.indrelid = ANY($1)
		UNION ALL
		SELECT format('%s: CONSTRAINT %s %s%s (local %s, inherited %s, index %s)%s', c.conrelid::regclass, quote_ident(c.conname), pg_get_constraintdef(c.oid),
			CASE WHEN c.convalidated THEN '' ELSE ' (not validated)' END, c.conislocal, c.coninhcount, NULLIF(c.conindid, 0)::regclass,
			' of ' || pc.conrelid::regclass::text || ' ' || quote_ident(pc.conname))
		FROM pg_constraint c LEFT JOIN pg_constraint pc ON pc.oid = c.conparentid
		WHERE c.conrelid = ANY($1) OR c.confrelid = ANY($1)`, rels)
	if err != nil {
		return nil, err
	}
	defs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	slices.Sort(defs)
	return defs, err
}

// readBigKeys reads what to drop and how to put it back.
func readBigKeys(ctx context.Context, pool *pgxpool.Pool, tables []string) (*bigKeys, error) {
	rels, err := bigRelations(ctx, pool, tables)
	if err != nil {
		return nil, err
	}
	k := &bigKeys{rels: rels}
	// Foreign keys from or to the tables: the top ones (a partitioned
	// table's partitions inherit its own, and so do a referenced
	// partitioned table's partitions).
	rows, err := pool.Query(ctx, `
		SELECT c.conrelid::regclass::text, quote_ident(c.conname), pg_get_constraintdef(c.oid)
		FROM pg_constraint c
		WHERE c.contype = 'f' AND c.conparentid = 0 AND (c.conrelid = ANY($1) OR c.confrelid = ANY($1))
		ORDER BY 1, 2`, rels)
	if err != nil {
		return nil, err
	}
	k.fks, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (bigKey, error) {
		var b bigKey
		var def string
		err := r.Scan(&b.rel, &b.name, &def)
		b.drop = fmt.Sprintf("ALTER TABLE %s DROP CONSTRAINT %s", b.rel, b.name)
		b.create, b.top = fmt.Sprintf("ALTER TABLE %s ADD CONSTRAINT %s %s", b.rel, b.name, def), true
		return b, err
	})
	if err != nil {
		return nil, err
	}
	// Indexes, each with the constraint it backs if any (a primary key,
	// unique or exclusion constraint is put back as a constraint: that
	// makes its index, under the constraint's name) and the index it is
	// attached to.
	rows, err = pool.Query(ctx, `
		SELECT i.indrelid::regclass::text, i.indexrelid::regclass::text, t.relkind = 'p', pg_get_indexdef(i.indexrelid),
			COALESCE(quote_ident(c.conname), ''), COALESCE(pg_get_constraintdef(c.oid), ''), COALESCE(p.inhparent::regclass::text, '')
		FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid
		LEFT JOIN pg_constraint c ON c.conindid = i.indexrelid AND c.conrelid = i.indrelid AND c.contype IN ('p', 'u', 'x')
		LEFT JOIN pg_inherits p ON p.inhrelid = i.indexrelid
		WHERE i.indrelid = ANY($1)
		ORDER BY 1, 2`, rels)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var rel, index, def, con, condef, parent string
		var partitioned bool
		if err := rows.Scan(&rel, &index, &partitioned, &def, &con, &condef, &parent); err != nil {
			return nil, err
		}
		b := bigKey{rel: rel, name: index, create: def, top: parent == ""}
		b.drop = "DROP INDEX " + index
		if con != "" {
			only := ""
			if partitioned {
				only = "ONLY "
			}
			b.drop = fmt.Sprintf("ALTER TABLE %s DROP CONSTRAINT %s", rel, con)
			b.create = fmt.Sprintf("ALTER TABLE %s%s ADD CONSTRAINT %s %s", only, rel, con, condef)
		}
		if partitioned {
			k.parents = append(k.parents, b)
		} else {
			k.leaves = append(k.leaves, b)
		}
		if parent != "" {
			k.attach = append(k.attach, fmt.Sprintf("ALTER INDEX %s ATTACH PARTITION %s", parent, index))
		}
	}
	return k, rows.Err()
}

// drop drops them: the foreign keys, then every index and constraint not
// attached to a parent's (that drops its partitions' with it).
func (k *bigKeys) drop(ctx context.Context, pool *pgxpool.Pool) error {
	for _, list := range [][]bigKey{k.fks, k.parents, k.leaves} {
		for _, b := range list {
			if !b.top {
				continue
			}
			if _, err := pool.Exec(ctx, b.drop); err != nil {
				return fmt.Errorf("%s: %w", b.drop, err)
			}
		}
	}
	return nil
}

// bigBuildTimes are the put-back's phases.
type bigBuildTimes struct {
	build, attach, fks time.Duration
}

// create puts them back: the partitions' (and unpartitioned tables') indexes
// and constraints on conns connections at once, each session with
// maintenance_work_mem 1 GB and workers parallel maintenance workers; then
// the parents', the attachments, the foreign keys.
func (k *bigKeys) create(ctx context.Context, pool *pgxpool.Pool, conns, workers int) (bigBuildTimes, error) {
	var bt bigBuildTimes
	settings := []string{`SET maintenance_work_mem = '1GB'`, fmt.Sprintf(`SET max_parallel_maintenance_workers = %d`, workers)}
	t0 := time.Now()
	// The biggest tables' first, so that the builders end together.
	leaves := slices.Clone(k.leaves)
	size := map[string]int64{}
	for _, b := range leaves {
		if _, ok := size[b.rel]; !ok {
			var n int64
			if err := pool.QueryRow(ctx, `SELECT pg_relation_size($1::regclass)`, b.rel).Scan(&n); err != nil {
				return bt, err
			}
			size[b.rel] = n
		}
	}
	slices.SortStableFunc(leaves, func(a, b bigKey) int { return cmp.Compare(size[b.rel], size[a.rel]) })
	todo := make(chan bigKey)
	go func() {
		defer close(todo)
		for _, b := range leaves {
			select {
			case todo <- b:
			case <-ctx.Done():
				return
			}
		}
	}()
	var mu sync.Mutex
	var failed error
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fail := func(err error) {
				mu.Lock()
				if failed == nil {
					failed = err
				}
				mu.Unlock()
			}
			c, err := pool.Acquire(ctx)
			if err != nil {
				fail(err)
				return
			}
			defer c.Release()
			defer c.Exec(context.Background(), `RESET ALL`) //nolint:errcheck // a pooled session's settings back to the defaults
			for _, s := range settings {
				if _, err := c.Exec(ctx, s); err != nil {
					fail(err)
					return
				}
			}
			for b := range todo {
				mu.Lock()
				stop := failed != nil
				mu.Unlock()
				if stop {
					continue
				}
				if _, err := c.Exec(ctx, b.create); err != nil {
					fail(fmt.Errorf("%s: %w", b.create, err))
				}
			}
		}()
	}
	wg.Wait()
	if failed != nil {
		return bt, failed
	}
	bt.build = time.Since(t0)
	t1 := time.Now()
	for _, s := range append(k.parentStatements(), k.attach...) {
		if _, err := pool.Exec(ctx, s); err != nil {
			return bt, fmt.Errorf("%s: %w", s, err)
		}
	}
	bt.attach = time.Since(t1)
	t2 := time.Now()
	c, err := pool.Acquire(ctx)
	if err != nil {
		return bt, err
	}
	defer c.Release()
	defer c.Exec(context.Background(), `RESET ALL`) //nolint:errcheck // as above
	for _, s := range append(settings, k.fkStatements()...) {
		if _, err := c.Exec(ctx, s); err != nil {
			return bt, fmt.Errorf("%s: %w", s, err)
		}
	}
	bt.fks = time.Since(t2)
	return bt, nil
}

func (k *bigKeys) parentStatements() []string {
	var out []string
	for _, b := range k.parents {
		out = append(out, b.create)
	}
	return out
}

func (k *bigKeys) fkStatements() []string {
	var out []string
	for _, b := range k.fks {
		out = append(out, b.create)
	}
	return out
}
