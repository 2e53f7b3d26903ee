package activities_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/testenv"
)

// measured runs a campaign and reports its recipients per second and the CPU
// its services spent per recipient.
func measured(b *testing.B, name string, n int, run func() time.Duration) {
	b.Helper()
	pgPort, temporalPort := portOf(testenv.DatabaseURL(b)), portOf(testenv.TemporalAddress(b))
	before := cpuSnapshot(pgPort, temporalPort)
	took := run()
	used := cpuSnapshot(pgPort, temporalPort).minus(before)
	perSec := float64(n) / took.Seconds()
	ms := func(j uint64) float64 { return float64(j) * 10 / float64(n) }
	ours := used["test"] + used["postgres"] + used["temporal"]
	b.ReportMetric(perSec, name+"-recipients/s")
	b.ReportMetric(ms(ours), name+"-cpu-ms/recipient")
	util := 0.0
	if used["total"] > 0 {
		util = 100 * float64(used["busy"]) / float64(used["total"])
	}
	b.Logf("%s: %d recipients in %s: %.0f/s; CPU per recipient %.3f ms (test process %.3f, postgres %.3f, temporal %.3f); "+
		"machine %.0f%% busy, %.3f ms per recipient of it by other processes; on 2 CPUs of its own: %.0f/s",
		name, n, took.Round(time.Millisecond), perSec, ms(ours), ms(used["test"]), ms(used["postgres"]), ms(used["temporal"]),
		util, ms(used["other"]), 2*1000/ms(ours))
}

// runCampaign posts the campaign, waits until it completed and returns how
// long it took from the POST, and the campaign as the API then shows it. It
// watches the campaign's status row (every 10 ms), not GET /v1/campaigns/{id},
// whose counts would add their own cost to the campaign's.
func runCampaign(tb testing.TB, h *apitest.Harness, key string, body map[string]any, within time.Duration) (time.Duration, apitest.Response) {
	tb.Helper()
	id := body["campaign_id"].(string)
	pool := testenv.Pool(tb)
	start := time.Now()
	r := h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/campaigns", key, body)
	tenantID := r.Str("tenant_id")
	if tenantID == "" {
		tn, err := h.Store.TenantByAPIKey(context.Background(), key)
		if err != nil {
			tb.Fatal(err)
		}
		tenantID = tn.ID
	}
	h.Eventually(within, "campaign "+id+" completed", func() bool {
		var status string
		if err := pool.QueryRow(context.Background(), `SELECT status FROM campaigns WHERE tenant_id = $1 AND id = $2`, tenantID, id).Scan(&status); err != nil {
			tb.Fatal(err)
		}
		if status == herald.CampaignCompleted {
			return true
		}
		time.Sleep(10 * time.Millisecond)
		return false
	})
	took := time.Since(start)
	return took, h.MustDo(http.StatusOK, http.MethodGet, "/v1/campaigns/"+id, key, nil)
}

// BenchmarkCampaignThroughput drains, in one run against the same services
// and one in-process worker (default page size and window), 5,000 recipients
// three ways and reports recipients per second of each:
//
//   - identical: in-app + email, the same content for everyone (sandbox);
//   - personalized: email + SMS + push, per-recipient data from a list upload
//     (sandbox for every channel);
//   - personalized-fakes: the same through the SendGrid, Twilio and FCM fakes.
//
// Run it with: go test -run '^$' -bench BenchmarkCampaignThroughput -benchtime 1x ./activities/
func BenchmarkCampaignThroughput(b *testing.B) {
	const n = 5000
	f := apitest.StartFakes(b)
	h := apitest.Start(b, apitest.Options{Process: process(f)})
	tenantID, key := h.TenantWith("bench", "promo")
	h.Template(key, personalizedTemplate("personal"))
	list, users := personalizedAudience(b, h, tenantID, key, "p", n)
	fakeTenant, fakeKey := h.Tenant("bench-fakes")
	h.Template(fakeKey, personalizedTemplate("personal"))
	configure(h, f, fakeTenant)
	fakeList, _ := personalizedAudience(b, h, fakeTenant, fakeKey, "q", n)
	// The audience was just bulk-loaded: analyze it, as autovacuum soon would,
	// so the audience queries (CountAudience, AudiencePage) are planned as they
	// are in a running system, not for tables statistics still call empty.
	if _, err := testenv.Pool(b).Exec(context.Background(), `ANALYZE users, recipient_list_members, push_tokens`); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		suffix := time.Now().Format("150405.000")
		measured(b, "identical", n, func() time.Duration {
			took, _ := runCampaign(b, h, key, map[string]any{"campaign_id": "identical-" + suffix, "template_id": "promo",
				"channels": []string{"in_app", "email"}, "data": map[string]any{"title": "Sale", "body": "20% off"},
				"audience": map[string]any{"user_ids": users}}, 5*time.Minute)
			return took
		})
		measured(b, "personalized", n, func() time.Duration {
			took, _ := runCampaign(b, h, key, map[string]any{"campaign_id": "personal-" + suffix, "template_id": "personal",
				"channels": []string{"email", "sms", "push"}, "data": map[string]any{"offer": "spring"},
				"audience": map[string]any{"list_id": list}}, 5*time.Minute)
			return took
		})
		measured(b, "personalized-fakes", n, func() time.Duration {
			took, _ := runCampaign(b, h, fakeKey, map[string]any{"campaign_id": "fakes-" + suffix, "template_id": "personal",
				"channels": []string{"email", "sms", "push"}, "data": map[string]any{"offer": "spring"},
				"audience": map[string]any{"list_id": fakeList}}, 5*time.Minute)
			return took
		})
	}
}
