package api_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/testenv"
)

// bigLoader fills the notification tables of TestBigDatabase with n copies
// of sample notifications that went through the real accept path, with COPY.
// It knows no column but the one naming the notification and, per user, the
// tenant and user: every other column is read from the catalog and copied
// from the sample row, its text (and JSON, arrays, bytes as text) with the
// sample's key hash, run id, user and tenant replaced by the copy's, its times
// moved by the copy's distance from the sample, and a per-user sequence
// number ("seq") made unique. So the schema on main, whatever its columns,
// is what gets loaded. Each chunk's generator rows are computed once (the
// temporary table bench_g) for the six tables' COPYs, and the COPYs go into
// the tables without their indexes and constraints (bigKeys).
type bigLoader struct {
	t          *testing.T
	pool       *pgxpool.Pool
	n          int
	big        string   // the bench tenant: half the copies
	sample     []string // the sample's notification ids (the bench tenant's)
	sampleUser string   // the user whose per-user rows are copied
	from, to   time.Time
	cutoff     time.Time // the retention's cut-off at the real clock
	small      []string  // the small tenants
	ub, us     int       // users of the bench tenant and of each small tenant
}

// The tables a notification writes to, the column naming it, and which copies
// get a row: the inbox only the newest 100 of each user (the cap), the due
// sequences only those an hourly maintenance run would not have deleted yet.
// The dedup ledger is left out: its rows live for the dedup window only.
var bigNotificationTables = []struct{ table, key, where string }{
	{"notifications", "id", ""},
	{"deliveries", "notification_id", ""},
	{"delivery_attempts", "notification_id", ""},
	{"notification_sequences", "notification_id", "g.at >= $cutoff"},
	{"inbox", "notification_id", "g.inbox"},
	{"inbox_events", "notification_id", ""},
}

// The per-user tables: one row per loaded user, copied from the sample user's.
var bigUserTables = []string{"users", "inbox_state", "due_sequences"}

const (
	bigSmallTenants = 100
	bigChunk        = 200_000
)

func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

type bigColumn struct {
	name, typ        string
	time, skip, ints bool
}

func (l *bigLoader) columns(ctx context.Context, table string) []bigColumn {
	rows, err := l.pool.Query(ctx, `
		SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.atttypid = 'timestamptz'::regtype,
			a.attidentity <> '' OR COALESCE(pg_get_expr(d.adbin, d.adrelid) LIKE 'nextval(%', false),
			a.atttypid IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype)
		FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
		WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
		ORDER BY a.attnum`, table)
	if err != nil {
		l.t.Fatal(err)
	}
	cols, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (bigColumn, error) {
		var c bigColumn
		err := r.Scan(&c.name, &c.typ, &c.time, &c.skip, &c.ints)
		return c, err
	})
	if err != nil {
		l.t.Fatal(err)
	}
	return cols
}

// setup makes the generator's temporary tables on a source connection: the
// sample notifications (bench_s, ranked) and each table's sample rows.
func (l *bigLoader) setup(ctx context.Context, c *pgxpool.Conn) {
	stmts := []string{`CREATE TEMP TABLE bench_s AS
		SELECT (row_number() OVER (ORDER BY id) - 1)::int AS rank, id, encode(substring(id FROM 1 FOR 16), 'hex') AS keyhex,
			encode(substring(id FROM 17 FOR 16), 'hex') AS runhex, encode(substring(id FROM 17 FOR 16), 'hex')::uuid::text AS runid,
			user_id, accepted_at
		FROM notifications WHERE tenant_id = $1 AND id = ANY($2)`}
	for _, nt := range bigNotificationTables {
		stmts = append(stmts, fmt.Sprintf(`CREATE TEMP TABLE samp_%[1]s AS SELECT x.* FROM %[1]s x JOIN bench_s s ON x.tenant_id = $1 AND x.%[2]s = s.id`,
			nt.table, nt.key))
	}
	for _, ut := range bigUserTables {
		stmts = append(stmts, fmt.Sprintf(`CREATE TEMP TABLE samp_%[1]s AS SELECT * FROM %[1]s WHERE tenant_id = $1 AND user_id = %[2]s`,
			ut, sqlString(l.sampleUser)))
	}
	for _, s := range stmts {
		var args []any
		if strings.Contains(s, "$2") {
			args = []any{l.big, l.sample}
		} else if strings.Contains(s, "$1") {
			args = []any{l.big}
		}
		if _, err := c.Exec(ctx, s, args...); err != nil {
			l.t.Fatalf("%s: %v", s, err)
		}
	}
	if _, err := c.Exec(ctx, `ANALYZE bench_s`); err != nil {
		l.t.Fatal(err)
	}
}

