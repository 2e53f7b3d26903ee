package store

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
)

// Removing a tenant (`herald tenant delete`, docs/erasure.md#removing-a-tenant):
// every row of every table with a tenant_id column goes, a bounded batch per
// statement, children before the tables they reference (a batch of parents
// would otherwise cascade to all their children in one transaction), the
// tenants row last. The tables are read from the catalog, so a table added
// later is covered without a change here; nothing relies on a primary key's
// name (rows are addressed by (tableoid, ctid)), so partitioned tables work too.

// TenantTable is one table holding tenants' rows, in the order a removal
// empties them.
type TenantTable struct {
	Name string
	// Key is a prefix of the tenant's rows in a table with no tenant_id
	// column whose key column names the tenant ("" for tenant_id tables).
	Key string
}

// keyedTenantTables are the tables without a tenant_id column that hold a
// tenant's rows under a key naming it (the limiter's buckets and quotas).
var keyedTenantTables = []string{"rate_limit_buckets", "rate_limit_quotas"}

// TenantTables lists the tables holding tenants' rows in removal order: every
// table of the public schema with a tenant_id column (not a partition: its
// parent covers it), ordered so that a table comes before every table it
// references by a foreign key; then the keyed limiter tables.
func (s *Store) TenantTables(ctx context.Context) ([]TenantTable, error) {
	rows, err := s.db.Query(ctx, `
		SELECT c.relname FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
		JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped
		WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition
		ORDER BY c.relname`)
	if err != nil {
		return nil, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	rows, err = s.db.Query(ctx, `
		SELECT c.relname, p.relname FROM pg_constraint f
		JOIN pg_class c ON c.oid = f.conrelid JOIN pg_class p ON p.oid = f.confrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
		WHERE f.contype = 'f' AND f.conrelid <> f.confrelid AND NOT c.relispartition`)
	if err != nil {
		return nil, err
	}
	refs := map[string][]string{} // child → parents
	for rows.Next() {
		var child, parent string
		if err := rows.Scan(&child, &parent); err != nil {
			rows.Close()
			return nil, err
		}
		refs[child] = append(refs[child], parent)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// Children first: a table is emitted once every table referencing it was.
	referencedBy := map[string]int{}
	for child, parents := range refs {
		if !slices.Contains(names, child) {
			continue
		}
		for _, p := range parents {
			referencedBy[p]++
		}
	}
	var out []TenantTable
	done := map[string]bool{}
	for len(done) < len(names) {
		progressed := false
		for _, n := range names {
			if done[n] || referencedBy[n] > 0 {
				continue
			}
			done[n], progressed = true, true
			out = append(out, TenantTable{Name: n})
			for _, p := range refs[n] {
				referencedBy[p]--
			}
		}
		if !progressed {
			return nil, fmt.Errorf("tenant tables: foreign keys form a cycle among %v", names)
		}
	}
	// tenants has no tenant_id column; it is removed last, by RemoveTenantRow.
	for _, k := range keyedTenantTables {
		out = append(out, TenantTable{Name: k, Key: "tenant"})
	}
	return out, nil
}

// DeleteTenantBatch deletes at most batch of the tenant's rows from the table
// and returns how many it deleted (fewer than batch: the table is empty of
// the tenant).
func (s *Store) DeleteTenantBatch(ctx context.Context, t TenantTable, tenantID string, batch int) (int64, error) {
	where := `tenant_id = $1`
	arg := tenantID
	if t.Key != "" {
		// The limiter's keys end with the tenant id ("tenant-day:t_…",
		// "<route>:t_…"); a tenant id is t_ and 16 hex digits, so no other
		// tenant's key ends with it.
		where, arg = `key LIKE '%' || $1 OR key LIKE '%' || $1 || ':%'`, tenantID
	}
	tag, err := s.db.Exec(ctx, fmt.Sprintf(`
		DELETE FROM %[1]q WHERE (tableoid, ctid) IN (SELECT tableoid, ctid FROM %[1]q WHERE %[2]s LIMIT $2)`, t.Name, where),
		arg, batch)
	if err != nil {
		return 0, fmt.Errorf("deleting the tenant's rows of %s: %w", t.Name, err)
	}
	return tag.RowsAffected(), nil
}

// RevokeTenantKeys revokes every API key of the tenant (the first step of a
// removal: no new work arrives while its rows go).
func (s *Store) RevokeTenantKeys(ctx context.Context, tenantID string) (int64, error) {
	tag, err := s.db.Exec(ctx, `UPDATE api_keys SET revoked_at = now() WHERE tenant_id = $1 AND revoked_at IS NULL`, tenantID)
	return tag.RowsAffected(), err
}

// RemoveTenantRow deletes the tenants row itself (the last step: what the
// cascade still finds is only what arrived during the removal).
func (s *Store) RemoveTenantRow(ctx context.Context, tenantID string) (int64, error) {
	tag, err := s.db.Exec(ctx, `DELETE FROM tenants WHERE id = $1`, tenantID)
	return tag.RowsAffected(), err
}

// RedrivingDeadLetters lists the ids of the tenant's dead letters being
// redriven (each has a redrive workflow open).
func (s *Store) RedrivingDeadLetters(ctx context.Context, tenantID string) ([]int64, error) {
	rows, err := s.db.Query(ctx, `SELECT id FROM dead_letters WHERE tenant_id = $1 AND status = $2`, tenantID, DeadLetterRedriving)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}
