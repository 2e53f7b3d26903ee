package api_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/herald"
)

// BenchmarkCampaignRate measures how closely rate_per_second holds, as a
// campaign team sets it: in-app + sandbox email to users created just before,
// at 100, 2,000 and 100,000 recipients per second. Each campaign is about 15 s
// of sends at its rate (30,000 recipients at the most) and its progress is
// sampled every 200 ms. It reports per_s, recipients per second over the
// whole drain, and max10s/rate and min10s/rate, the busiest and the slowest
// 10 s window as a ratio to the rate (the promise: the busiest at most 1.10;
// the slowest at least 0.90 where the machine can send that fast at all). Run
// it against the test services (make services-up prints the exports):
//
//	go test -run '^$' -bench BenchmarkCampaignRate -benchtime 1x -timeout 20m ./api/
func BenchmarkCampaignRate(b *testing.B) {
	for _, rate := range []int{100, 2_000, 100_000} {
		b.Run(fmt.Sprintf("rate=%d", rate), func(b *testing.B) {
			n := min(rate*15, 30_000)
			h := apitest.Start(b, apitest.Options{})
			tenantID, key := h.TenantWith(fmt.Sprintf("rate-%d", rate), "promo")
			campaignUsers(b, h, tenantID, "r", n)
			b.ResetTimer()
			for i := range b.N {
				id := fmt.Sprintf("rate-%d-%d", rate, i)
				h.MustDo(http.StatusAccepted, http.MethodPost, "/v1/campaigns", key, map[string]any{"campaign_id": id, "template_id": "promo",
					"channels": []herald.Channel{herald.ChannelInApp, herald.ChannelEmail}, "rate_per_second": rate,
					"audience": map[string]any{"all_users": true}})
				samples := sampleCampaign(h, key, id, n)
				drain := samples[len(samples)-1].at.Sub(samples[0].at)
				hi, lo := tenSecondRates(samples)
				b.ReportMetric(float64(n)/drain.Seconds(), "per_s")
				b.ReportMetric(hi/float64(rate), "max10s/rate")
				b.ReportMetric(lo/float64(rate), "min10s/rate")
			}
		})
	}
}

type progressSample struct {
	at        time.Time
	processed int
}

// sampleCampaign polls the campaign every 200 ms from its start until all n
// recipients are processed.
func sampleCampaign(h *apitest.Harness, key, id string, n int) []progressSample {
	h.T.Helper()
	var out []progressSample
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		p := num(h.MustDo(http.StatusOK, http.MethodGet, "/v1/campaigns/"+id, key, nil).JSON, "recipients_processed")
		out = append(out, progressSample{time.Now(), p})
		if p >= n {
			return out
		}
		time.Sleep(200 * time.Millisecond)
	}
	h.T.Fatalf("campaign %s: %d of %d processed after 10 min", id, out[len(out)-1].processed, n)
	return nil
}

// tenSecondRates are the highest and lowest recipients per second over any
// 10 s window of the samples (the whole drain when it is shorter).
func tenSecondRates(s []progressSample) (hi, lo float64) {
	lo = -1
	for i := range s {
		j := i
		for j < len(s) && s[j].at.Sub(s[i].at) < 10*time.Second {
			j++
		}
		if j == len(s) {
			if i > 0 {
				break
			}
			j = len(s) - 1 // shorter than 10 s: the whole drain
		}
		r := float64(s[j].processed-s[i].processed) / s[j].at.Sub(s[i].at).Seconds()
		hi = max(hi, r)
		if lo < 0 || r < lo {
			lo = r
		}
	}
	return hi, lo
}
