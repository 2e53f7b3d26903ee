package sandbox_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/herald-notify/herald/internal/dbx"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/testenv"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/sandbox"
)

// statementCounter counts the sandbox's insert statements run through it.
type statementCounter struct {
	dbx.DB
	inserts atomic.Int64
}

func (c *statementCounter) note(sql string) {
	if strings.Contains(sql, "INSERT INTO sandbox_messages") {
		c.inserts.Add(1)
	}
}

func (c *statementCounter) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c.note(sql)
	return c.DB.Exec(ctx, sql, args...)
}

func (c *statementCounter) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c.note(sql)
	return c.DB.Query(ctx, sql, args...)
}

func (c *statementCounter) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c.note(sql)
	return c.DB.QueryRow(ctx, sql, args...)
}

// TestPostgresRecorderCoalescesConcurrentSends: concurrent sends share
// statements (a campaign's hundreds of SMS at once cost a few inserts, not one
// each), each still gets its own message and id; concurrent identical sends
// never share one, so the message's calls count every one of them; a lone
// send after the burst is recorded on its own.
func TestPostgresRecorderCoalescesConcurrentSends(t *testing.T) {
	pool := testenv.Pool(t)
	tenant := pgTenant(t, pool)
	db := &statementCounter{DB: pool}
	p := sandbox.New(sandbox.NewPGRecorder(db))
	ctx := context.Background()

	const n, repeats = 400, 16
	ids := make([]string, n+repeats)
	errs := make([]error, n+repeats)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n + repeats {
		wg.Go(func() {
			<-start
			id := fmt.Sprintf("ntf_%03d", i)
			if i >= n {
				id = "ntf_same"
			}
			tags := providers.Tags{TenantID: tenant, NotificationID: id, Channel: herald.ChannelSMS}
			res, err := p.SendSMS(ctx, providers.SMSMessage{To: "+14155552671", Body: "hello " + id}, tags.IdempotencyKey(), tags)
			ids[i], errs[i] = res.ProviderMessageID, err
		})
	}
	close(start)
	wg.Wait()
	seen := map[string]int{}
	for i := range n + repeats {
		if errs[i] != nil {
			t.Fatalf("send %d: %v", i, errs[i])
		}
		seen[ids[i]]++
	}
	if len(seen) != n+1 || seen[ids[n]] != repeats {
		t.Fatalf("%d distinct message ids for %d distinct sends; the %d identical ones got %d of one id", len(seen), n+1, repeats, seen[ids[n]])
	}
	statements := db.inserts.Load()
	if statements >= n/2 {
		t.Fatalf("%d concurrent sends took %d insert statements: not coalesced", n+repeats, statements)
	}
	var rows, calls, same int
	if err := pool.QueryRow(ctx, `SELECT count(*), sum(calls), sum(calls) FILTER (WHERE notification_id = 'ntf_same')
		FROM sandbox_messages WHERE tenant_id = $1`, tenant).Scan(&rows, &calls, &same); err != nil {
		t.Fatal(err)
	}
	if rows != n+1 || calls != n+repeats || same != repeats {
		t.Fatalf("%d messages, %d calls (%d of the identical one); want %d, %d, %d", rows, calls, same, n+1, n+repeats, repeats)
	}
	t.Logf("%d concurrent sends: %d insert statements", n+repeats, statements)

	tags := providers.Tags{TenantID: tenant, NotificationID: "ntf_alone", Channel: herald.ChannelSMS}
	if _, err := p.SendSMS(ctx, providers.SMSMessage{To: "+14155552671", Body: "alone"}, tags.IdempotencyKey(), tags); err != nil {
		t.Fatal(err)
	}
	if got := db.inserts.Load(); got != statements+1 {
		t.Fatalf("a lone send took %d statements", got-statements)
	}
}
