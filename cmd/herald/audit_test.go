package main

import (
	"context"
	"regexp"
	"testing"

	"github.com/herald-notify/herald/api"
	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/testenv"
)

// Every change the operator CLI makes is in the tenant's audit log, as the
// operator API's are: before, `herald tenant limits`, `herald key
// create|revoke` and `herald tenant create` left no trace.
func TestOperatorCLIChangesAreAudited(t *testing.T) {
	t.Setenv("HERALD_DATABASE_URL", testenv.DatabaseURL(t))
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	ctx := context.Background()

	out, err := runCmd(t, "tenant", "create", "--name", testenv.UniqueName(t, "cli-audit"))
	if err != nil {
		t.Fatal(err)
	}
	tenantID := regexp.MustCompile(`tenant (t_\S+)`).FindStringSubmatch(out)[1]
	if _, err := runCmd(t, "tenant", "limits", "--tenant", tenantID, "--daily-quota", "500"); err != nil {
		t.Fatal(err)
	}
	if _, err := runCmd(t, "tenant", "limits", "--tenant", tenantID); err != nil { // a read: no entry
		t.Fatal(err)
	}
	out, err = runCmd(t, "key", "create", "--tenant", tenantID, "--name", "ci")
	if err != nil {
		t.Fatal(err)
	}
	keyID := regexp.MustCompile(`API key (\S+) for tenant`).FindStringSubmatch(out)[1]
	if _, err := runCmd(t, "key", "revoke", "--tenant", tenantID, keyID); err != nil {
		t.Fatal(err)
	}
	if _, err := runCmd(t, "key", "revoke", "--tenant", tenantID, "k_nosuchkey"); err == nil { // refused: no entry
		t.Fatal("revoking an unknown key succeeded")
	}

	entries, err := h.Store.ListAudit(ctx, tenantID, store.AuditFilter{Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		if e.APIKeyID != api.AuditOperatorCLIKeyID || e.Status != 200 {
			t.Errorf("entry %s: api_key_id %q status %d, want %q 200", e.Action, e.APIKeyID, e.Status, api.AuditOperatorCLIKeyID)
		}
		got = append(got, e.Action+" "+e.Target+" "+string(e.Details))
	}
	want := []string{ // newest first
		api.AuditAPIKeyRevoke + " key_id=" + keyID + ` {"request": {"force": false}}`,
		api.AuditAPIKeyCreate + `  {"request": {"name": "ci"}}`,
		api.AuditTenantLimitsPut + " tenant_id=" + tenantID + ` {"request": {"daily_quota": 500}}`,
		api.AuditTenantCreate + " tenant_id=" + tenantID,
	}
	if len(got) != len(want) {
		t.Fatalf("audit log:\n%q\nwant %d entries like\n%q", got, len(want), want)
	}
	for i := range want {
		if len(got[i]) < len(want[i]) || got[i][:len(want[i])] != want[i] {
			t.Errorf("entry %d = %q, want it to start with %q", i, got[i], want[i])
		}
	}
}
