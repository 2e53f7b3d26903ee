package dbx_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/herald-notify/herald/internal/dbx"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/testenv"
)

// The ids Herald makes are what the codec takes for one, and they come back
// as they went in: bound as a parameter (marked by the handle), inside an
// array, and scanned from a bytea. A string that is not an id is its bytes,
// and a text parameter gets an id's text unchanged.
func TestNotificationIDsAreBytesInTheDatabase(t *testing.T) {
	ctx := context.Background()
	db := dbx.WithNotificationIDs(testenv.Pool(t))
	key := ids.IdempotencyKeyHash("order-1")
	id := ids.NotificationID(key, "01a2419b-8763-72d3-906b-435b6af830fc")
	campaign := ids.CampaignNotificationID("t_1", "c_1", "ada")
	if !strings.HasPrefix(id, ids.NotificationIDPrefix) || !strings.HasPrefix(campaign, ids.NotificationIDPrefix) {
		t.Fatalf("ids %s, %s do not start with %s", id, campaign, ids.NotificationIDPrefix)
	}

	var n int
	var back, text string
	if err := db.QueryRow(ctx, `SELECT octet_length($1::bytea), $1::bytea, $2::text`, id, campaign).Scan(&n, &back, &text); err != nil {
		t.Fatal(err)
	}
	if n != ids.NotificationIDSize || back != id || text != campaign {
		t.Fatalf("bound %s: %d bytes, read back %s; as text %s, want %s", id, n, back, text, campaign)
	}
	if err := db.QueryRow(ctx, `SELECT encode(substring($1::bytea FROM 1 FOR 16), 'hex')`, id).Scan(&text); err != nil || text != key.String() {
		t.Fatalf("the id's first 16 bytes: %s (%v), want its key hash %s", text, err, key)
	}

	var got []string
	var lengths []int
	if err := db.QueryRow(ctx, `SELECT array_agg(x ORDER BY o), array_agg(octet_length(x) ORDER BY o) FROM unnest($1::bytea[]) WITH ORDINALITY AS u(x, o)`,
		[]string{id, campaign, "n1"}).Scan(&got, &lengths); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{id, campaign, "n1"}) || !slices.Equal(lengths, []int{32, 32, 2}) {
		t.Fatalf("an array of ids read back %v, %v bytes", got, lengths)
	}

	// Not an id (upper case, too short, a name): its bytes, both ways.
	for _, s := range []string{strings.ToUpper(id), id[:40], "n1", ""} {
		if err := db.QueryRow(ctx, `SELECT octet_length($1::bytea), $1::bytea`, s).Scan(&n, &back); err != nil || n != len(s) || back != s {
			t.Fatalf("%q: %d bytes, read back %q (%v)", s, n, back, err)
		}
	}

	// The handle marks without changing the caller's arguments.
	args := []any{id, "ada"}
	if _, err := db.Exec(ctx, `SELECT $1::bytea, $2::text`, args...); err != nil {
		t.Fatal(err)
	}
	if _, ok := args[0].(string); !ok {
		t.Fatalf("the caller's argument became %T", args[0])
	}
}

// A transaction begun on the handle marks ids too; an unmarked statement on
// the pool itself would send the id's 66 characters.
func TestNotificationIDsInATransaction(t *testing.T) {
	ctx := context.Background()
	pool := testenv.Pool(t)
	id := ids.NotificationID(ids.IdempotencyKeyHash("order-2"), "01a2419b-8763-72d3-906b-435b6af830fc")
	tx, err := dbx.WithNotificationIDs(pool).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a test's transaction
	var marked, raw int
	if err := tx.QueryRow(ctx, `SELECT octet_length($1::bytea)`, id).Scan(&marked); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT octet_length($1::bytea)`, id).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if marked != ids.NotificationIDSize || raw != len(id) {
		t.Fatalf("in the transaction %d bytes, on the bare pool %d; want %d and %d", marked, raw, ids.NotificationIDSize, len(id))
	}
}

// The pool refuses the two query modes that would send an id as its text.
func TestConnectRefusesModesWithoutParameterTypes(t *testing.T) {
	url := testenv.DatabaseURL(t)
	for _, mode := range []string{"exec", "simple_protocol"} {
		pool, err := store.Connect(context.Background(), url+"&default_query_exec_mode="+mode)
		if err == nil {
			pool.Close()
			t.Fatalf("default_query_exec_mode=%s: connected", mode)
		}
		if !strings.Contains(err.Error(), "default_query_exec_mode") {
			t.Fatalf("default_query_exec_mode=%s: %v, want it named", mode, err)
		}
	}
	pool, err := store.Connect(context.Background(), url+"&default_query_exec_mode=cache_describe")
	if err != nil {
		t.Fatalf("cache_describe: %v", err)
	}
	pool.Close()
}
