package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/testenv"
)

// globalTables are the tables that are not per tenant, each with how a
// distributed deployment holds it (docs/scaling.md). Every other table must
// have a tenant_id column and follow the tenant-first key rule. A new table
// without tenant_id fails TestTenantFirstKeys until it is named here.
var globalTables = map[string]string{
	// Reference tables: small, read on every request, copied to every node.
	"tenants": "reference table",
	// api_keys has tenant_id, but a key is looked up by its hash before the
	// tenant is known: a reference table (a few rows per tenant), so the
	// lookup is local on every node.
	"api_keys": "reference table (looked up by key_hash before the tenant is known)",
	// The limiter's buckets and quotas are keyed by strings that embed the
	// tenant ("tenant-day:t_…"): distributed by that key on their own,
	// colocated with nothing.
	"rate_limit_buckets": "distributed by key",
	"rate_limit_quotas":  "distributed by key",
	// The operator's record of maintenance runs, and golang-migrate's version.
	"maintenance_runs":  "coordinator-local table",
	"schema_migrations": "coordinator-local table",
}

// TestTenantFirstKeys reads the migrated catalog: every primary key, unique
// constraint and unique index of a per-tenant table starts with tenant_id
// (partitioned tables included: their keys also hold the partition key), and
// every foreign key of one joins on tenant_id (to the referenced table's
// tenant_id, or to tenants.id), so none crosses tenants. It fails naming each
// offender.
func TestTenantFirstKeys(t *testing.T) {
	ctx := context.Background()
	pool := testenv.Pool(t)
	rows, err := pool.Query(ctx, `
		SELECT c.relname,
			EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped)
		FROM pg_class c
		WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition`)
	if err != nil {
		t.Fatal(err)
	}
	perTenant := map[string]bool{}
	for rows.Next() {
		var name string
		var has bool
		if err := rows.Scan(&name, &has); err != nil {
			t.Fatal(err)
		}
		_, global := globalTables[name]
		switch {
		case global:
		case !has:
			t.Errorf("table %s has no tenant_id and is not named in globalTables", name)
		default:
			perTenant[name] = true
		}
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	for _, must := range []string{"notifications", "deliveries", "inbox", "audit_log", "webhook_messages"} {
		if !perTenant[must] {
			t.Fatalf("%s is not seen as a per-tenant table: the catalog query is wrong", must)
		}
	}

	// Unique indexes (every primary key and unique constraint has one) and
	// their first column.
	rows, err = pool.Query(ctx, `
		SELECT c.relname, i.relname, a.attname
		FROM pg_index x JOIN pg_class c ON c.oid = x.indrelid JOIN pg_class i ON i.oid = x.indexrelid
		JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = x.indkey[0]
		WHERE c.relnamespace = 'public'::regnamespace AND NOT c.relispartition AND x.indisunique`)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for rows.Next() {
		var table, index, first string
		if err := rows.Scan(&table, &index, &first); err != nil {
			t.Fatal(err)
		}
		if !perTenant[table] {
			continue
		}
		checked++
		if first != "tenant_id" {
			t.Errorf("%s: unique index %s starts with %s, not tenant_id", table, index, first)
		}
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	if checked < 30 {
		t.Fatalf("only %d unique indexes of per-tenant tables checked", checked)
	}

	// Foreign keys: the pairs of columns they join.
	rows, err = pool.Query(ctx, `
		SELECT c.relname, k.conname, r.relname,
			array(SELECT a.attname || '=' || b.attname
			      FROM unnest(k.conkey, k.confkey) AS p(l, f)
			      JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = p.l
			      JOIN pg_attribute b ON b.attrelid = k.confrelid AND b.attnum = p.f)
		FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_class r ON r.oid = k.confrelid
		WHERE k.contype = 'f' AND c.relnamespace = 'public'::regnamespace AND NOT c.relispartition AND k.conparentid = 0`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var table, name, ref string
		var pairs []string
		if err := rows.Scan(&table, &name, &ref, &pairs); err != nil {
			t.Fatal(err)
		}
		if !perTenant[table] {
			continue
		}
		joined := strings.Join(pairs, ",")
		ok := false
		for _, p := range pairs {
			if p == "tenant_id=tenant_id" || (ref == "tenants" && p == "tenant_id=id") {
				ok = true
			}
		}
		if !ok {
			t.Errorf("%s: foreign key %s to %s joins %s, not on tenant_id", table, name, ref, joined)
		}
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
}

// partitionsAt creates, inside the test's transaction, the partitions of
// every partitioned table that hold time at (a test writing rows at a fixed
// date outside the partitions the migration and maintenance keep).
func partitionsAt(t *testing.T, tx pgx.Tx, at time.Time) {
	t.Helper()
	for _, pt := range store.PartitionedTables {
		start := pt.Start(at)
		end := start.AddDate(0, 0, 1)
		if pt.Unit == "week" {
			end = start.AddDate(0, 0, 7)
		}
		if _, err := tx.Exec(context.Background(), fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s PARTITION OF %s FOR VALUES FROM ('%s') TO ('%s')`,
			pt.PartitionName(start), pt.Table, start.Format(time.RFC3339), end.Format(time.RFC3339))); err != nil {
			t.Fatal(err)
		}
	}
}
