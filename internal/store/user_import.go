package store

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Bulk user import (POST /v1/users/import, docs/api.md "Bulk user import"):
// the API validates every line while it spools the body to a file in
// PostgreSQL's COPY text format (ImportWriter), so a bad line is refused before
// the database is touched and a slow client never holds a connection; then
// ImportUsers COPYs the file into a temporary staging table and applies it in
// one transaction: one upsert of the profiles, and one statement per optional
// section the file used (preferences, topics, push tokens).

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

// ImportWriter writes validated rows in COPY text format (the columns of
// importColumns), for ImportUsers to read.
type ImportWriter struct {
	w        *bufio.Writer
	sections ImportSections
	rows     int64
	buf      []byte
}

// NewImportWriter writes to w (a spool file).
func NewImportWriter(w io.Writer) *ImportWriter {
	return &ImportWriter{w: bufio.NewWriterSize(w, 64<<10)}
}

// importColumns are the staging table's columns, in the order ImportWriter
// writes them.
var importColumns = "user_id, name, email, phone, locale, timezone, preferences, topics, push_tokens"

// Write appends one row.
func (iw *ImportWriter) Write(r ImportRow) error {
	b := iw.buf[:0]
	b = copyText(b, &r.UserID)
	for _, f := range []*string{r.Name, r.Email, r.Phone, r.Locale, r.Timezone} {
		b = append(b, '\t')
		b = copyText(b, f)
	}
	b = append(b, '\t')
	if r.Preferences != nil {
		iw.sections.Preferences = true
		s := string(r.Preferences)
		b = copyText(b, &s)
	} else {
		b = append(b, `\N`...)
	}
	b = append(b, '\t')
	if r.Topics != nil {
		iw.sections.Topics = true
		// A text[] literal: every element quoted, '"' and '\' escaped; then the
		// whole literal escaped for COPY like any other text.
		var lit strings.Builder
		lit.WriteByte('{')
		for i, t := range r.Topics {
			if i > 0 {
				lit.WriteByte(',')
			}
			lit.WriteByte('"')
			lit.WriteString(strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(t))
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
		iw.sections.PushTokens = true
		raw, err := json.Marshal(r.PushTokens)
		if err != nil {
			return err
		}
		s := string(raw)
		b = copyText(b, &s)
	} else {
		b = append(b, `\N`...)
	}
	b = append(b, '\n')
	iw.buf = b
	iw.rows++
	_, err := iw.w.Write(b)
	return err
}

// Flush writes what is buffered; call it before reading the spool.
func (iw *ImportWriter) Flush() error { return iw.w.Flush() }

// Sections are the optional sections the rows used.
func (iw *ImportWriter) Sections() ImportSections { return iw.sections }

// Rows counts the rows written.
func (iw *ImportWriter) Rows() int64 { return iw.rows }

// copyText appends s in COPY text format: \N for nil; backslash, tab, newline
// and carriage return escaped.
func copyText(b []byte, s *string) []byte {
	if s == nil {
		return append(b, `\N`...)
	}
	for i := 0; i < len(*s); i++ {
		switch c := (*s)[i]; c {
		case '\\':
			b = append(b, `\\`...)
		case '\t':
			b = append(b, `\t`...)
		case '\n':
			b = append(b, `\n`...)
		case '\r':
			b = append(b, `\r`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// ImportResult counts an import's distinct users: created (new), updated (a
// profile field, the preferences, a topic subscription or a push token
// changed) and unchanged.
type ImportResult struct {
	Users     int64 `json:"users"`
	Created   int64 `json:"created"`
	Updated   int64 `json:"updated"`
	Unchanged int64 `json:"unchanged"`
}

// ImportUsers applies a spool ImportWriter wrote (rows, in COPY text format) for
// tenantID in one transaction: nothing is stored unless all of it is. A user
// named on several lines takes its last line. maxPushTokens caps each imported
// user's tokens (oldest, by last_seen_at, removed first; 0: no cap).
func (s *Store) ImportUsers(ctx context.Context, tenantID string, rows io.Reader, sections ImportSections, maxPushTokens int) (ImportResult, error) {
	var res ImportResult
	err := s.InTx(ctx, func(tx *Store) error {
		conn, ok := tx.db.(interface{ Conn() *pgx.Conn })
		if !ok {
			return errNoCopy
		}
		if _, err := tx.db.Exec(ctx, `CREATE TEMP TABLE user_import (seq bigserial, user_id text NOT NULL, name text, email text,
			phone text, locale text, timezone text, preferences jsonb, topics text[], push_tokens jsonb) ON COMMIT DROP`); err != nil {
			return err
		}
		if _, err := conn.Conn().PgConn().CopyFrom(ctx, rows, `COPY user_import (`+importColumns+`) FROM STDIN`); err != nil {
			return fmt.Errorf("copy the import: %w", err)
		}
		// The last line of each user, in user_id order (which also makes the
		// upsert walk the users index in order).
		last := `SELECT DISTINCT ON (user_id) * FROM user_import ORDER BY user_id, seq DESC`
		optional := sections.Preferences || sections.Topics || sections.PushTokens
		if optional {
			if _, err := tx.db.Exec(ctx, `CREATE TEMP TABLE user_import_last ON COMMIT DROP AS `+last); err != nil {
				return err
			}
			if _, err := tx.db.Exec(ctx, `CREATE TEMP TABLE user_import_changed (user_id text PRIMARY KEY, created boolean NOT NULL) ON COMMIT DROP`); err != nil {
				return err
			}
			last = `SELECT * FROM user_import_last`
		}
		upsert := `
			WITH src AS MATERIALIZED (` + last + `),
			up AS (
				INSERT INTO users AS u (tenant_id, user_id, name, email, phone, locale, timezone)
				SELECT $1, user_id, name, email, phone, locale, timezone FROM src
				ON CONFLICT (tenant_id, user_id) DO UPDATE SET name = EXCLUDED.name, email = EXCLUDED.email,
					phone = EXCLUDED.phone, locale = EXCLUDED.locale, timezone = EXCLUDED.timezone, updated_at = now()
				WHERE (u.name, u.email, u.phone, u.locale, u.timezone) IS DISTINCT FROM
					(EXCLUDED.name, EXCLUDED.email, EXCLUDED.phone, EXCLUDED.locale, EXCLUDED.timezone)
				RETURNING u.user_id, (u.xmax = 0) AS created)`
		if !optional {
			return tx.db.QueryRow(ctx, upsert+`
				SELECT (SELECT count(*) FROM src), count(*) FILTER (WHERE created), count(*) FILTER (WHERE NOT created) FROM up`,
				tenantID).Scan(&res.Users, &res.Created, &res.Updated)
		}
		if _, err := tx.db.Exec(ctx, upsert+`
			INSERT INTO user_import_changed SELECT user_id, created FROM up`, tenantID); err != nil {
			return err
		}
		for _, q := range tx.importSections(sections, maxPushTokens) {
			if _, err := tx.db.Exec(ctx, q, tenantID); err != nil {
				return err
			}
		}
		return tx.db.QueryRow(ctx, `SELECT (SELECT count(*) FROM user_import_last),
			count(*) FILTER (WHERE created), count(*) FILTER (WHERE NOT created) FROM user_import_changed`).
			Scan(&res.Users, &res.Created, &res.Updated)
	})
	if err != nil {
		return ImportResult{}, err
	}
	res.Unchanged = res.Users - res.Created - res.Updated
	return res, nil
}

// importSections are the statements that apply the optional sections (each
// records the users it changed), for the sections the file used.
func (s *Store) importSections(sections ImportSections, maxPushTokens int) []string {
	var qs []string
	changed := func(q string) string {
		return `WITH c AS (` + q + `) INSERT INTO user_import_changed SELECT DISTINCT user_id, false FROM c ON CONFLICT DO NOTHING`
	}
	if sections.Preferences {
		qs = append(qs, changed(`
			INSERT INTO user_preferences AS p (tenant_id, user_id, preferences)
			SELECT $1, user_id, preferences FROM user_import_last WHERE preferences IS NOT NULL
			ON CONFLICT (tenant_id, user_id) DO UPDATE SET preferences = EXCLUDED.preferences, updated_at = now()
			WHERE p.preferences IS DISTINCT FROM EXCLUDED.preferences
			RETURNING p.user_id`))
	}
	if sections.Topics {
		qs = append(qs, `
			INSERT INTO topics (tenant_id, topic)
			SELECT DISTINCT $1::text, t FROM user_import_last, unnest(topics) AS t
			ON CONFLICT DO NOTHING`,
			changed(`
			INSERT INTO topic_subscribers (tenant_id, topic, user_id)
			SELECT DISTINCT $1::text, t, user_id FROM user_import_last, unnest(topics) AS t
			ON CONFLICT DO NOTHING
			RETURNING user_id`))
	}
	if sections.PushTokens {
		// A token on several users' lines goes to the last of them (a device
		// changes hands, as with PUT /v1/users/{id}/push-tokens).
		qs = append(qs, changed(`
			INSERT INTO push_tokens AS p (tenant_id, user_id, token, platform)
			SELECT DISTINCT ON (x.token) $1::text, l.user_id, x.token, x.platform
			FROM user_import_last l, jsonb_to_recordset(l.push_tokens) AS x(token text, platform text)
			ORDER BY x.token, l.seq DESC
			ON CONFLICT (tenant_id, token) DO UPDATE SET user_id = EXCLUDED.user_id, platform = EXCLUDED.platform,
				created_at = CASE WHEN p.user_id = EXCLUDED.user_id THEN p.created_at ELSE now() END, last_seen_at = now()
			WHERE (p.user_id, p.platform) IS DISTINCT FROM (EXCLUDED.user_id, EXCLUDED.platform)
			RETURNING p.user_id`))
		if maxPushTokens > 0 {
			qs = append(qs, fmt.Sprintf(`
			DELETE FROM push_tokens p USING (
				SELECT token, row_number() OVER (PARTITION BY user_id ORDER BY last_seen_at DESC, created_at DESC, token) AS n
				FROM push_tokens WHERE tenant_id = $1
					AND user_id IN (SELECT user_id FROM user_import_last WHERE push_tokens IS NOT NULL)) o
			WHERE p.tenant_id = $1 AND p.token = o.token AND o.n > %d`, maxPushTokens))
		}
	}
	return qs
}
