package api_test

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/testenv"
)

// importBenchSections: the bench users have preferences and topics
// (HERALD_BENCH_IMPORT_SECTIONS=0: profile fields only).
var importBenchSections = os.Getenv("HERALD_BENCH_IMPORT_SECTIONS") != "0"

// importBenchRow is the i-th user of the bench, every profile field
// personalized (renamed: the name of a later import): user_id, name, email,
// phone, locale, timezone, then the preferences (every 10th user) and topics
// (every 4th: one or two) as the NDJSON line has them, nil when absent.
func importBenchRow(i int, renamed bool) []any {
	locales := [...]string{"en-GB", "de-DE", "fr-FR", "es-ES"}
	zones := [...]string{"Europe/London", "Europe/Berlin", "America/New_York", "Asia/Tokyo"}
	name := fmt.Sprintf("User Number %d", i)
	if renamed {
		name += " (renamed)"
	}
	var prefs, topics any
	if importBenchSections && i%10 == 0 {
		prefs = fmt.Sprintf(`{"categories":{"marketing":{"enabled":%t}},"channels":{"sms":false}}`, i%20 == 0)
	}
	if importBenchSections && i%4 == 0 {
		topics = `["news"]`
		if i%8 == 0 {
			topics = `["news","deals"]`
		}
	}
	return []any{fmt.Sprintf("user-%07d", i), name, fmt.Sprintf("user.%07d@example.com", i),
		fmt.Sprintf("+1415%07d", i), locales[i%len(locales)], zones[i%len(zones)], prefs, topics}
}

// writeImportNDJSON streams bench users from to to (excluded) as NDJSON (what
// a tenant uploads).
func writeImportNDJSON(w io.WriteCloser, from, to int, renamed bool) {
	bw := bufio.NewWriterSize(w, 64<<10)
	for i := from; i < to; i++ {
		r := importBenchRow(i, renamed)
		fmt.Fprintf(bw, `{"user_id":%q,"name":%q,"email":%q,"phone":%q,"locale":%q,"timezone":%q`, r[:6]...)
		if r[6] != nil {
			fmt.Fprintf(bw, `,"preferences":%s`, r[6])
		}
		if r[7] != nil {
			fmt.Fprintf(bw, `,"topics":%s`, r[7])
		}
		bw.WriteString("}\n")
	}
	_ = bw.Flush()
	_ = w.Close()
}