// bearsTokens reports whether any sample value of the column holds the
// sample's key hash, run id, user or tenant (those get the replace chain).
func (l *bigLoader) bearsTokens(ctx context.Context, c *pgxpool.Conn, sampleTable, join, col string, userOnly bool) bool {
	x := "x." + pgx.Identifier{col}.Sanitize() + "::text"
	cond := fmt.Sprintf(`strpos(%[1]s, s.keyhex) > 0 OR strpos(%[1]s, s.runhex) > 0 OR strpos(%[1]s, s.runid) > 0 OR strpos(%[1]s, s.user_id) > 0 OR strpos(%[1]s, %[2]s) > 0`,
		x, sqlString(l.big))
	from := fmt.Sprintf(`%s x JOIN bench_s s ON %s`, sampleTable, join)
	if userOnly {
		cond = fmt.Sprintf(`strpos(%[1]s, %[2]s) > 0 OR strpos(%[1]s, %[3]s) > 0`, x, sqlString(l.sampleUser), sqlString(l.big))
		from = sampleTable + " x"
	}
	var yes bool
	if err := c.QueryRow(ctx, `SELECT COALESCE(bool_or(`+cond+`), false) FROM `+from).Scan(&yes); err != nil {
		l.t.Fatal(err)
	}
	return yes
}

// generator is the query of copies lo..hi-1: each copy's number k, its
// sample (s*), tenant, user, inbox flag, key hash, time and run id (a UUIDv7
// of its time, as Temporal makes them).
func (l *bigLoader) generator(lo, hi int) string {
	nb := (l.n + 1) / 2 // the bench tenant's copies: the even k
	ns := l.n / 2       // the small tenants': the odd k
	q := fmt.Sprintf(`
		SELECT k, s.id AS sid, s.keyhex AS skey, s.runhex AS srun, s.runid AS srunid, s.user_id AS suser, s.accepted_at AS sat,
			x.tenant_id, x.user_id, x.inbox, md5('k' || k) AS key, a.at, r.run,
			substr(r.run, 1, 8) || '-' || substr(r.run, 9, 4) || '-' || substr(r.run, 13, 4) || '-' || substr(r.run, 17, 4) || '-' || substr(r.run, 21, 12) AS runid
		FROM generate_series(%[1]d::bigint, %[2]d::bigint - 1) k
		JOIN bench_s s ON s.rank = k %% %[3]d
		CROSS JOIN LATERAL (SELECT %[4]s::timestamptz + (k::float8 / %[5]d) * %[6]s::interval AS at) a
		CROSS JOIN LATERAL (SELECT lpad(to_hex(floor(extract(epoch FROM a.at) * 1000)::bigint), 12, '0') || '7' || substr(md5('r' || k), 1, 3)
			|| '8' || substr(md5('r' || k), 4, 15) AS run) r
		CROSS JOIN LATERAL (SELECT
			CASE WHEN k %% 2 = 0 THEN %[7]s ELSE (%[8]s::text[])[(k / 2) %% %[9]d + 1] END AS tenant_id,
			CASE WHEN k %% 2 = 0 THEN 'u' || ((k / 2) %% %[10]d) ELSE 'u' || (((k / 2) / %[9]d) %% %[11]d) END AS user_id,
			CASE WHEN k %% 2 = 0 THEN k / 2 >= %[12]d - 100 * %[10]d
				ELSE (k / 2) / %[9]d >= (%[13]d - (k / 2) %% %[9]d + %[9]d - 1) / %[9]d - 100 * %[11]d END AS inbox) x`,
		lo, hi, len(l.sample), sqlString(l.from.UTC().Format(time.RFC3339Nano)), l.n, sqlString(fmt.Sprintf("%d microseconds", l.to.Sub(l.from).Microseconds())),
		sqlString(l.big), sqlString("{"+strings.Join(l.small, ",")+"}"), len(l.small), l.ub, l.us, nb, ns)
	return q
}

