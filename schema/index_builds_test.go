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
	createIndex  = regexp.MustCompile(`(?is)^create\s+(unique\s+)?index\s+(concurrently\s+)?(if\s+not\s+exists\s+)?\S+\s+on\s+(only\s+)?([a-z_0-9]+)`)
	createTable  = regexp.MustCompile(`(?is)^create\s+table\s+(if\s+not\s+exists\s+)?([a-z_0-9]+)`)
	alterTable   = regexp.MustCompile(`(?is)^alter\s+table\s+(if\s+exists\s+)?(only\s+)?([a-z_0-9]+)\s+(.*)$`)
	addKey       = regexp.MustCompile(`(?is)^add\s+(constraint\s+\S+\s+)?(primary\s+key|unique|foreign\s+key|check)\b`)
	usingIndex   = regexp.MustCompile(`(?is)\busing\s+index\b`)
	notValid     = regexp.MustCompile(`(?is)\bnot\s+valid\b`)
	addColumn    = regexp.MustCompile(`(?is)^add\s+(column\s+)?`)
	columnKey    = regexp.MustCompile(`(?is)\b(unique|primary\s+key|references)\b`)
	lineComment  = regexp.MustCompile(`--[^\n]*`)
	blockComment = regexp.MustCompile(`(?s)/\*.*?\*/`)
)

// alterActions splits an ALTER TABLE's actions (after the table name) at the
// commas outside parentheses.
func alterActions(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	return append(out, strings.TrimSpace(s[start:]))
}

// blockingIndexBuilds returns the index builds of a migration file that would
// hold up writes to a table the file did not create: a CREATE INDEX without
// CONCURRENTLY, or one with it in a file of several statements (golang-migrate
// runs a file as one statement string: several run in one implicit
// transaction, where CONCURRENTLY fails); an ALTER TABLE … ADD PRIMARY KEY or
// UNIQUE (an index built under ACCESS EXCLUSIVE) but USING INDEX (one built
// concurrently before); an ADD FOREIGN KEY or CHECK without NOT VALID (every
// row checked under the statement's lock: add it NOT VALID, then VALIDATE
// CONSTRAINT, which lets writes go on).
func blockingIndexBuilds(sql string) []string {
	var stmts []string
	sql = lineComment.ReplaceAllString(blockComment.ReplaceAllString(sql, ""), "")
	for _, s := range strings.Split(sql, ";") {
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
		if m := alterTable.FindStringSubmatch(s); m != nil && !created[strings.ToLower(m[3])] {
			for _, a := range alterActions(m[4]) {
				k := addKey.FindStringSubmatch(a)
				if k == nil {
					// A new column's own key or reference (ADD COLUMN x int
					// UNIQUE): an index build or a check of every row, with
					// no NOT VALID to ask for.
					if addColumn.MatchString(a) && columnKey.MatchString(a) {
						bad = append(bad, strings.Join(strings.Fields(s), " "))
					}
					continue
				}
				kind := strings.ToLower(strings.Join(strings.Fields(k[2]), " "))
				switch {
				case (kind == "primary key" || kind == "unique") && !usingIndex.MatchString(a),
					(kind == "foreign key" || kind == "check") && !notValid.MatchString(a):
					bad = append(bad, strings.Join(strings.Fields(s), " "))
				}
			}
			continue
		}
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
		// A block comment hides nothing.
		"/* why */ CREATE INDEX a_idx ON a (x);":                                            1,
		"/* one\n   CREATE INDEX x ON y (z); */\nCREATE INDEX CONCURRENTLY a_idx ON a (x);": 0,
		// Keys and checks added to an existing table.
		"ALTER TABLE a ADD PRIMARY KEY (tenant_id, id);":                                            1,
		"ALTER TABLE a ADD CONSTRAINT a_pk PRIMARY KEY (tenant_id, id);":                            1,
		"ALTER TABLE a ADD UNIQUE (x);":                                                             1,
		"ALTER TABLE ONLY a ADD CONSTRAINT a_x UNIQUE (x, y);":                                      1,
		"ALTER TABLE a ADD CONSTRAINT a_x UNIQUE USING INDEX a_x_idx;":                              0,
		"ALTER TABLE a ADD CONSTRAINT a_b FOREIGN KEY (tenant_id, b) REFERENCES b (tenant_id, id);": 1,
		"ALTER TABLE a ADD FOREIGN KEY (b) REFERENCES b (id) NOT VALID;":                            0,
		"ALTER TABLE a ADD COLUMN c int, ADD CONSTRAINT a_c CHECK (c > 0);":                         1,
		"ALTER TABLE a ADD CONSTRAINT a_c CHECK (c > 0) NOT VALID;":                                 0,
		"ALTER TABLE a VALIDATE CONSTRAINT a_c;":                                                    0,
		"ALTER TABLE a ADD COLUMN u text UNIQUE;":                                                   1,
		"ALTER TABLE a ADD COLUMN b_id text REFERENCES b (id);":                                     1,
		"ALTER TABLE a ADD COLUMN n int NOT NULL DEFAULT 0;":                                        0,
		"CREATE TABLE t (a int); ALTER TABLE t ADD PRIMARY KEY (a);":                                0,
	} {
		if got := blockingIndexBuilds(sql); len(got) != want {
			t.Errorf("%q: %d blocking builds %v, want %d", sql, len(got), got, want)
		}
	}
}

// Every migration after lastBlockingIndexBuild, up and down files both (a
// down file that rebuilds what its up file dropped builds it on a big table
// too), builds an index or adds a key on an existing table without holding up
// its writes.
func TestMigrationsDoNotBlockWritesWithIndexBuilds(t *testing.T) {
	files, err := fs.Glob(schema.Migrations, "migrations/*.sql")
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