// writeImportCSV writes bench users 0 to n (excluded) as CSV for the floor's
// COPY (an empty field is NULL) and returns path.
func writeImportCSV(tb testing.TB, path string, n int) string {
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	w := csv.NewWriter(bufio.NewWriterSize(f, 64<<10))
	record := make([]string, 8)
	for i := range n {
		for j, v := range importBenchRow(i, false) {
			record[j], _ = v.(string)
		}
		if err := w.Write(record); err != nil {
			tb.Fatal(err)
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	return path
}

// importCeilingFiles are the bench users' rows as the tables the import writes
// hold them, in COPY text format, for the ceiling's COPYs: users (tenant_id,
// user_id, name, email, phone, locale, timezone), user_preferences (tenant_id,
// user_id, preferences) and topic_subscribers (tenant_id, topic, user_id), the
// last two empty without sections.
type importCeilingFiles struct{ users, preferences, subscriptions string }

// writeImportCeilingFiles writes bench users 0 to n (excluded) of tenantID into
// dir as importCeilingFiles.
func writeImportCeilingFiles(tb testing.TB, dir, tenantID string, n int) importCeilingFiles {
	paths := importCeilingFiles{filepath.Join(dir, "users.tsv"), filepath.Join(dir, "preferences.tsv"), filepath.Join(dir, "subscriptions.tsv")}
	var ws [3]*bufio.Writer
	var fs [3]*os.File
	for k, path := range []string{paths.users, paths.preferences, paths.subscriptions} {
		f, err := os.Create(path)
		if err != nil {
			tb.Fatal(err)
		}
		fs[k], ws[k] = f, bufio.NewWriterSize(f, 64<<10)
	}
	for i := range n {
		r := importBenchRow(i, false)
		// The bench's fields hold no tab, newline or backslash: written as they are.
		fmt.Fprintf(ws[0], "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", tenantID, r[0], r[1], r[2], r[3], r[4], r[5])
		if r[6] != nil {
			fmt.Fprintf(ws[1], "%s\t%s\t%s\n", tenantID, r[0], r[6])
		}
		if r[7] != nil {
			var topics []string
			if err := json.Unmarshal([]byte(r[7].(string)), &topics); err != nil {
				tb.Fatal(err)
			}
			for _, topic := range topics {
				fmt.Fprintf(ws[2], "%s\t%s\t%s\n", tenantID, topic, r[0])
			}
		}
	}
	for k := range ws {
		if err := ws[k].Flush(); err != nil {
			tb.Fatal(err)
		}
		if err := fs[k].Close(); err != nil {
			tb.Fatal(err)
		}
	}
	return paths
}

// importCeiling COPYs files into users, user_preferences and
// topic_subscribers (the topics created first) in one transaction, as the
// import commits them, and returns how long that took.
func importCeiling(b *testing.B, pool *pgxpool.Pool, tenantID string, files importCeilingFiles) time.Duration {
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()
	pg := conn.Conn().PgConn()
	start := time.Now()
	exec := func(sql string) {
		if err := pg.Exec(ctx, sql).Close(); err != nil {
			b.Fatalf("%s: %v", sql, err)
		}
	}
	exec("BEGIN")
	for _, c := range []struct{ path, copy string }{
		{files.users, `COPY users (tenant_id, user_id, name, email, phone, locale, timezone) FROM STDIN`},
		{files.preferences, `COPY user_preferences (tenant_id, user_id, preferences) FROM STDIN`},
		{files.subscriptions, `COPY topic_subscribers (tenant_id, topic, user_id) FROM STDIN`},
	} {
		if c.path == files.subscriptions && importBenchSections {
			exec(`INSERT INTO topics (tenant_id, topic) VALUES (` + "'" + tenantID + "'" + `, 'news'), (` + "'" + tenantID + "'" + `, 'deals')`)
		}
		in, err := os.Open(c.path)
		if err != nil {
			b.Fatal(err)
		}
		_, err = pg.CopyFrom(ctx, in, c.copy)
		_ = in.Close()
		if err != nil {
			b.Fatalf("ceiling %s: %v", c.copy, err)
		}
	}
	exec("COMMIT")
	return time.Since(start)
}

// rssBytes is this process's resident set size (VmRSS).
func rssBytes(tb testing.TB) int64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	tb.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// BenchmarkUserImport measures POST /v1/users/import of N users (1,000,000 by
// default, HERALD_BENCH_IMPORT_USERS) streamed as NDJSON with every profile
// field set, preferences for one user in 10 and topics for one in 4
// (HERALD_BENCH_IMPORT_SECTIONS=0: none), into a
// database that already holds another tenant's 100,000 users, against its
// floor measured in the same run: PostgreSQL COPY of the same rows into a bare
// table (no index, no upsert, no validation). It reports import_users/s,
// copy_users/s, their ratio (goal ≥ 0.5), a re-import of the same file (every
// user unchanged), a mixed import of N users of which half exist with another
// name (updated) and half are new, the ceiling (the same rows COPYed straight
// into users, user_preferences and topic_subscribers for a new tenant, in one
// transaction: import/ceiling is how near PostgreSQL's own cost of storing
// them the first import comes), and the API's peak RSS above idle while
// importing (the bench runs the API in this process; goal < 128 MB). Every
// body is a file written before the clock starts, and the floor COPYs a CSV
// file of the same rows. Run it against the test services:
//
//	go test -run '^$' -bench BenchmarkUserImport -benchtime 1x -timeout 30m ./api/
func BenchmarkUserImport(b *testing.B) {
	n := 1_000_000
	if v := os.Getenv("HERALD_BENCH_IMPORT_USERS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	h := apitest.Start(b, apitest.Options{NoWorker: true})
	otherID, _ := h.Tenant("import-bench-other")
	campaignUsers(b, h, otherID, "other", 100_000)
	pool := testenv.Pool(b)

	for i := range b.N {
		// The floor: COPY of the same rows into a bare table.
		table := fmt.Sprintf("bench_import_bare_%d_%d", os.Getpid(), i)
		if _, err := pool.Exec(ctx, `CREATE TABLE `+table+` (user_id text, name text, email text, phone text, locale text,
			timezone text, preferences text, topics text)`); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _, _ = pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+table) })
		// Both sides read files written before the clock starts: the floor a
		// CSV of the rows, the imports the NDJSON a tenant uploads (as
		// `herald users import FILE` does), so neither pays for making its
		// input on the CPUs PostgreSQL uses.
		dir := b.TempDir()
		csvFile := writeImportCSV(b, filepath.Join(dir, "floor.csv"), n)
		firstFile := filepath.Join(dir, "first.ndjson")
		mixedFile := filepath.Join(dir, "mixed.ndjson")
		for _, f := range []struct {
			path     string
			from, to int
			renamed  bool
		}{{firstFile, 0, n, false}, {mixedFile, n / 2, n/2 + n, true}} {
			out, err := os.Create(f.path)
			if err != nil {
				b.Fatal(err)
			}
			writeImportNDJSON(out, f.from, f.to, f.renamed)
		}
		conn, err := pool.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		in, err := os.Open(csvFile)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		tag, err := conn.Conn().PgConn().CopyFrom(ctx, in, `COPY `+table+` (user_id, name, email, phone, locale, timezone, preferences, topics) FROM STDIN (FORMAT csv)`)
		copyTook := time.Since(start)
		_ = in.Close()
		conn.Release()
		if err != nil || tag.RowsAffected() != int64(n) {
			b.Fatalf("bare COPY: %d rows, %v", tag.RowsAffected(), err)
		}

		// The ceiling: the same rows COPYed straight into the tables the
		// import writes, for a tenant of their own (no Herald code, no
		// validation, no upload): what PostgreSQL takes to store them there.
		ceilingTenant, _ := h.Tenant(fmt.Sprintf("import-bench-ceiling-%d", i))
		ceilingDir := filepath.Join(dir, "ceiling")
		if err := os.Mkdir(ceilingDir, 0o700); err != nil {
			b.Fatal(err)
		}
		ceilingTook := importCeiling(b, pool, ceilingTenant, writeImportCeilingFiles(b, ceilingDir, ceilingTenant, n))

		_, key := h.Tenant(fmt.Sprintf("import-bench-%d", i))
		var peak atomic.Int64
		post := func(path string) (map[string]any, time.Duration) {
			body, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			defer body.Close()
			req, err := http.NewRequest(http.MethodPost, h.URL+"/v1/users/import", body)
			if err != nil {
				b.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/x-ndjson")
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					if r := rssBytes(b); r > peak.Load() {
						peak.Store(r)
					}
					select {
					case <-stop:
						return
					case <-time.After(20 * time.Millisecond):
					}
				}
			}()
			start := time.Now()
			resp, err := http.DefaultClient.Do(req)
			took := time.Since(start)
			close(stop)
			wg.Wait()
			if err != nil {
				b.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("import: %d %s", resp.StatusCode, raw)
			}
			var out map[string]any
			if err := json.Unmarshal(raw, &out); err != nil {
				b.Fatal(err)
			}
			return out, took
		}
		idle := rssBytes(b)
		first, took := post(firstFile)
		if num(first, "created") != n {
			b.Fatalf("first import: %v", first)
		}
		again, againTook := post(firstFile)
		if num(again, "unchanged") != n {
			b.Fatalf("re-import: %v", again)
		}
		mixed, mixedTook := post(mixedFile)
		if num(mixed, "updated") != n-n/2 || num(mixed, "created") != n/2 {
			b.Fatalf("mixed import: %v", mixed)
		}
		importRate, copyRate := float64(n)/took.Seconds(), float64(n)/copyTook.Seconds()
		ceilingRate := float64(n) / ceilingTook.Seconds()
		mixedRate := float64(n) / mixedTook.Seconds()
		b.ReportMetric(importRate, "import_users/s")
		b.ReportMetric(copyRate, "copy_users/s")
		b.ReportMetric(importRate/copyRate, "import/copy")
		b.ReportMetric(ceilingRate/copyRate, "ceiling/copy")
		b.ReportMetric(importRate/ceilingRate, "import/ceiling")
		b.ReportMetric(float64(n)/againTook.Seconds(), "reimport_users/s")
		b.ReportMetric(mixedRate/copyRate, "mixed/copy")
		b.ReportMetric(float64(peak.Load()-idle)/(1<<20), "rss_above_idle_MB")
		b.Logf("%d users: import %s (%.0f/s), bare COPY %s (%.0f/s), ratio %.2f; COPY into the tables %s (ceiling %.2f of the bare COPY; import %.2f of it); "+
			"re-import (unchanged) %s (%.2f); mixed (half updated, half new) %s (%.2f); RSS idle %d MB, peak +%d MB",
			n, took.Round(time.Millisecond), importRate, copyTook.Round(time.Millisecond), copyRate, importRate/copyRate,
			ceilingTook.Round(time.Millisecond), ceilingRate/copyRate, importRate/ceilingRate,
			againTook.Round(time.Millisecond), float64(n)/againTook.Seconds()/copyRate,
			mixedTook.Round(time.Millisecond), mixedRate/copyRate, idle>>20, (peak.Load()-idle)>>20)
	}
}