// materialize makes the temporary table bench_g on a source connection:
// the generator's rows of copies lo..hi-1, computed once for the six
// tables' COPYs of the chunk.
func (l *bigLoader) materialize(ctx context.Context, c *pgxpool.Conn, lo, hi int) error {
	for _, s := range []string{`DROP TABLE IF EXISTS bench_g`, `CREATE TEMP TABLE bench_g AS ` + l.generator(lo, hi), `ANALYZE bench_g`} {
		if _, err := c.Exec(ctx, s); err != nil {
			return fmt.Errorf("generator of copies %d..%d: %w", lo, hi, err)
		}
	}
	return nil
}

// notificationCopy is the COPY … TO of one table for the copies in bench_g.
// Its values are COPYed out as text, so a column whose text is rewritten
// is not cast back to its type (COPY FROM parses it).
func (l *bigLoader) notificationCopy(table, key, where string, cols []bigColumn, tokens map[string]bool) (string, string) {
	chain := func(x string) string {
		return fmt.Sprintf(`replace(replace(replace(replace(replace(%s, g.skey, g.key), g.srunid, g.runid), g.srun, g.run), g.suser, g.user_id), %s, g.tenant_id)`,
			x, sqlString(l.big))
	}
	var names, exprs []string
	for _, col := range cols {
		if col.skip {
			continue
		}
		id := pgx.Identifier{col.name}.Sanitize()
		x := "x." + id
		switch {
		case (col.name == "seq" || col.name == "ev_seq") && col.ints:
			// An event id (an inbox row's ev_seq, 0155, is its created event's).
			x = fmt.Sprintf("(g.k * 64 + %s %% 64)", x)
		case col.time:
			x = fmt.Sprintf("%s + (g.at - g.sat)", x)
		case tokens[col.name]:
			x = chain(x + "::text")
		}
		names, exprs = append(names, id), append(exprs, x)
	}
	q := fmt.Sprintf(`SELECT %s FROM bench_g g JOIN samp_%s x ON x.%s = g.sid`, strings.Join(exprs, ", "), table, pgx.Identifier{key}.Sanitize())
	if where != "" {
		q += " WHERE " + strings.ReplaceAll(where, "$cutoff", sqlString(l.cutoff.Add(-time.Hour).UTC().Format(time.RFC3339Nano)))
	}
	return q, strings.Join(names, ", ")
}

// userCopy is the COPY … TO of one per-user table: every loaded user.
func (l *bigLoader) userCopy(table string, cols []bigColumn, tokens map[string]bool) (string, string) {
	var names, exprs []string
	for _, col := range cols {
		if col.skip {
			continue
		}
		id := pgx.Identifier{col.name}.Sanitize()
		x := "x." + id
		if tokens[col.name] {
			x = fmt.Sprintf("(replace(replace(%s::text, %s, g.user_id), %s, g.tenant_id))::%s", x, sqlString(l.sampleUser), sqlString(l.big), col.typ)
		}
		if table == "inbox_state" && col.name == "oldest_at" {
			// The sample user's bound is not the loaded items' (spread over
			// the month): unknown, as a row from before the bound existed.
			x = "'-infinity'::timestamptz"
		}
		names, exprs = append(names, id), append(exprs, x)
	}
	return fmt.Sprintf(`SELECT %s FROM (SELECT %s AS tenant_id, 'u' || i AS user_id FROM generate_series(0, %d) i
			UNION ALL SELECT t, 'u' || i FROM unnest(%s::text[]) t CROSS JOIN generate_series(0, %d) i) g CROSS JOIN samp_%s x`,
		strings.Join(exprs, ", "), sqlString(l.big), l.ub-1, sqlString("{"+strings.Join(l.small, ",")+"}"), l.us-1, table), strings.Join(names, ", ")
}

