package schema_test

import (
	"io/fs"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/herald-notify/herald/schema"
)

// lastBlockingIndexBuild is the last migration allowed to build an index on
// an existing table in a transaction (blocking the table's writes for the
// build): those up to it run in the maintenance window that 0102 (which
// copies five tables) requires anyway. After it, the rule of
// schema/migrations/README.md#indexes-on-big-tables holds.
const lastBlockingIndexBuild = 135

var (
	createIndex = regexp.MustCompile(`(?is)^create\s+(unique\s+)?index\s+(concurrently\s+)?(if\s+not\s+exists\s+)?\S+\s+on\s+(only\s+)?([a-z_0-9]+)`)
	createTable = regexp.MustCompile(`(?is)^create\s+table\s+(if\s+not\s+exists\s+)?([a-z_0-9]+)`)
	lineComment = regexp.MustCompile(`--[^\n]*`)
)

// blockingIndexBuilds returns the index builds of a migration file that would
// hold up writes to a table the file did not create: a CREATE INDEX without
// CONCURRENTLY, or one with it in a file of several statements (golang-migrate
// runs a file as one statement string: several run in one implicit
// transaction, where CONCURRENTLY fails).
func blockingIndexBuilds(sql string) []string {
	var stmts []string
	for _, s := range strings.Split(lineComment.ReplaceAllString(sql, ""), ";") {
		if s = strings.TrimSpace(s); s != "" {
			stmts = append(stmts, s)
		}
	}
	created := map[string]bool{}
	for _, s := range stmts {
		if m := createTable.FindStringSubmatch(s); m != nil {
			created[strings.ToLower(m[2])] = true
		}
	}
	var bad []string
	for _, s := range stmts {
		m := createIndex.FindStringSubmatch(s)
		if m == nil || created[strings.ToLower(m[5])] {
			continue
		}
		if m[2] == "" || len(stmts) > 1 {
			bad = append(bad, strings.Join(strings.Fields(s), " "))
		}
	}
	return bad
}

func TestBlockingIndexBuildsAreFound(t *testing.T) {
	for sql, want := range map[string]int{
		"-- why\nCREATE INDEX CONCURRENTLY IF NOT EXISTS a_idx ON a (tenant_id, x);\n": 0,
		"CREATE INDEX a_idx ON a (x);": 1,
		"CREATE INDEX CONCURRENTLY a_idx ON a (x); CREATE INDEX CONCURRENTLY b_idx ON b (x);": 2,
		"CREATE TABLE t (a int);\nCREATE INDEX t_idx ON t (a);":                               0,
		"ALTER TABLE a ADD COLUMN b int; CREATE UNIQUE INDEX a_b ON a (b);":                   1,
		"CREATE INDEX p_idx ON ONLY parent (x);":                                              1,
	} {
		if got := blockingIndexBuilds(sql); len(got) != want {
			t.Errorf("%q: %d blocking builds %v, want %d", sql, len(got), got, want)
		}
	}
}

// Every migration after lastBlockingIndexBuild builds an index on an existing
// table without holding up its writes.
func TestMigrationsDoNotBlockWritesWithIndexBuilds(t *testing.T) {
	files, err := fs.Glob(schema.Migrations, "migrations/*.up.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("migrations: %v %v", files, err)
	}
	for _, f := range files {
		n, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(f, "migrations/"), "_", 2)[0])
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if n <= lastBlockingIndexBuild {
			continue
		}
		raw, err := fs.ReadFile(schema.Migrations, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range blockingIndexBuilds(string(raw)) {
			t.Errorf("%s: %q holds up the table's writes while it builds (schema/migrations/README.md#indexes-on-big-tables)", f, s)
		}
	}
}
