package apitest

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/herald-notify/herald/internal/testenv"
)

// FailInboxWrites makes the database refuse, for the rest of the test, the
// inbox writes of the tenant's items whose title starts with titlePrefix for as
// long as no item due after them (a higher due sequence) is in the user's
// inbox: a trigger raises an error in the inserting transaction, which rolls
// back, and the delivery activity fails and is retried by Temporal like any
// transient database failure, until a later notification has been written
// ahead of it. Only that tenant's rows are affected (tests share the
// database); the trigger is dropped when the test ends. refused counts the
// writes refused so far (a sequence: its count survives the rollbacks).
func (h *Harness) FailInboxWrites(tenantID, titlePrefix string) (refused func() int64) {
	h.T.Helper()
	pool := testenv.Pool(h.T)
	name := "test_fail_inbox_" + strings.NewReplacer("-", "_", ".", "_").Replace(strings.ToLower(tenantID))
	fn, seq := pgx.Identifier{name}.Sanitize(), pgx.Identifier{name + "_n"}.Sanitize()
	ctx := context.Background()
	for _, q := range []string{
		fmt.Sprintf(`CREATE SEQUENCE %s`, seq),
		// The function body is a constant string: its values are quoted literals.
		fmt.Sprintf(`
		CREATE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql AS $f$
		BEGIN
			IF NEW.tenant_id = %s AND starts_with(NEW.title, %s) AND NOT EXISTS (
				SELECT 1 FROM inbox i WHERE i.tenant_id = NEW.tenant_id AND i.user_id = NEW.user_id AND i.due_seq > NEW.due_seq) THEN
				PERFORM nextval(%s);
				RAISE EXCEPTION 'injected inbox write failure (test)';
			END IF;
			RETURN NEW;
		END $f$`, fn, quote(tenantID), quote(titlePrefix), quote(seq)),
		fmt.Sprintf(`CREATE TRIGGER %s BEFORE INSERT ON inbox FOR EACH ROW EXECUTE FUNCTION %s()`, fn, fn),
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			h.T.Fatal(err)
		}
	}
	h.T.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), fmt.Sprintf(`DROP TRIGGER IF EXISTS %s ON inbox`, fn))
		_, _ = pool.Exec(context.Background(), fmt.Sprintf(`DROP FUNCTION IF EXISTS %s()`, fn))
		_, _ = pool.Exec(context.Background(), fmt.Sprintf(`DROP SEQUENCE IF EXISTS %s`, seq))
	})
	return func() int64 {
		h.T.Helper()
		var n int64
		if err := pool.QueryRow(context.Background(), fmt.Sprintf(`SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM %s`, seq)).Scan(&n); err != nil {
			h.T.Fatal(err)
		}
		return n
	}
}

// quote is s as an SQL string literal.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
