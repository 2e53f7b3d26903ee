package store

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Bulk user import (POST /v1/users/import, docs/api.md "Bulk user import"):
// the API spools the request body to a file, and ImportUsers reads it, while it
// is being written, through an ImportSource, which validates each line as it
// goes, and COPYs the rows to PostgreSQL in one transaction: validation in Go and the COPY in PostgreSQL
// run at the same time, and nothing is stored unless every line is valid.
//
// Two ways to apply a file (docs/bench.md, "Bulk user import", has what each
// costs):
//   - direct: into a tenant without users (a first import, the large one), the
//     profiles are COPYed straight into users, and the optional sections
//     (preferences, topics, push tokens) of the lines that have them go to a
//     side spool, COPYed afterwards into a staging table and applied from it.
//     A user named twice in the file (or created meanwhile by another request)
//     breaks users' primary key: the direct attempt is rolled back to its
//     savepoint and the file applied staged.
//   - staged: the whole file is COPYed into a temporary staging table (no WAL);
//     the last line of each user is kept; one join with users finds the new
//     users and the existing ones whose profile differs, which are inserted
//     (plain INSERTs, no speculative ON CONFLICT insertion) and updated; the
//     unchanged ones are not written; then one statement per optional section
//     the file used.

// ImportRow is one validated line of an import. Nil profile fields are cleared
// (PUT semantics); Preferences (a validated JSON document), Topics and
// PushTokens are left as they are when absent.
type ImportRow struct {
	UserID      string
	Name        *string
	Email       *string
	Phone       *string
	Locale      *string
	Timezone    *string
	Preferences []byte
	Topics      []string
	PushTokens  []ImportPushToken
}

// ImportPushToken is a device token of an imported user.
type ImportPushToken struct {
	Token    string `json:"token"`
	Platform string `json:"platform"`
}

// ImportSections says which optional sections an import's lines used.
type ImportSections struct {
	Preferences, Topics, PushTokens bool
}

func (s ImportSections) any() bool { return s.Preferences || s.Topics || s.PushTokens }

// ImportSource yields an import's validated rows. Next returns io.EOF at the
// end; any other error (a bad line) ends the import, and ImportUsers returns
// that error. The row Next returns may point into memory the next call reuses.
// Rewind starts again from the first row: ImportUsers reads a file twice when
// its direct attempt gives way to the staged one.
type ImportSource interface {
	Next() (ImportRow, error)
	Rewind() error
}

// importColumns are the staging table's columns, in the order rows are encoded
// for a staged import; a direct import COPYs importDirectColumns into users and
// importSideColumns (the lines with an optional section) into the staging
// table.
const (
	importColumns       = "user_id, name, email, phone, locale, timezone, preferences, topics, push_tokens"
	importDirectColumns = "tenant_id, user_id, name, email, phone, locale, timezone"
	importSideColumns   = "user_id, preferences, topics, push_tokens"
)

// uniqueViolation is PostgreSQL's unique_violation.
const uniqueViolation = "23505"

