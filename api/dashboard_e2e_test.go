package api_test

import (
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/providers/providertest"
)

// dashboardFile is the Grafana dashboard docker-compose provisions.
const dashboardFile = "../deploy/grafana/dashboards/herald.json"

// dashboardMetrics returns every metric family a query of the dashboard names:
// the identifiers of its PromQL expressions that are Herald's (herald_*) or
// the Temporal SDK's (temporal_*), with a histogram's _bucket/_sum/_count
// suffix taken off.
func dashboardMetrics(t *testing.T) map[string][]string {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	ident := regexp.MustCompile(`\b(herald|temporal)_[a-zA-Z0-9_:]+`)
	out := map[string][]string{} // family → panels naming it
	queries := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			queries++
			for _, name := range ident.FindAllString(tg.Expr, -1) {
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					name = strings.TrimSuffix(name, suffix)
				}
				out[name] = append(out[name], p.Title)
			}
		}
	}
	if queries < 10 {
		t.Fatalf("the dashboard has %d queries; the scanner is broken", queries)
	}
	return out
}

// TestDashboardNamesOnlyExportedMetrics: every metric the committed Grafana
// dashboard queries is in a live /metrics of a Herald that has sent (after a
// provider failure and a retry), so no panel stays empty for a wrong name.
func TestDashboardNamesOnlyExportedMetrics(t *testing.T) {
	t.Parallel()
	want := dashboardMetrics(t)
	e := startFailEnv(t, 10*time.Second)
	e.sg.Next(providertest.Fail500())
	id := e.mustNotify(t, "queued", nil, "email", "in_app")
	e.h.AwaitChannel(e.key, id, "email", "sent", "", 20*time.Second)
	// A suppression (ada has no device) and a rejection.
	sup := e.mustNotify(t, "queued", nil, "push")
	e.h.AwaitChannel(e.key, sup, "push", "suppressed", "no_address", 10*time.Second)
	apitest.WantError(t, e.h.Submit(e.key, map[string]any{"user_id": "nobody", "template_id": "order"}), http.StatusUnprocessableEntity, "unknown_user", "user_id")
	// The worker's SDK metrics are reported as the tasks complete: poll a while.
	var missing []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		got := e.h.Scrape()
		missing = nil
		for name := range want {
			if _, ok := got[name]; !ok {
				missing = append(missing, name)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("the dashboard queries %s (panels %v), which /metrics does not export", m, want[m])
	}
	if len(want) < 15 {
		t.Errorf("the dashboard names only %d metrics: %v", len(want), want)
	}
}
