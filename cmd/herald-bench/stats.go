package main

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Latency summarises a set of durations. Percentiles are nearest-rank: the p-th
// percentile is the smallest sample such that at least p% of samples are <= it.
type Latency struct {
	Count  int     `json:"count"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P90Ms  float64 `json:"p90_ms"`
	P99Ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
}

// percentile returns the nearest-rank p-th percentile (0 < p <= 100) of sorted
// (ascending) durations, or 0 for no samples.
func percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(n)))
	rank = max(1, min(rank, n))
	return sorted[rank-1]
}

// summarize sorts a copy of ds and computes the summary.
func summarize(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return Latency{
		Count:  len(s),
		MeanMs: ms(sum / time.Duration(len(s))),
		P50Ms:  ms(percentile(s, 50)),
		P90Ms:  ms(percentile(s, 90)),
		P99Ms:  ms(percentile(s, 99)),
		MaxMs:  ms(s[len(s)-1]),
	}
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/float64(time.Microsecond)) / 1000 }

// rate is count per second over elapsed (0 when elapsed is not positive).
func rate(count int, elapsed time.Duration) float64 {
	if elapsed <= 0 {
		return 0
	}
	return float64(count) / elapsed.Seconds()
}

// Ratio is one throughput ratio against its goal.
type Ratio struct {
	Name        string  `json:"name"`
	Numerator   float64 `json:"numerator_per_sec"`
	Denominator float64 `json:"denominator_per_sec"`
	Value       float64 `json:"value"`
	Goal        float64 `json:"goal"`
	// Valid is false when the ratio cannot be computed (a phase did not run or
	// measured nothing); an invalid ratio never passes.
	Valid bool   `json:"valid"`
	Pass  bool   `json:"pass"`
	Note  string `json:"note,omitempty"`
}

// evalRatio computes num/den and checks it against goal (value >= goal passes).
func evalRatio(name string, num, den, goal float64) Ratio {
	r := Ratio{Name: name, Numerator: num, Denominator: den, Goal: goal}
	if den <= 0 || num < 0 || math.IsNaN(num) || math.IsNaN(den) || math.IsInf(num, 0) || math.IsInf(den, 0) {
		r.Note = "not measured"
		return r
	}
	r.Valid = true
	r.Value = num / den
	// A tiny tolerance so that, e.g., 900/1000 is not a miss of 0.9 by rounding.
	r.Pass = r.Value >= goal-1e-9
	return r
}

// Verdict is PASS, MISS or N/A.
func (r Ratio) Verdict() string {
	switch {
	case !r.Valid:
		return "N/A"
	case r.Pass:
		return "PASS"
	default:
		return "MISS"
	}
}

// VerdictNote is the verdict with the ratio's note, if any.
func (r Ratio) VerdictNote() string {
	if r.Note == "" {
		return r.Verdict()
	}
	return r.Verdict() + " (" + r.Note + ")"
}

// fmtMs prints milliseconds compactly for the table.
func fmtMs(v float64) string {
	switch {
	case v == 0:
		return "-"
	case v < 10:
		return fmt.Sprintf("%.2fms", v)
	case v < 1000:
		return fmt.Sprintf("%.1fms", v)
	default:
		return fmt.Sprintf("%.2fs", v/1000)
	}
}