// topicEscaper escapes a topic for a quoted text[] element.
var topicEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`)

// appendProfile appends the profile columns (user_id to timezone) in COPY text
// format.
func appendProfile(b []byte, r *ImportRow) []byte {
	b = copyText(b, &r.UserID)
	for _, f := range [...]*string{r.Name, r.Email, r.Phone, r.Locale, r.Timezone} {
		b = append(b, '\t')
		b = copyText(b, f)
	}
	return b
}

// appendSections appends the preferences, topics and push_tokens columns in
// COPY text format (each after a tab) and records which were present.
func appendSections(b []byte, r *ImportRow, used *ImportSections) ([]byte, error) {
	b = append(b, '\t')
	if r.Preferences != nil {
		used.Preferences = true
		b = copyTextBytes(b, r.Preferences)
	} else {
		b = append(b, `\N`...)
	}
	b = append(b, '\t')
	if r.Topics != nil {
		used.Topics = true
		// A text[] literal: every element quoted, '"' and '\' escaped; then the
		// whole literal escaped for COPY like any other text.
		// A topic named twice on a line is written once: the statements
		// that subscribe need no DISTINCT (a sort of every subscription).
		var lit strings.Builder
		lit.WriteByte('{')
		for i, t := range r.Topics {
			if slices.Contains(r.Topics[:i], t) {
				continue
			}
			if lit.Len() > 1 {
				lit.WriteByte(',')
			}
			lit.WriteByte('"')
			lit.WriteString(topicEscaper.Replace(t))
			lit.WriteByte('"')
		}
		lit.WriteByte('}')
		s := lit.String()
		b = copyText(b, &s)
	} else {
		b = append(b, `\N`...)
	}
	b = append(b, '\t')
	if r.PushTokens != nil {
		used.PushTokens = true
		raw, err := json.Marshal(r.PushTokens)
		if err != nil {
			return b, err
		}
		b = copyTextBytes(b, raw)
	} else {
		b = append(b, `\N`...)
	}
	return b, nil
}

// copyText appends s in COPY text format: \N for nil; backslash, tab, newline
// and carriage return escaped.
func copyText(b []byte, s *string) []byte {
	if s == nil {
		return append(b, `\N`...)
	}
	// Most fields have nothing to escape: appended whole.
	clean := true
	for i := 0; i < len(*s); i++ {
		if c := (*s)[i]; c == '\\' || c == '\t' || c == '\n' || c == '\r' {
			clean = false
			break
		}
	}
	if clean {
		return append(b, *s...)
	}
	for i := 0; i < len(*s); i++ {
		b = copyByte(b, (*s)[i])
	}
	return b
}

func copyTextBytes(b, s []byte) []byte {
	for _, c := range s {
		b = copyByte(b, c)
	}
	return b
}

func copyByte(b []byte, c byte) []byte {
	switch c {
	case '\\':
		return append(b, `\\`...)
	case '\t':
		return append(b, `\t`...)
	case '\n':
		return append(b, `\n`...)
	case '\r':
		return append(b, `\r`...)
	default:
		return append(b, c)
	}
}

// importCopy is the io.Reader a COPY reads: rows from an ImportSource, encoded
// in COPY text format as PostgreSQL asks for them (pgx reads 64 KiB at a time
// in a goroutine of its own, so the next rows are validated while PostgreSQL
// inserts the last ones).
type importCopy struct {
	src ImportSource
	// direct: rows are tenant_id and the profile (importDirectColumns), and
	// the lines with an optional section go to side (importSideColumns).
	direct bool
	tenant string
	side   *bufio.Writer
	used   ImportSections
	rows   int64
	// ascending: every row's user_id is greater (bytewise) than the one
	// before; last is the latest.
	ascending bool
	last      string
	buf       []byte
	off       int
	eof       bool
	// err is the source's error: pgx answers it with PostgreSQL's "COPY from
	// stdin failed", ImportUsers returns this one.
	err error
	// reading is held (a token in it) while a Read runs; stopped: copyImport
	// has returned, and Read no longer touches src or side. pgx's CopyFrom
	// may return (the context cancelled, the connection broken) while its
	// goroutine is still in a Read, or about to call it again: copyImport
	// waits for that Read before it reads the fields above or its caller
	// closes side or rewinds src.
	reading chan struct{}
	stopped atomic.Bool
}

// newImportCopy is an importCopy of src's rows (direct: into users, the
// sections to side).
func newImportCopy(src ImportSource, direct bool, tenant string, side *bufio.Writer) *importCopy {
	return &importCopy{src: src, direct: direct, tenant: tenant, side: side, ascending: !direct,
		reading: make(chan struct{}, 1)}
}

// errImportCopyStopped answers a Read pgx makes after copyImport returned.
var errImportCopyStopped = errors.New("the import's COPY has ended")

// importReaderWait bounds copyImport's wait for a Read still running after
// CopyFrom returned: a Read waits at most the API's allowance for the body
// (a second) and reads or writes files.
const importReaderWait = 10 * time.Second

func (c *importCopy) Read(p []byte) (int, error) {
	c.reading <- struct{}{}
	defer func() { <-c.reading }()
	if c.stopped.Load() {
		return 0, errImportCopyStopped
	}
	return c.read(p)
}

func (c *importCopy) read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if c.off == len(c.buf) {
		c.buf, c.off = c.buf[:0], 0
	}
	for len(c.buf)-c.off < len(p) && !c.eof {
		row, err := c.src.Next()
		if errors.Is(err, io.EOF) {
			c.eof = true
			break
		}
		if err == nil {
			if c.rows > 0 && row.UserID <= c.last {
				c.ascending = false
			}
			c.last = row.UserID
			err = c.encode(&row)
		}
		if err != nil {
			c.err = err
			return 0, err
		}
		c.rows++
	}
	n := copy(p, c.buf[c.off:])
	c.off += n
	if n == 0 && c.eof {
		return 0, io.EOF
	}
	return n, nil
}

func (c *importCopy) encode(r *ImportRow) error {
	if !c.direct {
		c.buf = appendProfile(c.buf, r)
		var err error
		c.buf, err = appendSections(c.buf, r, &c.used)
		c.buf = append(c.buf, '\n')
		return err
	}
	c.buf = copyText(c.buf, &c.tenant)
	c.buf = append(c.buf, '\t')
	c.buf = appendProfile(c.buf, r)
	c.buf = append(c.buf, '\n')
	if r.Preferences == nil && r.Topics == nil && r.PushTokens == nil {
		return nil
	}
	line := copyText(nil, &r.UserID)
	line, err := appendSections(line, r, &c.used)
	if err != nil {
		return err
	}
	_, err = c.side.Write(append(line, '\n'))
	return err
}

// copyImport COPYs c's rows into table (columns cols); a bad line's error is
// returned as the source gave it.
func (s *Store) copyImport(ctx context.Context, c *importCopy, table, cols string) error {
	conn, ok := s.db.(interface{ Conn() *pgx.Conn })
	if !ok {
		return errNoCopy
	}
	_, err := conn.Conn().PgConn().CopyFrom(ctx, c, `COPY `+table+` (`+cols+`) FROM STDIN`)
	// Wait for a Read still running (CopyFrom may return without waiting for
	// its goroutine); later ones do nothing.
	c.stopped.Store(true)
	t := time.NewTimer(importReaderWait)
	defer t.Stop()
	select {
	case c.reading <- struct{}{}:
		<-c.reading
	case <-t.C:
		return fmt.Errorf("copy the import into %s: %w (and its reader still runs after %v)", table, err, importReaderWait)
	}
	if c.err != nil {
		return c.err
	}
	if err != nil {
		return fmt.Errorf("copy the import into %s: %w", table, err)
	}
	return nil
}

// ImportResult counts an import's distinct users: created (new), updated (a
// profile field, the preferences, a topic subscription or a push token
// changed) and unchanged; Lines counts the rows read.
type ImportResult struct {
	Lines     int64 `json:"lines"`
	Users     int64 `json:"users"`
	Created   int64 `json:"created"`
	Updated   int64 `json:"updated"`
	Unchanged int64 `json:"unchanged"`
}

// ImportUsers applies the rows of src for tenantID in one transaction: nothing
// is stored unless all of it is. A user named on several lines takes its last
// line. maxPushTokens caps each imported user's tokens (oldest, by
// last_seen_at, removed first; 0: no cap). A bad line's error (the source's)
// is returned as is.
func (s *Store) ImportUsers(ctx context.Context, tenantID string, src ImportSource, maxPushTokens int) (ImportResult, error) {
	var res ImportResult
	err := s.InTx(ctx, func(tx *Store) error {
		// The tenant's first user in the primary key's order: an index probe
		// (a plain EXISTS may be planned as a scan of other tenants' rows).
		var first string
		err := tx.db.QueryRow(ctx, `SELECT user_id FROM users WHERE tenant_id = $1 ORDER BY user_id LIMIT 1`, tenantID).Scan(&first)
		empty := errors.Is(err, pgx.ErrNoRows)
		if err != nil && !empty {
			return err
		}
		if empty {
			err = tx.InTx(ctx, func(sp *Store) error {
				res, err = sp.importDirect(ctx, tenantID, src, maxPushTokens)
				return err
			})
			if !isUniqueViolation(err) {
				return err
			}
			if err := src.Rewind(); err != nil {
				return err
			}
		}
		// A user another request creates between the staged import's join
		// with users and its insert breaks the insert: the second attempt
		// sees it.
		for attempt := 0; ; attempt++ {
			err = tx.InTx(ctx, func(sp *Store) error {
				res, err = sp.importStaged(ctx, tenantID, src, maxPushTokens)
				return err
			})
			if attempt == 1 || !isUniqueViolation(err) {
				return err
			}
			if err := src.Rewind(); err != nil {
				return err
			}
		}
	})
	if err != nil {
		return ImportResult{}, err
	}
	res.Unchanged = res.Users - res.Created - res.Updated
	return res, nil
}

func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == uniqueViolation
}

// createImportStaging creates a staging table (user_import for a staged
// import's rows, user_import_last for a direct import's side rows).
func (s *Store) createImportStaging(ctx context.Context, table string) error {
	_, err := s.db.Exec(ctx, `CREATE TEMP TABLE `+table+` (seq bigserial, user_id text NOT NULL, name text, email text,
		phone text, locale text, timezone text, preferences jsonb, topics text[], push_tokens jsonb) ON COMMIT DROP`)
	return err
}

// importDirect COPYs the rows straight into users (the tenant has none) and
// applies the optional sections from a side spool.
func (s *Store) importDirect(ctx context.Context, tenantID string, src ImportSource, maxPushTokens int) (ImportResult, error) {
	side, err := os.CreateTemp("", "herald-user-import-sections-*")
	if err != nil {
		return ImportResult{}, err
	}
	defer func() {
		_ = side.Close()
		_ = os.Remove(side.Name())
	}()
	c := newImportCopy(src, true, tenantID, bufio.NewWriterSize(side, 64<<10))
	if err := s.copyImport(ctx, c, "users", importDirectColumns); err != nil {
		return ImportResult{}, err
	}
	res := ImportResult{Lines: c.rows, Users: c.rows, Created: c.rows}
	if !c.used.any() {
		return res, nil
	}
	if err := c.side.Flush(); err != nil {
		return res, err
	}
	if _, err := side.Seek(0, io.SeekStart); err != nil {
		return res, err
	}
	// The side rows are one per user (users' primary key held): they are the
	// last lines the sections' statements read. Every user is new, so the
	// sections change nothing the counts would show.
	if err := s.createImportStaging(ctx, "user_import_last"); err != nil {
		return res, err
	}
	conn := s.db.(interface{ Conn() *pgx.Conn })
	if _, err := conn.Conn().PgConn().CopyFrom(ctx, bufio.NewReaderSize(side, 256<<10),
		`COPY user_import_last (`+importSideColumns+`) FROM STDIN`); err != nil {
		return res, fmt.Errorf("copy the import's sections: %w", err)
	}
	for _, q := range importSections(c.used, maxPushTokens, false) {
		if _, err := s.db.Exec(ctx, q, tenantID); err != nil {
			return res, err
		}
	}
	return res, nil
}

// importStaged COPYs the rows into the staging table and applies them from it.
func (s *Store) importStaged(ctx context.Context, tenantID string, src ImportSource, maxPushTokens int) (ImportResult, error) {
	var res ImportResult
	if err := s.createImportStaging(ctx, "user_import"); err != nil {
		return res, err
	}
	c := newImportCopy(src, false, "", nil)
	if err := s.copyImport(ctx, c, "user_import", importColumns); err != nil {
		return res, err
	}
	res.Lines = c.rows
	// The last line of each user, in user_id order (which also makes the
	// writes walk the users index in order). A file in ascending user_id
	// order (an export usually is) names no user twice and is in that order
	// already: its staging table is used as it is, without the sort.
	if c.ascending {
		if _, err := s.db.Exec(ctx, `ALTER TABLE user_import RENAME TO user_import_last`); err != nil {
			return res, err
		}
		res.Users = c.rows
	} else {
		tag, err := s.db.Exec(ctx, `CREATE TEMP TABLE user_import_last ON COMMIT DROP AS
			SELECT DISTINCT ON (user_id) * FROM user_import ORDER BY user_id, seq DESC`)
		if err != nil {
			return res, err
		}
		res.Users = tag.RowsAffected()
	}
	// One lookup in users per line finds the new users and the existing ones
	// whose profile differs; the others (all of them when a file is imported
	// again) are not written at all. The lookup is a probe of users' primary
	// key (LATERAL … LIMIT 1 keeps the planner from hashing the whole users
	// table instead, which reads every tenant's users: 8 s instead of 3.5 s
	// for a million lines against 7.5 million users).
	if _, err := s.db.Exec(ctx, `CREATE TEMP TABLE user_import_diff ON COMMIT DROP AS
		SELECT l.user_id, l.name, l.email, l.phone, l.locale, l.timezone, u.user_id IS NULL AS new
		FROM user_import_last l LEFT JOIN LATERAL (
			SELECT * FROM users u WHERE u.tenant_id = $1 AND u.user_id = l.user_id LIMIT 1) u ON true
		WHERE u.user_id IS NULL
			OR (u.name, u.email, u.phone, u.locale, u.timezone) IS DISTINCT FROM (l.name, l.email, l.phone, l.locale, l.timezone)`,
		tenantID); err != nil {
		return res, err
	}
	tag, err := s.db.Exec(ctx, `
		UPDATE users u SET name = d.name, email = d.email, phone = d.phone, locale = d.locale, timezone = d.timezone,
			updated_at = now()
		FROM user_import_diff d
		WHERE NOT d.new AND u.tenant_id = $1 AND u.user_id = d.user_id`, tenantID)
	if err != nil {
		return res, err
	}
	res.Updated = tag.RowsAffected()
	// A user another request created since the join breaks users' primary key
	// here: ImportUsers then applies the file again.
	tag, err = s.db.Exec(ctx, `
		INSERT INTO users (tenant_id, user_id, name, email, phone, locale, timezone)
		SELECT $1, user_id, name, email, phone, locale, timezone FROM user_import_diff WHERE new
		ORDER BY user_id`, tenantID)
	if err != nil {
		return res, err
	}
	res.Created = tag.RowsAffected()
	if !c.used.any() {
		return res, nil
	}
	// The users a section statement changed (user_import_changed), counted
	// as updated unless created or updated above (user_import_diff). Each
	// returned user was probed in users to tell, before: a quarter of what
	// subscribing cost.
	if _, err := s.db.Exec(ctx, `CREATE TEMP TABLE user_import_changed (user_id text PRIMARY KEY) ON COMMIT DROP`); err != nil {
		return res, err
	}
	for _, q := range importSections(c.used, maxPushTokens, true) {
		if _, err := s.db.Exec(ctx, q, tenantID); err != nil {
			return res, err
		}
	}
	var more int64
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM user_import_changed c
		WHERE NOT EXISTS (SELECT 1 FROM user_import_diff d WHERE d.user_id = c.user_id)`).Scan(&more); err != nil {
		return res, err
	}
	res.Updated += more
	return res, nil
}

