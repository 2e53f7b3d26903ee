package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/herald-notify/herald/api"
	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/testenv"
)

// tenantRowCounts counts the tenant's rows in every table of the public schema
// with a tenant_id column (read from the catalog), and its limiter keys.
func tenantRowCounts(t *testing.T, tenantID string) map[string]int {
	t.Helper()
	pool := testenv.Pool(t)
	ctx := context.Background()
	rows, err := pool.Query(ctx, `
		SELECT c.table_name FROM information_schema.columns c JOIN information_schema.tables tb
			ON tb.table_schema = c.table_schema AND tb.table_name = c.table_name AND tb.table_type = 'BASE TABLE'
		WHERE c.table_schema = 'public' AND c.column_name = 'tenant_id' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, s)
	}
	rows.Close()
	if len(tables) < 30 {
		t.Fatalf("the catalog lists only %d tables with tenant_id", len(tables))
	}
	out := map[string]int{}
	for _, tb := range tables {
		var n int
		if err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %q WHERE tenant_id = $1`, tb), tenantID).Scan(&n); err != nil {
			t.Fatalf("%s: %v", tb, err)
		}
		out[tb] = n
	}
	for _, tb := range []string{"rate_limit_buckets", "rate_limit_quotas"} {
		var n int
		if err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %q WHERE strpos(key, $1) > 0`, tb), tenantID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		out[tb] = n
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM tenants WHERE id = $1`, tenantID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	out["tenants"] = n
	return out
}

// populate gives a tenant users, preferences, push tokens, topics, a list,
// delivered notifications on every channel (inbox, sandbox copies, attempts),
// a campaign, a token revocation and audit entries, and
// one notification still open in Temporal (its dedup window), and returns
// that notification's id.
func populate(t *testing.T, h *apitest.Harness, key string) string {
	t.Helper()
	for i := range 3 {
		u := fmt.Sprintf("u%d", i)
		h.PutUser(key, u, map[string]any{"email": u + "@example.com", "phone": fmt.Sprintf("+141555501%02d", i)})
		h.MustDo(http.StatusOK, http.MethodPut, "/v1/users/"+u+"/preferences", key, map[string]any{"channels": map[string]any{"push": true}})
		h.MustDo(http.StatusCreated, http.MethodPut, "/v1/users/"+u+"/push-tokens", key, map[string]any{"token": "tok-" + u, "platform": "android"})
		h.MustDo(http.StatusNoContent, http.MethodDelete, "/v1/users/"+u+"/tokens", key, nil)
	}
	h.MustDo(http.StatusOK, http.MethodPost, "/v1/topics/news/subscribers", key, map[string]any{"user_ids": []string{"u0", "u1"}})
	h.MustDo(http.StatusCreated, http.MethodPost, "/v1/lists", key, "user_id\nu0\nu2\nghost\n", "Content-Type", "text/csv")
	var last string
	for i := range 3 {
		last = h.Accept(key, map[string]any{"user_id": fmt.Sprintf("u%d", i), "template_id": "order",
			"channels": []string{"in_app", "email", "sms"}, "idempotency_key": fmt.Sprintf("td-%d", i)})
	}
	h.AwaitChannel(key, last, herald.ChannelSMS, herald.DeliverySent, "", 20*time.Second)
	h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/campaigns", key, map[string]any{
		"campaign_id": "hello", "template_id": "order", "channels": []string{"in_app"}, "audience": map[string]any{"user_ids": []string{"u0", "u1"}}})
	h.Eventually(20*time.Second, "campaign completed", func() bool {
		r := h.Do(http.MethodGet, "/v1/campaigns/hello", key, nil)
		return r.Str("status") == "completed"
	})
	return last
}

