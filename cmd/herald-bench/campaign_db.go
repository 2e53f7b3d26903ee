package main

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The database's work per recipient in a -campaign phase. With pg_stat_statements
// (the cluster preloads it: shared_preload_libraries; the bench creates the
// extension in the bench database if it is missing) the counts are exact:
// statements (calls), rows returned or written, WAL bytes, and the statements
// that ran most. Without it, transactions and rows written from
// pg_stat_database, which a backend reports up to a second late (later still
// when it goes idle), so they are approximate. The bench's own queries carry the
// comment "herald-bench" after their first word (pg_stat_statements drops a
// leading comment) and are left out of the statement counts.

const (
	dbSourceStatements = "pg_stat_statements"
	dbSourceDatabase   = "pg_stat_database"
)

// DBCost is one phase's database work per recipient.
type DBCost struct {
	Source            string  `json:"source"`
	StatementsPerRcpt float64 `json:"statements_per_recipient,omitempty"`
	RowsPerRcpt       float64 `json:"rows_per_recipient,omitempty"`
	WALBytesPerRcpt   float64 `json:"wal_bytes_per_recipient,omitempty"`
	// ExecMsPerRcpt is the statements' execution time (pg_stat_statements'
	// total_exec_time): PostgreSQL's CPU beyond it is autovacuum, WAL writing,
	// connection and protocol work.
	ExecMsPerRcpt     float64         `json:"exec_ms_per_recipient,omitempty"`
	XactsPerRcpt      float64         `json:"transactions_per_recipient,omitempty"`
	TupWrittenPerRcpt float64         `json:"tuples_written_per_recipient,omitempty"`
	Top               []StatementCost `json:"top_statements,omitempty"`
}

// StatementCost is one statement's calls and rows per recipient.
type StatementCost struct {
	Query         string  `json:"query"`
	CallsPerRcpt  float64 `json:"calls_per_recipient"`
	RowsPerRcpt   float64 `json:"rows_per_recipient"`
	ExecMsPerRcpt float64 `json:"exec_ms_per_recipient"`
}

type stmtStat struct {
	calls, rows, wal int64
	execMs           float64
	query            string
}

type dbSnap struct {
	ok         bool
	stmts      map[int64]stmtStat
	xacts, tup int64
}

type dbStats struct {
	pool *pgxpool.Pool
	pgss bool
	why  string // why pg_stat_statements is not used
}

func newDBStats(ctx context.Context, pool *pgxpool.Pool) *dbStats {
	d := &dbStats{pool: pool}
	var preload string
	_ = pool.QueryRow(ctx, `SELECT /* herald-bench */ current_setting('shared_preload_libraries')`).Scan(&preload)
	if !strings.Contains(preload, "pg_stat_statements") {
		d.why = "the cluster does not preload pg_stat_statements"
		return d
	}
	if _, err := pool.Exec(ctx, `CREATE /* herald-bench */ EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		d.why = "CREATE EXTENSION pg_stat_statements: " + err.Error()
		return d
	}
	d.pgss = true
	return d
}

func (d *dbStats) note() string {
	if d.pgss {
		return "database work per recipient from pg_stat_statements (this database, the bench's own queries left out): stmts = statements executed, rows = rows returned or written, WAL = WAL bytes"
	}
	return "database work per recipient from pg_stat_database (" + d.why + "): ~xacts = transactions, ~rows = tuples written; approximate (backends report up to a second late); preload pg_stat_statements for exact statement counts"
}

func (d *dbStats) snap(ctx context.Context) dbSnap {
	s := dbSnap{stmts: map[int64]stmtStat{}}
	if d.pgss {
		rows, err := d.pool.Query(ctx, `
			SELECT /* herald-bench */ coalesce(queryid, 0), calls, rows, wal_bytes::bigint, total_exec_time, left(regexp_replace(query, '\s+', ' ', 'g'), 100)
			FROM pg_stat_statements
			WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND query NOT LIKE '%herald-bench%'`)
		if err != nil {
			return s
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			var st stmtStat
			if err := rows.Scan(&id, &st.calls, &st.rows, &st.wal, &st.execMs, &st.query); err != nil {
				return s
			}
			prev := s.stmts[id] // the same query id as top-level and nested, or of another role
			st.calls, st.rows, st.wal, st.execMs = st.calls+prev.calls, st.rows+prev.rows, st.wal+prev.wal, st.execMs+prev.execMs
			s.stmts[id] = st
		}
		s.ok = rows.Err() == nil
		return s
	}
	s.ok = d.pool.QueryRow(ctx, `
		SELECT /* herald-bench */ xact_commit + xact_rollback, tup_inserted + tup_updated + tup_deleted
		FROM pg_stat_database WHERE datname = current_database()`).Scan(&s.xacts, &s.tup) == nil
	return s
}

// cost is the work between two snapshots per recipient (nil when unknown).
func (d *dbStats) cost(a, b dbSnap, recipients int) *DBCost {
	if !a.ok || !b.ok || recipients <= 0 {
		return nil
	}
	per := func(v int64) float64 { return roundTo(float64(v)/float64(recipients), 3) }
	if !d.pgss {
		return &DBCost{Source: dbSourceDatabase, XactsPerRcpt: per(b.xacts - a.xacts), TupWrittenPerRcpt: per(b.tup - a.tup)}
	}
	c := &DBCost{Source: dbSourceStatements}
	var calls, rows, wal int64
	var execMs float64
	for id, st := range b.stmts {
		prev := a.stmts[id]
		if st.calls < prev.calls { // evicted and back: count what is there
			prev = stmtStat{}
		}
		dc, dr, dw := st.calls-prev.calls, st.rows-prev.rows, st.wal-prev.wal
		if dc == 0 {
			continue
		}
		de := st.execMs - prev.execMs
		calls, rows, wal, execMs = calls+dc, rows+dr, wal+dw, execMs+de
		c.Top = append(c.Top, StatementCost{Query: st.query, CallsPerRcpt: per(dc), RowsPerRcpt: per(dr),
			ExecMsPerRcpt: roundTo(de/float64(recipients), 4)})
	}
	slices.SortFunc(c.Top, func(x, y StatementCost) int { return cmp.Compare(y.ExecMsPerRcpt, x.ExecMsPerRcpt) })
	c.Top = c.Top[:min(10, len(c.Top))]
	c.StatementsPerRcpt, c.RowsPerRcpt, c.WALBytesPerRcpt = per(calls), per(rows), roundTo(float64(wal)/float64(recipients), 0)
	c.ExecMsPerRcpt = roundTo(execMs/float64(recipients), 3)
	return c
}