// pipe runs COPY (query) TO STDOUT on src into COPY table (cols) FROM STDIN
// on dst and returns the rows copied.
func pipe(ctx context.Context, src, dst *pgxpool.Conn, query, table, cols string) (int64, error) {
	pr, pw := io.Pipe()
	errc := make(chan error, 1)
	go func() {
		_, err := src.Conn().PgConn().CopyTo(ctx, pw, "COPY ("+query+") TO STDOUT")
		pw.CloseWithError(err)
		errc <- err
	}()
	tag, err := dst.Conn().PgConn().CopyFrom(ctx, pr, "COPY "+pgx.Identifier{table}.Sanitize()+" ("+cols+") FROM STDIN")
	pr.CloseWithError(io.ErrClosedPipe)
	if e := <-errc; err == nil && e != nil {
		err = e
	}
	if err != nil {
		return 0, fmt.Errorf("copy %s: %w", table, err)
	}
	return tag.RowsAffected(), nil
}

func (l *bigLoader) load(ctx context.Context) {
	t := l.t
	st := store.New(l.pool)
	for i := range bigSmallTenants {
		tn, _, err := st.CreateTenant(ctx, fmt.Sprintf("bigdb-small-%03d-%d", i, time.Now().UnixNano()))
		if err != nil {
			t.Fatal(err)
		}
		l.small = append(l.small, tn.ID)
	}
	// The bench tenant's users get ~150 notifications each over the 31 days
	// (the inbox cap keeps their newest 100), the small tenants' ~30.
	l.ub = max(1, (l.n+1)/2/150)
	l.us = max(1, l.n/2/bigSmallTenants/30)
	minFree := uint64(testenv.EnvInt(t, "HERALD_BENCH_BIGDB_MIN_FREE_GB", 15)) << 30

	type conns struct{ src, dst *pgxpool.Conn }
	workers := make([]conns, 2)
	for i := range workers {
		var err error
		if workers[i].src, err = l.pool.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		if workers[i].dst, err = l.pool.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		defer workers[i].src.Release()
		defer workers[i].dst.Release()
		l.setup(ctx, workers[i].src)
	}
	var s int
	if err := workers[0].src.QueryRow(ctx, `SELECT count(*) FROM bench_s`).Scan(&s); err != nil || s != len(l.sample) {
		t.Fatalf("sample: %d of %d notifications found (%v)", s, len(l.sample), err)
	}
	// Columns, and which of them hold the sample's ids.
	cols := map[string][]bigColumn{}
	tokens := map[string]map[string]bool{}
	for _, nt := range bigNotificationTables {
		cols[nt.table], tokens[nt.table] = l.columns(ctx, nt.table), map[string]bool{}
		for _, c := range cols[nt.table] {
			if !c.time && !c.skip {
				tokens[nt.table][c.name] = l.bearsTokens(ctx, workers[0].src, "samp_"+nt.table, "s.id = x."+pgx.Identifier{nt.key}.Sanitize(), c.name, false)
			}
		}
	}
	for _, ut := range bigUserTables {
		cols[ut], tokens[ut] = l.columns(ctx, ut), map[string]bool{}
		for _, c := range cols[ut] {
			if !c.time && !c.skip {
				tokens[ut][c.name] = l.bearsTokens(ctx, workers[0].src, "samp_"+ut, "", c.name, true)
			}
		}
	}
	// The notification tables' indexes, keys and foreign keys go before the
	// COPY and come back after it (bigKeys), unless
	// HERALD_BENCH_BIGDB_KEEP_INDEXES=1 (the COPY through every index, as
	// it loaded before). Either way the schema after the load must be the
	// one before it.
	var tables []string
	for _, nt := range bigNotificationTables {
		tables = append(tables, nt.table)
	}
	keys, err := readBigKeys(ctx, l.pool, tables)
	if err != nil {
		t.Fatal(err)
	}
	before, err := bigSchemaDefs(ctx, l.pool, keys.rels)
	if err != nil {
		t.Fatal(err)
	}
	keep := os.Getenv("HERALD_BENCH_BIGDB_KEEP_INDEXES") == "1"
	t0 := time.Now()
	if !keep {
		if err := keys.drop(ctx, l.pool); err != nil {
			t.Fatal(err)
		}
		t.Logf("load: dropped the indexes and constraints of %d tables and partitions (%d built after the COPY, %d on the parents, %d attachments, %d foreign keys)",
			len(keys.rels), len(keys.leaves), len(keys.parents), len(keys.attach), len(keys.fks))
	}
	for _, ut := range bigUserTables {
		q, names := l.userCopy(ut, cols[ut], tokens[ut])
		rows, err := pipe(ctx, workers[0].src, workers[0].dst, q, ut, names)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("load: %s %d rows", ut, rows)
	}
	// Copies in chunks of bigChunk, two at a time (a source and a
	// destination connection each).
	chunks := make(chan [2]int)
	go func() {
		for lo := 0; lo < l.n; lo += bigChunk {
			chunks <- [2]int{lo, min(l.n, lo+bigChunk)}
		}
		close(chunks)
	}()
	var mu sync.Mutex
	total := map[string]int64{}
	spent := map[string]time.Duration{}
	var failed error
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range chunks {
				mu.Lock()
				stop := failed != nil
				mu.Unlock()
				if stop {
					continue
				}
				if err := l.materialize(ctx, w.src, c[0], c[1]); err != nil {
					mu.Lock()
					if failed == nil {
						failed = err
					}
					mu.Unlock()
					continue
				}
				for _, nt := range bigNotificationTables {
					q, names := l.notificationCopy(nt.table, nt.key, nt.where, cols[nt.table], tokens[nt.table])
					t1 := time.Now()
					rows, err := pipe(ctx, w.src, w.dst, q, nt.table, names)
					mu.Lock()
					total[nt.table] += rows
					spent[nt.table] += time.Since(t1)
					if err != nil && failed == nil {
						failed = err
					}
					mu.Unlock()
					if err != nil {
						break
					}
				}
				free := freeDisk("/")
				mu.Lock()
				if free < minFree && failed == nil {
					failed = fmt.Errorf("%.1f GB free on /: stopped before the floor of %d GB (HERALD_BENCH_BIGDB_MIN_FREE_GB)", float64(free)/(1<<30), minFree>>30)
				}
				t.Logf("load: copies %d..%d done after %s (rows %v, time %v); %.1f GB free", c[0], c[1], time.Since(t0).Round(time.Second), total, spent,
					float64(free)/(1<<30))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if failed != nil {
		t.Fatal(failed)
	}
	copied := time.Since(t0)
	t.Logf("load: COPY done after %s (%.0f notifications/s)", copied.Round(time.Second), float64(l.n)/copied.Seconds())
	if !keep {
		conns := testenv.EnvInt(t, "HERALD_BENCH_BIGDB_INDEX_CONNS", 2)
		workers := testenv.EnvInt(t, "HERALD_BENCH_BIGDB_INDEX_WORKERS", 1)
		bt, err := keys.create(ctx, l.pool, conns, workers)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("load: indexes and constraints built in %s (%d statements, %d connections, max_parallel_maintenance_workers %d, maintenance_work_mem 1GB), parents' and attachments %s, foreign keys validated %s; %.1f GB free",
			bt.build.Round(time.Second), len(keys.leaves), conns, workers, bt.attach.Round(time.Millisecond), bt.fks.Round(time.Second), float64(freeDisk("/"))/(1<<30))
	}
	after, err := bigSchemaDefs(ctx, l.pool, keys.rels)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(before, after) {
		for _, d := range before {
			if !slices.Contains(after, d) {
				t.Errorf("load: lost %s", d)
			}
		}
		for _, d := range after {
			if !slices.Contains(before, d) {
				t.Errorf("load: gained %s", d)
			}
		}
		t.Fatalf("load: the notification tables' indexes and constraints differ from before the load")
	}
	t.Logf("load: the %d index and constraint definitions of the notification tables and their partitions are those before the load", len(after))
	t1 := time.Now()
	for _, table := range append([]string{"notifications", "deliveries", "delivery_attempts", "notification_sequences", "inbox", "inbox_events"}, bigUserTables...) {
		// VACUUM too: a database that has held its rows for a month has
		// its visibility maps set and no autovacuum of a fresh load to do.
		if _, err := l.pool.Exec(ctx, "VACUUM (ANALYZE) "+table); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.pool.Exec(ctx, "CHECKPOINT"); err != nil {
		t.Logf("checkpoint: %v", err)
	}
	t.Logf("load: VACUUM (ANALYZE) and CHECKPOINT took %s", time.Since(t1).Round(time.Second))
}
