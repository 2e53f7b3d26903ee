package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/testenv"
)

// runCmd runs the herald command in process against the test database.
func runCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), args, &out, slog.New(slog.DiscardHandler))
	return out.String(), err
}

// `herald tenant limits` is the operator's command: it sets what a tenant's key
// cannot, and a grant of allow_critical lets the tenant save critical templates.
func TestTenantLimitsCommand(t *testing.T) {
	t.Setenv("HERALD_DATABASE_URL", testenv.DatabaseURL(t))
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	tenantID, key := h.Tenant("cli-limits")
	body := map[string]any{"category": "security", "critical": true, "sms": map[string]any{"text": "code {{.code}}"}}
	if r := h.Do(http.MethodPut, "/v1/templates/otp", key, body); r.Status != http.StatusForbidden {
		t.Fatalf("critical template before the grant: %d %s", r.Status, r.Body)
	}

	out, err := runCmd(t, "tenant", "limits", "--tenant", tenantID)
	if err != nil || out != "tenant "+tenantID+": api_rate_per_second 0 (server default), api_burst 0 (server default), daily_quota 0 (server default), allow_critical false, max_audience_size 0 (server default), max_concurrent_campaigns 0 (server default), max_list_bytes 0 (server default)\n" {
		t.Fatalf("show: %q %v", out, err)
	}
	out, err = runCmd(t, "tenant", "limits", "--tenant", tenantID, "--rate", "25.5", "--burst", "60", "--daily-quota", "1000", "--allow-critical=true",
		"--max-audience", "5000", "--max-concurrent-campaigns", "3", "--max-list-bytes", "1048576")
	if err != nil || !strings.Contains(out, "api_rate_per_second 25.5, api_burst 60, daily_quota 1000, allow_critical true, max_audience_size 5000, max_concurrent_campaigns 3, max_list_bytes 1048576") {
		t.Fatalf("set: %q %v", out, err)
	}
	if r := h.Do(http.MethodPut, "/v1/templates/otp", key, body); r.Status != http.StatusCreated || r.JSON["critical"] != true {
		t.Fatalf("critical template after the grant: %d %s", r.Status, r.Body)
	}
	if r := h.Do(http.MethodGet, "/v1/settings", key, nil); r.JSON["api_rate_per_second"] != 25.5 || r.JSON["daily_quota"] != 1000.0 {
		t.Fatalf("the tenant reads: %s", r.Body)
	}
	// A flag left out keeps its value.
	if _, err := runCmd(t, "tenant", "limits", "--tenant", tenantID, "--allow-critical=false"); err != nil {
		t.Fatal(err)
	}
	if l, err := h.Store.GetTenantLimits(context.Background(), tenantID); err != nil ||
		l != (store.TenantLimits{APIRatePerSecond: 25.5, APIBurst: 60, DailyQuota: 1000, MaxAudienceSize: 5000, MaxConcurrentCampaigns: 3, MaxListBytes: 1 << 20}) {
		t.Fatalf("after --allow-critical=false: %+v %v", l, err)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--rate", "5"}, "needs --tenant"},
		{[]string{"--tenant", "t_0000000000000000", "--rate", "5"}, "does not exist"},
		{[]string{"--tenant", tenantID, "--rate", "-1"}, "api_rate_per_second must be from 0 to 100000"},
		{[]string{"--tenant", tenantID, "--burst", "2000000"}, "api_burst must be from 0"},
		{[]string{"--tenant", tenantID, "--daily-quota", "x"}, "invalid value"},
		{[]string{"--tenant", tenantID, "extra"}, "unexpected argument"},
	} {
		if _, err := runCmd(t, append([]string{"tenant", "limits"}, c.args...)...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one containing %q", c.args, err, c.want)
		}
	}
	if l, _ := h.Store.GetTenantLimits(context.Background(), tenantID); l.APIRatePerSecond != 25.5 || l.APIBurst != 60 {
		t.Fatalf("a refused command changed the limits: %+v", l)
	}
}
