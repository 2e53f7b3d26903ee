package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Data usage (GET /v1/usage, `herald data usage`, docs/erasure.md#usage): rows,
// bytes and the oldest row kept, per table, for one tenant or for all. Every
// number is bounded in cost, never a scan of a big table:
//
//   - a table's total rows and bytes come from the catalog: the planner's
//     reltuples (summed over partitions) and pg_total_relation_size (table,
//     indexes and TOAST, summed over partitions); a table never analysed, or
//     estimated under UsageExactLimit*10 rows, is counted (stopping there);
//   - a tenant's rows are counted exactly up to UsageExactLimit (an index range
//     read that stops there), and above that are the planner's estimate for
//     "tenant_id = $1" (pg_stats: the tenant's share of the table);
//   - a tenant's bytes are its rows × the table's bytes per row (total bytes /
//     total rows): an estimate that assumes the tenant's rows are as wide as
//     the average;
//   - the oldest row is min(time column) for the tenant, which the
//     (tenant_id, time) indexes answer from one end; where no such index exists
//     the query is abandoned after UsageOldestTimeout and the answer says so.

// UsageExactLimit is how many of a tenant's rows of one table are counted
// exactly before the planner's estimate takes over.
const UsageExactLimit = 10_000

// UsageOldestTimeout bounds the oldest-row query of one table.
const UsageOldestTimeout = 250 * time.Millisecond

// usageTimeColumns are the columns that say when a row was written, in the
// order one is picked for a table's "oldest row".
var usageTimeColumns = []string{"created_at", "accepted_at", "at", "first_seen_at", "claimed_at", "opened_at",
	"received_at", "occurred_at", "started_at", "not_before", "updated_at"}

// TableUsage is one table's usage.
type TableUsage struct {
	Table string `json:"table"`
	// Rows is the tenant's rows (all tenants' for the operator's totals);
	// RowsExact says whether it was counted or estimated.
	Rows      int64 `json:"rows"`
	RowsExact bool  `json:"rows_exact"`
	// Bytes is an estimate: Rows × the table's bytes per row.
	Bytes int64 `json:"bytes"`
	// Oldest is when the oldest row kept was written (nil: no rows, or not
	// answered within the bound: OldestUnknown); OldestColumn is the column read.
	Oldest        *time.Time `json:"oldest,omitempty"`
	OldestColumn  string     `json:"oldest_column,omitempty"`
	OldestUnknown bool       `json:"oldest_unknown,omitempty"`
	// TableRows and TableBytes are the whole table's (every tenant's):
	// the catalog's estimate and size.
	TableRows  int64 `json:"table_rows,omitempty"`
	TableBytes int64 `json:"table_bytes,omitempty"`
}

// Usage is what a tenant (or everyone) keeps.
type Usage struct {
	TenantID   string       `json:"tenant_id,omitempty"`
	Tables     []TableUsage `json:"tables"`
	Rows       int64        `json:"rows"`
	Bytes      int64        `json:"bytes"`
	ComputedAt time.Time    `json:"computed_at"`
}

type usageTable struct {
	name, timeCol string
	rows, bytes   int64
	analysed      bool
}

// usageTables reads the catalog: the tables with a tenant_id column (not
// partitions), their time column, their estimated rows and total size.
func (s *Store) usageTables(ctx context.Context) ([]usageTable, error) {
	rows, err := s.db.Query(ctx, `
		SELECT c.relname,
			COALESCE((SELECT a.attname FROM pg_attribute a WHERE a.attrelid = c.oid AND NOT a.attisdropped
				AND a.attname = ANY($1) ORDER BY array_position($1, a.attname::text) LIMIT 1), ''),
			COALESCE(sum(GREATEST(l.reltuples, 0)), 0)::bigint,
			COALESCE(sum(pg_total_relation_size(l.oid)), 0)::bigint,
			COALESCE(bool_and(l.reltuples >= 0), false)
		FROM pg_class c
		-- The table itself, or the leaf partitions of a partitioned one.
		CROSS JOIN LATERAL (
			SELECT c.oid, c.reltuples WHERE c.relkind = 'r'
			UNION ALL
			SELECT p.oid, p.reltuples FROM pg_partition_tree(c.oid) t JOIN pg_class p ON p.oid = t.relid
			WHERE c.relkind = 'p' AND t.isleaf) l
		JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
		WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition
		  AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped)
		GROUP BY c.oid, c.relname
		ORDER BY c.relname`, usageTimeColumns)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (usageTable, error) {
		var t usageTable
		err := r.Scan(&t.name, &t.timeCol, &t.rows, &t.bytes, &t.analysed)
		return t, err
	})
}

