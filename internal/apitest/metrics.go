package apitest

import (
	"net/http"
	"sort"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Samples is one scrape of GET /metrics: every sample by metric family.
type Samples map[string][]Sample

// Sample is one time series' value (a histogram's count, for histograms).
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Scrape reads the harness's GET /metrics, with its metrics token (the Prometheus text format), and
// parses it with Prometheus' own parser.
func (h *Harness) Scrape() Samples {
	h.T.Helper()
	req, err := http.NewRequest(http.MethodGet, h.URL+"/metrics", nil)
	if err != nil {
		h.T.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+h.MetricsToken)
	resp, err := h.HTTP.Do(req)
	if err != nil {
		h.T.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		h.T.Fatalf("GET /metrics: %d", resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		h.T.Fatalf("parse /metrics: %v", err)
	}
	out := Samples{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			s := Sample{Labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				s.Labels[l.GetName()] = l.GetValue()
			}
			switch {
			case m.Counter != nil:
				s.Value = m.GetCounter().GetValue()
			case m.Gauge != nil:
				s.Value = m.GetGauge().GetValue()
			case m.Histogram != nil:
				s.Value = float64(m.GetHistogram().GetSampleCount())
			case m.Untyped != nil:
				s.Value = m.GetUntyped().GetValue()
			case m.Summary != nil:
				s.Value = float64(m.GetSummary().GetSampleCount())
			}
			out[name] = append(out[name], s)
		}
	}
	return out
}

// Value sums the samples of name whose labels include every pair of labels
// ("k", "v", "k2", "v2", ...).
func (s Samples) Value(name string, labels ...string) float64 {
	var sum float64
	for _, smp := range s[name] {
		ok := true
		for i := 0; i+1 < len(labels); i += 2 {
			if smp.Labels[labels[i]] != labels[i+1] {
				ok = false
				break
			}
		}
		if ok {
			sum += smp.Value
		}
	}
	return sum
}

// Names lists the metric families scraped, sorted.
func (s Samples) Names() []string {
	out := make([]string, 0, len(s))
	for n := range s {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// LabelNames lists every label name any sample of name carries.
func (s Samples) LabelNames(name string) []string {
	seen := map[string]bool{}
	for _, smp := range s[name] {
		for k := range smp.Labels {
			seen[k] = true
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// HasPrefix reports whether some family's name starts with prefix.
func (s Samples) HasPrefix(prefix string) bool {
	for n := range s {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}