// importSections are the statements that apply the optional sections from
// user_import_last, for the sections the file used. With count (a staged
// import), each records in user_import_changed the users it changed. Without (a direct import: every
// user was created by it, so has no preferences or subscriptions yet), they
// are plain INSERTs (no tenant's token can be another user's either: the tenant
// had no users).
func importSections(sections ImportSections, maxPushTokens int, count bool) []string {
	var qs []string
	staged := func(q string) string {
		if !count {
			return ""
		}
		return q
	}
	changed := func(q string) string {
		if !count {
			return q
		}
		return `WITH c AS (` + q + ` RETURNING user_id)
			INSERT INTO user_import_changed SELECT user_id FROM c ON CONFLICT DO NOTHING`
	}
	if sections.Preferences {
		qs = append(qs, changed(`
			INSERT INTO user_preferences AS p (tenant_id, user_id, preferences)
			SELECT $1, l.user_id, l.preferences FROM user_import_last l WHERE l.preferences IS NOT NULL`+staged(`
				AND NOT EXISTS (SELECT 1 FROM user_preferences p
					WHERE p.tenant_id = $1 AND p.user_id = l.user_id AND p.preferences = l.preferences)
			ON CONFLICT (tenant_id, user_id) DO UPDATE SET preferences = EXCLUDED.preferences, updated_at = now()
			WHERE p.preferences IS DISTINCT FROM EXCLUDED.preferences`)))
	}
	if sections.Topics {
		// One row per user and no topic twice on a row (appendSections): the
		// subscriptions need no DISTINCT, and come in the staging table's
		// order, so the foreign-key check of each (a lookup and lock of its
		// user's row) walks users in the order the import wrote them (direct)
		// or in the primary key's (staged). A staged import skips the
		// subscriptions that exist before trying to insert them.
		qs = append(qs, `
			INSERT INTO topics (tenant_id, topic)
			SELECT DISTINCT $1::text, t FROM user_import_last, unnest(topics) AS t
			ON CONFLICT DO NOTHING`,
			changed(`
			INSERT INTO topic_subscribers (tenant_id, topic, user_id)
			SELECT $1::text, t, l.user_id FROM user_import_last l, unnest(l.topics) AS t`+staged(`
			WHERE NOT EXISTS (SELECT 1 FROM topic_subscribers s WHERE s.tenant_id = $1 AND s.topic = t AND s.user_id = l.user_id)
			ON CONFLICT DO NOTHING`)))
	}
	if sections.PushTokens {
		// A token on several users' lines goes to the last of them (a device
		// changes hands, as with PUT /v1/users/{id}/push-tokens).
		upsert := `
			INSERT INTO push_tokens AS p (tenant_id, user_id, token, platform)
			SELECT DISTINCT ON (x.token) $1::text, l.user_id, x.token, x.platform
			FROM user_import_last l, jsonb_to_recordset(l.push_tokens) AS x(token text, platform text)
			ORDER BY x.token, l.seq DESC`
		if !count {
			qs = append(qs, upsert)
		} else {
			// Changed: the token's new owner and, when it is a user of the
			// file, the one it was taken from (prev reads the table as it was
			// before the statement).
			qs = append(qs, `WITH prev AS (
				SELECT p.token, p.user_id FROM push_tokens p
				WHERE p.tenant_id = $1 AND p.token IN (
					SELECT x.token FROM user_import_last l, jsonb_to_recordset(l.push_tokens) AS x(token text, platform text))),
			c AS (`+upsert+`
			ON CONFLICT (tenant_id, token) DO UPDATE SET user_id = EXCLUDED.user_id, platform = EXCLUDED.platform,
				created_at = CASE WHEN p.user_id = EXCLUDED.user_id THEN p.created_at ELSE now() END, last_seen_at = now()
			WHERE (p.user_id, p.platform) IS DISTINCT FROM (EXCLUDED.user_id, EXCLUDED.platform)
			RETURNING p.user_id, p.token)
			INSERT INTO user_import_changed
				SELECT user_id FROM c
				UNION
				SELECT prev.user_id FROM prev JOIN c ON c.token = prev.token
				WHERE prev.user_id <> c.user_id AND prev.user_id IN (SELECT user_id FROM user_import_last)
			ON CONFLICT DO NOTHING`)
		}
		// A direct import's users have the tokens of their one line, at most
		// the cap (the API refuses a line with more). The users whose oldest
		// tokens the cap removes are changed.
		if maxPushTokens > 0 && count {
			qs = append(qs, changed(fmt.Sprintf(`
			DELETE FROM push_tokens p USING (
				SELECT token, row_number() OVER (PARTITION BY user_id ORDER BY last_seen_at DESC, created_at DESC, token) AS n
				FROM push_tokens WHERE tenant_id = $1
					AND user_id IN (SELECT user_id FROM user_import_last WHERE push_tokens IS NOT NULL)) o
			WHERE p.tenant_id = $1 AND p.token = o.token AND o.n > %d`, maxPushTokens)))
		}
	}
	return qs
}