// boundedCount counts the rows where holds, stopping at limit+1.
func (s *Store) boundedCount(ctx context.Context, table, where string, limit int, args ...any) (int64, error) {
	var n int64
	err := s.db.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM (SELECT 1 FROM %q WHERE %s LIMIT %d) s`, table, where, limit+1), args...).Scan(&n)
	return n, err
}

// plannerRows is the planner's row estimate for a tenant's rows of table.
func (s *Store) plannerRows(ctx context.Context, table, tenantID string) (int64, error) {
	var plan []byte
	lit := "'" + strings.ReplaceAll(tenantID, "'", "''") + "'"
	if err := s.db.QueryRow(ctx, fmt.Sprintf(`EXPLAIN (FORMAT JSON) SELECT 1 FROM %q WHERE tenant_id = %s`, table, lit)).Scan(&plan); err != nil {
		return 0, err
	}
	var out []struct {
		Plan struct {
			Rows float64 `json:"Plan Rows"`
		} `json:"Plan"`
	}
	if err := json.Unmarshal(plan, &out); err != nil {
		return 0, fmt.Errorf("reading the plan of %s: %w", table, err)
	}
	if len(out) == 0 {
		return 0, fmt.Errorf("reading the plan of %s: no plan", table)
	}
	return int64(out[0].Plan.Rows), nil
}

// oldest is min(col) over the rows where holds, or unknown when it takes
// longer than UsageOldestTimeout (no index answers it).
func (s *Store) oldest(ctx context.Context, table, col, where string, args ...any) (at *time.Time, unknown bool, err error) {
	err = s.InTx(ctx, func(tx *Store) error {
		if _, err := tx.db.Exec(ctx, fmt.Sprintf(`SET LOCAL statement_timeout = %d`, UsageOldestTimeout.Milliseconds())); err != nil {
			return err
		}
		return tx.db.QueryRow(ctx, fmt.Sprintf(`SELECT min(%q)::timestamptz FROM %q WHERE %s`, col, table, where), args...).Scan(&at)
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "57014" { // query_canceled: the timeout
		return nil, true, nil
	}
	return at, false, err
}

// TenantUsage is the tenant's usage of every table with a tenant_id column.
func (s *Store) TenantUsage(ctx context.Context, tenantID string) (Usage, error) {
	tables, err := s.usageTables(ctx)
	if err != nil {
		return Usage{}, err
	}
	u := Usage{TenantID: tenantID, ComputedAt: time.Now().UTC()}
	for _, t := range tables {
		tu, err := s.tableUsage(ctx, t, `tenant_id = $1`, tenantID)
		if err != nil {
			return Usage{}, err
		}
		if tu.RowsExact && tu.Rows == UsageExactLimit+1 {
			est, err := s.plannerRows(ctx, t.name, tenantID)
			if err != nil {
				return Usage{}, err
			}
			tu.Rows, tu.RowsExact = max(est, UsageExactLimit+1), false
			tu.Bytes = tu.Rows * bytesPerRow(tu)
		}
		u.Tables = append(u.Tables, tu)
		u.Rows += tu.Rows
		u.Bytes += tu.Bytes
	}
	return u, nil
}

// AllUsage is every table's usage, all tenants together (the operator's).
func (s *Store) AllUsage(ctx context.Context) (Usage, error) {
	tables, err := s.usageTables(ctx)
	if err != nil {
		return Usage{}, err
	}
	u := Usage{ComputedAt: time.Now().UTC()}
	for _, t := range tables {
		tu, err := s.tableUsage(ctx, t, `true`)
		if err != nil {
			return Usage{}, err
		}
		if t.analysed {
			tu.Rows, tu.RowsExact = tu.TableRows, false
		}
		tu.Bytes = tu.TableBytes
		u.Tables = append(u.Tables, tu)
		u.Rows += tu.Rows
		u.Bytes += tu.Bytes
	}
	return u, nil
}

// tableUsage counts one table's rows where holds (exactly, up to
// UsageExactLimit+1), sizes them and finds the oldest.
func (s *Store) tableUsage(ctx context.Context, t usageTable, where string, args ...any) (TableUsage, error) {
	tu := TableUsage{Table: t.name, TableRows: t.rows, TableBytes: t.bytes, OldestColumn: t.timeCol}
	if !t.analysed || t.rows < UsageExactLimit*10 {
		// Never analysed, or small (where the estimate may be stale by a
		// large factor): count it, stopping at 100,000 rows.
		n, err := s.boundedCount(ctx, t.name, "true", UsageExactLimit*10)
		if err != nil {
			return tu, err
		}
		tu.TableRows = max(n, t.rows)
		if n <= UsageExactLimit*10 {
			tu.TableRows = n
		}
	}
	n, err := s.boundedCount(ctx, t.name, where, UsageExactLimit, args...)
	if err != nil {
		return tu, err
	}
	tu.Rows, tu.RowsExact = n, true
	tu.Bytes = tu.Rows * bytesPerRow(tu)
	if t.timeCol != "" && n > 0 {
		tu.Oldest, tu.OldestUnknown, err = s.oldest(ctx, t.name, t.timeCol, where, args...)
		if err != nil {
			return tu, err
		}
	}
	return tu, nil
}

// bytesPerRow is the table's total size over its rows (0 for an empty table).
func bytesPerRow(tu TableUsage) int64 {
	if tu.TableRows <= 0 {
		return 0
	}
	return tu.TableBytes / tu.TableRows
}

// TenantShare is one tenant's estimated share of a table, from the
// planner's statistics (pg_stats' most common tenant_id values).
type TenantShare struct {
	Table    string  `json:"table"`
	TenantID string  `json:"tenant_id"`
	Fraction float64 `json:"fraction"`
	Rows     int64   `json:"rows"`
	Bytes    int64   `json:"bytes"`
}

// TenantShares estimates, per table, the rows and bytes of the tenants the
// statistics name (the most common tenant_id values; a table not analysed
// yet has none): no table is read, only pg_stats.
func (s *Store) TenantShares(ctx context.Context) ([]TenantShare, error) {
	tables, err := s.usageTables(ctx)
	if err != nil {
		return nil, err
	}
	byName := map[string]usageTable{}
	for _, t := range tables {
		byName[t.name] = t
	}
	rows, err := s.db.Query(ctx, `
		SELECT tablename, v, f FROM pg_stats, unnest(most_common_vals::text::text[], most_common_freqs) AS m(v, f)
		WHERE schemaname = 'public' AND attname = 'tenant_id' AND most_common_vals IS NOT NULL
		ORDER BY tablename, f DESC`)
	if err != nil {
		return nil, err
	}
	var out []TenantShare
	for rows.Next() {
		var sh TenantShare
		if err := rows.Scan(&sh.Table, &sh.TenantID, &sh.Fraction); err != nil {
			rows.Close()
			return nil, err
		}
		t, ok := byName[sh.Table]
		if !ok { // a partition: its parent is listed
			continue
		}
		sh.Rows = int64(sh.Fraction * float64(t.rows))
		sh.Bytes = int64(sh.Fraction * float64(t.bytes))
		out = append(out, sh)
	}
	rows.Close()
	return out, rows.Err()
}