// TestTenantDelete: `herald tenant delete` refuses without --confirm naming
// the tenant; with it, it terminates the tenant's open workflows, and
// afterwards no table holds a row of the tenant (every tenant_id table of the
// catalog, the limiter's keys, the tenants row) while tenant B's rows are all
// there.
func TestTenantDelete(t *testing.T) {
	t.Setenv("HERALD_DATABASE_URL", testenv.DatabaseURL(t))
	t.Setenv("HERALD_TEMPORAL_ADDRESS", testenv.TemporalAddress(t))
	h := apitest.Start(t, apitest.Options{TenantLimits: api.TenantLimits{RatePerSecond: 100, Burst: 100, DailyQuota: 10_000}})
	tenantA, keyA := h.TenantWith("delete-a", "order")
	tenantB, keyB := h.TenantWith("delete-b", "order")
	open := populate(t, h, keyA)
	populate(t, h, keyB)

	before := tenantRowCounts(t, tenantA)
	nonEmpty := 0
	for _, n := range before {
		if n > 0 {
			nonEmpty++
		}
	}
	if nonEmpty < 20 {
		t.Fatalf("tenant A has rows in only %d tables: %v", nonEmpty, before)
	}
	beforeB := tenantRowCounts(t, tenantB)

	if _, err := runCmd(t, "tenant", "delete", tenantA); err == nil || !strings.Contains(err.Error(), "--confirm") {
		t.Fatalf("without --confirm: %v", err)
	}
	if _, err := runCmd(t, "tenant", "delete", "--confirm", tenantB, tenantA); err == nil {
		t.Fatal("--confirm naming another tenant was accepted")
	}
	if got := tenantRowCounts(t, tenantA); got["notifications"] != before["notifications"] {
		t.Fatal("a refused delete removed rows")
	}

	start := time.Now()
	out, err := runCmd(t, "tenant", "delete", "--confirm", tenantA, "--batch", "2", tenantA)
	if err != nil {
		t.Fatalf("tenant delete: %v\n%s", err, out)
	}
	t.Logf("tenant delete in %s:\n%s", time.Since(start), out)
	if !strings.Contains(out, "temporal: ") || !strings.Contains(out, "tenant "+tenantA+" removed") || !strings.Contains(out, "inbox: ") {
		t.Fatalf("progress lines: %s", out)
	}
	for table, n := range tenantRowCounts(t, tenantA) {
		if n != 0 {
			t.Errorf("after the delete %s still holds %d rows of tenant A (before: %d)", table, n, before[table])
		}
	}
	if afterB := tenantRowCounts(t, tenantB); fmt.Sprint(afterB) != fmt.Sprint(beforeB) {
		t.Errorf("tenant B changed:\nbefore %v\nafter  %v", beforeB, afterB)
	}
	h.MustDo(http.StatusOK, http.MethodGet, "/v1/users/u0", keyB, nil)

	// The open notification run of tenant A was terminated.
	h.Eventually(15*time.Second, "no open workflow of tenant A", func() bool {
		resp, err := h.Temporal.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("HeraldTenant = '%s' AND ExecutionStatus = 'Running'", tenantA)})
		return err == nil && len(resp.Executions) == 0
	})
	resp, err := h.Temporal.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("HeraldTenant = '%s' AND ExecutionStatus = 'Terminated'", tenantA)})
	if err != nil || len(resp.Executions) == 0 {
		t.Fatalf("no terminated workflow of tenant A (open notification %s): %v", open, err)
	}

	// Gone: its key opens nothing (401, or 404 while this API process still
	// caches the key), and a second run says the tenant does not exist.
	if r := h.Do(http.MethodGet, "/v1/users/u0", keyA, nil); r.Status != http.StatusUnauthorized && r.Status != http.StatusNotFound {
		t.Fatalf("tenant A's key after the delete: %d %s", r.Status, r.Body)
	}
	if _, err := runCmd(t, "tenant", "delete", "--confirm", tenantA, tenantA); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("second delete: %v", err)
	}
}

// TestDataUsage: `herald data usage` lists every table with its size, and
// with --tenant the tenant's rows (another tenant's not counted).
func TestDataUsage(t *testing.T) {
	t.Setenv("HERALD_DATABASE_URL", testenv.DatabaseURL(t))
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	tenantA, keyA := h.TenantWith("usage-cli-a", "order")
	_, keyB := h.TenantWith("usage-cli-b", "order")
	for i := range 3 {
		h.PutUser(keyA, fmt.Sprintf("a%d", i), map[string]any{})
	}
	for i := range 7 {
		h.PutUser(keyB, fmt.Sprintf("b%d", i), map[string]any{})
	}
	out, err := runCmd(t, "data", "usage")
	if err != nil || !strings.Contains(out, "all tenants: ") || !strings.Contains(out, "\nnotifications ") || !strings.Contains(out, "\nusers ") {
		t.Fatalf("data usage: %v\n%s", err, out)
	}
	out, err = runCmd(t, "data", "usage", "--tenant", tenantA)
	if err != nil {
		t.Fatalf("data usage --tenant: %v\n%s", err, out)
	}
	var users, templates string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && f[0] == "users":
			users = f[1]
		case len(f) >= 2 && f[0] == "templates":
			templates = f[1]
		}
	}
	if users != "3" || templates != "1" {
		t.Fatalf("tenant A's users %q (want 3), templates %q (want 1):\n%s", users, templates, out)
	}
	if _, err := runCmd(t, "data", "usage", "--tenant", "t_nosuchtenant00000"); err == nil {
		t.Fatal("an unknown tenant was accepted")
	}
}
