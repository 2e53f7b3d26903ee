package activities_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/herald-notify/herald/activities"
	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/retention"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/testenv"
)

// freshStore is a store on a database of its own, migrated to the latest
// version: maintenance_runs is global, and the shared test database's holds
// other tests' runs.
func freshStore(t *testing.T) (*store.Store, *pgxpool.Pool) {
	t.Helper()
	pool, _ := testenv.FreshPool(t, "herald_maint", 0)
	return store.New(pool), pool
}

// The first maintenance run after the upgrade that added inbox_items to the
// report finds no recorded cap: an operator cap lowered in the same deploy
// (100 → 20) must still be walked, once; the run records the cap, and the
// next run knows it.
func TestFirstRunWithNoRecordedInboxCapWalksTheInboxes(t *testing.T) {
	ctx := context.Background()
	st, pool := freshStore(t)
	tn, _, err := st.CreateTenant(ctx, "nocap")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.UpsertUser(ctx, store.User{TenantID: tn.ID, UserID: "ada"}); err != nil {
		t.Fatal(err)
	}
	// Written under the former cap, 100.
	before := store.New(pool)
	before.SetInboxCap(100)
	now := time.Now().UTC()
	var items []store.NewInboxItem
	for i := range 30 {
		items = append(items, store.NewInboxItem{TenantID: tn.ID, UserID: "ada", NotificationID: fmt.Sprintf("n_%03d", i), Title: "t", Body: "b",
			CreatedAt: now.Add(time.Duration(i) * time.Second)})
	}
	if _, err := before.InsertInboxItems(ctx, items); err != nil {
		t.Fatal(err)
	}
	// The run before the upgrade: a report without inbox_items.
	if _, err := pool.Exec(ctx, `INSERT INTO maintenance_runs (workflow_id, run_id, started_at, report) VALUES ('herald-maintenance', 'old', now(), '{"deleted": {}}')`); err != nil {
		t.Fatal(err)
	}
	if _, recorded, err := st.LastMaintenanceInboxCap(ctx); err != nil || recorded {
		t.Fatalf("a cap recorded before any report held one: %v, %v", recorded, err)
	}
	op := retention.Defaults
	op.InboxItems = 20
	st.SetInboxCap(op.InboxItems) // as app.New does
	a := &activities.Activities{Store: st, Retention: op}
	for from := (contract.MaintenanceCursor{}); ; {
		res, err := a.MaintenancePrune(ctx, contract.MaintenancePruneInput{Now: time.Now(), From: from})
		if err != nil {
			t.Fatal(err)
		}
		if res.Done {
			break
		}
		from = res.Next
	}
	counts, err := st.RecountInbox(ctx, tn.ID, "ada")
	if err != nil || counts.Total != 20 {
		t.Fatalf("after the first run ada's inbox holds %d items (want the operator's cap, 20), %v", counts.Total, err)
	}
	if err := a.MaintenanceReport(ctx, contract.MaintenanceReportInput{WorkflowID: "herald-maintenance", RunID: "new", StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if last, recorded, err := st.LastMaintenanceInboxCap(ctx); err != nil || !recorded || last != 20 {
		t.Fatalf("after the run: cap %d recorded %v, %v; want 20", last, recorded, err)
	}
}

// A slice past its budget starts no other tenant: a pass run a slice at a
// time with no budget (a batch a slice) finishes one tenant without
// deleting a row of the next, so a caller that stops once the cursor leaves
// a tenant (the retention tests, on a database other tests share) prunes
// only that tenant.
func TestSlicePastItsBudgetStartsNoOtherTenant(t *testing.T) {
	ctx := context.Background()
	st, pool := freshStore(t)
	var tenants []string
	for _, name := range []string{"first", "second"} {
		tn, _, err := st.CreateTenant(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		tenants = append(tenants, tn.ID)
		if _, err := pool.Exec(ctx, `INSERT INTO sandbox_messages (tenant_id, notification_id, channel, idempotency_key, recipient, body, payload, created_at)
			SELECT $1, convert_to('n' || g, 'UTF8'), 'email', 'k' || g, 'r', 'b', '{}', now() - interval '30 days' FROM generate_series(1, 3) g`, tn.ID); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(tenants)
	a := &activities.Activities{Store: st, Retention: retention.Defaults}
	from := contract.MaintenanceCursor{TenantID: tenants[0]}
	for range 1000 {
		res, err := a.MaintenancePrune(ctx, contract.MaintenancePruneInput{Now: time.Now(), From: from, Budget: time.Nanosecond})
		if err != nil {
			t.Fatal(err)
		}
		if res.Done || res.Next.TenantID != tenants[0] {
			if res.Done || res.Next != (contract.MaintenanceCursor{TenantID: tenants[1]}) {
				t.Fatalf("after the first tenant the slice stopped at %+v (done %v), want the second's start", res.Next, res.Done)
			}
			break
		}
		from = res.Next
	}
	for i, want := range []int{0, 3} {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM sandbox_messages WHERE tenant_id = $1`, tenants[i]).Scan(&n); err != nil || n != want {
			t.Fatalf("tenant %d: %d sandbox messages left, %v; want %d", i, n, err, want)
		}
	}
}
