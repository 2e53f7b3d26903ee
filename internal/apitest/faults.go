package apitest

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-notify/herald/internal/testenv"
)

// FailInboxWrites makes the database refuse, for the rest of the test, every
// inbox insert of the tenant whose title starts with titlePrefix while its
// notification is younger than failFor (counted from accepted_at): a trigger
// raises an error in the inserting transaction, which rolls back, and the
// delivery activity fails and is retried by Temporal like any transient
// database failure. Only that tenant's rows are affected (tests share the
// database); the trigger is dropped when the test ends.
func (h *Harness) FailInboxWrites(tenantID, titlePrefix string, failFor time.Duration) {
	h.T.Helper()
	pool := testenv.Pool(h.T)
	name := "test_fail_inbox_" + strings.NewReplacer("-", "_", ".", "_").Replace(strings.ToLower(tenantID))
	fn := pgx.Identifier{name}.Sanitize()
	ctx := context.Background()
	// The function body is a constant string: its values are quoted literals.
	body := fmt.Sprintf(`
		CREATE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql AS $f$
		BEGIN
			IF NEW.tenant_id = %s AND starts_with(NEW.title, %s) AND EXISTS (
				SELECT 1 FROM notifications n WHERE n.tenant_id = NEW.tenant_id AND n.id = NEW.notification_id
				AND clock_timestamp() - n.accepted_at < make_interval(secs => %f)) THEN
				RAISE EXCEPTION 'injected inbox write failure (test)';
			END IF;
			RETURN NEW;
		END $f$`, fn, quote(tenantID), quote(titlePrefix), failFor.Seconds())
	if _, err := pool.Exec(ctx, body); err != nil {
		h.T.Fatal(err)
	}
	if _, err := pool.Exec(ctx, fmt.Sprintf(`CREATE TRIGGER %s BEFORE INSERT ON inbox FOR EACH ROW EXECUTE FUNCTION %s()`, fn, fn)); err != nil {
		h.T.Fatal(err)
	}
	h.T.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), fmt.Sprintf(`DROP TRIGGER IF EXISTS %s ON inbox`, fn))
		_, _ = pool.Exec(context.Background(), fmt.Sprintf(`DROP FUNCTION IF EXISTS %s()`, fn))
	})
}

// quote is s as an SQL string literal.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
