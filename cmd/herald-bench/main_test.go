package main

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

func msDurations(vals ...int) []time.Duration {
	out := make([]time.Duration, len(vals))
	for i, v := range vals {
		out[i] = time.Duration(v) * time.Millisecond
	}
	return out
}

func TestPercentileNearestRank(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 100; i++ {
		s = append(s, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{
		{50, 50 * time.Millisecond},
		{90, 90 * time.Millisecond},
		{99, 99 * time.Millisecond},
		{100, 100 * time.Millisecond},
		{0.5, 1 * time.Millisecond},
		{0, 1 * time.Millisecond}, // clamped to the smallest sample
	} {
		if got := percentile(s, c.p); got != c.want {
			t.Errorf("percentile(1..100ms, %v) = %v, want %v", c.p, got, c.want)
		}
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("percentile(empty) = %v, want 0", got)
	}
	if got := percentile(msDurations(7), 99); got != 7*time.Millisecond {
		t.Errorf("percentile(single) = %v, want 7ms", got)
	}
	// 10 samples: p99 is the largest (rank ceil(9.9) = 10), p50 the 5th.
	ten := msDurations(1, 2, 3, 4, 5, 6, 7, 8, 9, 1000)
	if got := percentile(ten, 99); got != time.Second {
		t.Errorf("p99 of 10 samples = %v, want the max 1s", got)
	}
	if got := percentile(ten, 50); got != 5*time.Millisecond {
		t.Errorf("p50 of 10 samples = %v, want 5ms", got)
	}
}

func TestSummarizeSortsACopy(t *testing.T) {
	in := msDurations(30, 10, 20, 40)
	orig := slices.Clone(in)
	l := summarize(in)
	if !slices.Equal(in, orig) {
		t.Fatalf("summarize reordered its input: %v", in)
	}
	if l.Count != 4 || l.P50Ms != 20 || l.P99Ms != 40 || l.MaxMs != 40 || l.MeanMs != 25 {
		t.Fatalf("summarize = %+v, want count 4, p50 20, p99 40, max 40, mean 25", l)
	}
	if got := summarize(nil); got != (Latency{}) {
		t.Fatalf("summarize(nil) = %+v, want zero", got)
	}
}

func TestRate(t *testing.T) {
	if got := rate(500, 2*time.Second); got != 250 {
		t.Fatalf("rate = %v, want 250", got)
	}
	if got := rate(5, 0); got != 0 {
		t.Fatalf("rate over zero time = %v, want 0", got)
	}
}

func TestEvalRatio(t *testing.T) {
	for _, c := range []struct {
		name       string
		num, den   float64
		valid      bool
		pass       bool
		verdict    string
		wantApprox float64
	}{
		{"above goal", 950, 1000, true, true, "PASS", 0.95},
		{"exactly the goal", 900, 1000, true, true, "PASS", 0.9},
		{"just below", 899, 1000, true, false, "MISS", 0.899},
		{"far below", 550, 1068.5, true, false, "MISS", 0.5147},
		{"faster than bare", 1200, 1000, true, true, "PASS", 1.2},
		{"denominator missing", 900, 0, false, false, "N/A", 0},
		{"numerator zero", 0, 1000, true, false, "MISS", 0},
	} {
		r := evalRatio(c.name, c.num, c.den, 0.9)
		if r.Valid != c.valid || r.Pass != c.pass || r.Verdict() != c.verdict {
			t.Errorf("%s: evalRatio(%v, %v) = valid %v pass %v %s, want valid %v pass %v %s",
				c.name, c.num, c.den, r.Valid, r.Pass, r.Verdict(), c.valid, c.pass, c.verdict)
		}
		if d := r.Value - c.wantApprox; d > 1e-3 || d < -1e-3 {
			t.Errorf("%s: value %v, want ≈ %v", c.name, r.Value, c.wantApprox)
		}
	}
}

func TestComputeRatiosPicksThePairs(t *testing.T) {
	rep := &Report{Phases: []Phase{
		{Key: "a", PerSec: 300}, {Key: "b", PerSec: 285},
		{Key: "a-dup", PerSec: 1000}, {Key: "c", PerSec: 500},
	}}
	computeRatios(rep, 0.9, 0.9)
	if len(rep.Ratios) != 2 {
		t.Fatalf("got %d ratios, want 2", len(rep.Ratios))
	}
	if r := rep.Ratios[0]; !r.Pass || r.Value != 0.95 {
		t.Errorf("(b)/(a) = %+v, want 0.95 PASS", r)
	}
	if r := rep.Ratios[1]; r.Pass || r.Value != 0.5 {
		t.Errorf("(c)/(a') = %+v, want 0.5 MISS", r)
	}
	// A run that stopped before (c) cannot pass (c)/(a').
	rep = &Report{Phases: []Phase{{Key: "a", PerSec: 300}, {Key: "b", PerSec: 290}, {Key: "a-dup", PerSec: 900}}}
	computeRatios(rep, 0.9, 0.9)
	if r := rep.Ratios[1]; r.Pass || r.Valid {
		t.Errorf("(c)/(a') without (c) = %+v, want invalid, not passing", r)
	}
}

func TestClosedLoopCountsOutcomes(t *testing.T) {
	var calls, inFlight, peak atomic.Int64
	r := closedLoop(context.Background(), 100, 8, time.Second, func(ctx context.Context, i int) (outcome, error) {
		calls.Add(1)
		n := inFlight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(time.Millisecond)
		inFlight.Add(-1)
		switch i % 10 {
		case 0:
			return outcomeError, errors.New("boom")
		case 1:
			return outcomeUnexpected, errors.New("odd")
		}
		return outcomeOK, nil
	})
	if calls.Load() != 100 || r.attempted != 100 {
		t.Fatalf("calls %d attempted %d, want 100", calls.Load(), r.attempted)
	}
	if r.ok != 80 || r.errors != 10 || r.unexpected != 10 {
		t.Fatalf("ok/errors/unexpected = %d/%d/%d, want 80/10/10", r.ok, r.errors, r.unexpected)
	}
	if peak.Load() > 8 {
		t.Fatalf("peak concurrency %d exceeds 8", peak.Load())
	}
	if len(r.okDurations()) != 80 || len(r.samples) == 0 || len(r.samples) > 5 {
		t.Fatalf("okDurations %d, samples %d", len(r.okDurations()), len(r.samples))
	}
}

func TestClosedLoopStopsWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int64
	r := closedLoop(ctx, 1_000_000, 4, time.Second, func(ctx context.Context, i int) (outcome, error) {
		if calls.Add(1) == 50 {
			cancel()
		}
		return outcomeOK, nil
	})
	if r.attempted >= 1000 || r.attempted < 50 {
		t.Fatalf("attempted %d after cancel at 50", r.attempted)
	}
	if int64(r.attempted) != calls.Load() || r.ok != r.attempted {
		t.Fatalf("attempted %d, calls %d, ok %d: attempted indices must be exactly those run", r.attempted, calls.Load(), r.ok)
	}
}

func TestTrackerRoundRobinAndLatency(t *testing.T) {
	tr := newTracker([]string{"u1", "u2", "u3"})
	t0 := time.Now()
	tr.add("u1", "n1", t0)
	tr.add("u3", "n3", t0.Add(10*time.Millisecond))
	tr.add("u3", "n3", t0.Add(10*time.Millisecond)) // the same id twice counts once
	if tr.remaining() != 2 {
		t.Fatalf("remaining = %d, want 2", tr.remaining())
	}
	var order []string
	for range 4 {
		u, ok := tr.nextUser()
		if !ok {
			t.Fatal("nextUser found nobody with pending ids")
		}
		order = append(order, u)
	}
	if !slices.Equal(order, []string{"u1", "u3", "u1", "u3"}) {
		t.Fatalf("round robin order %v skips users without pending ids wrongly", order)
	}
	tr.observe("u3", []string{"other", "n3"}, t0.Add(110*time.Millisecond))
	tr.observe("u3", []string{"n3"}, t0.Add(500*time.Millisecond)) // already seen: ignored
	if tr.remaining() != 1 || len(tr.latencies) != 1 || tr.latencies[0] != 100*time.Millisecond {
		t.Fatalf("after observe: remaining %d latencies %v, want 1 and [100ms]", tr.remaining(), tr.latencies)
	}
	tr.observe("u1", []string{"n1"}, t0.Add(time.Second))
	if _, ok := tr.nextUser(); ok || tr.remaining() != 0 {
		t.Fatal("no user should be pending after every id was seen")
	}
	if tr.lastSeen.Sub(tr.firstSend) != time.Second {
		t.Fatalf("span %v, want 1s", tr.lastSeen.Sub(tr.firstSend))
	}
}

func TestParseProcStat(t *testing.T) {
	line := []byte("1234 (tricky (name) x) S 77 1 1 0 -1 4194560 100 0 0 0 250 130 0 0 20 0 8 0 100 1000 50\n")
	p, ok := parseProcStat(line)
	if !ok || p.pid != 1234 || p.ppid != 77 || p.comm != "tricky (name) x" || p.jiffies != 380 {
		t.Fatalf("parseProcStat = %+v ok=%v, want pid 1234 ppid 77 comm %q jiffies 380", p, ok, "tricky (name) x")
	}
	if _, ok := parseProcStat([]byte("garbage")); ok {
		t.Fatal("garbage parsed")
	}
}

func TestPgPort(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://herald@127.0.0.1:55440/herald?sslmode=disable": "55440",
		"postgres://u:p@host/db":                                   "5432",
		"postgresql://u:p:x@[::1]:6000/db":                         "6000",
		"postgres://localhost":                                     "5432",
	} {
		if got := pgPort(in); got != want {
			t.Errorf("pgPort(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.n != 2000 || o.concurrency != 32 || o.goal != 0.9 || o.goalNew != 0.95 || o.apiURL != "" {
		t.Fatalf("defaults = n %d concurrency %d goal %v api %q", o.n, o.concurrency, o.goal, o.apiURL)
	}
	// Users are raised so that no inbox outgrows one page.
	if o.users*perUserMax < o.n+o.warmup {
		t.Fatalf("%d users for %d notifications exceed %d per user", o.users, o.n+o.warmup, perUserMax)
	}
	for _, bad := range [][]string{
		{"-n", "0"}, {"-concurrency", "0"}, {"-api-url", "http://127.0.0.1:8080"},
		{"-api-key", "k"}, {"-poll-rate", "0"}, {"-dedup-ttl", "500ms"}, {"extra"},
	} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("parseFlags(%v) accepted", bad)
		}
	}
	o, err = parseFlags([]string{"-api-url", "http://127.0.0.1:8080/", "-api-key", "hk_x", "-n", "500"}, io.Discard)
	if err != nil || o.apiURL != "http://127.0.0.1:8080" || o.n != 500 {
		t.Fatalf("remote flags: %+v %v", o, err)
	}
}

func TestABBAOrderBalancesPositions(t *testing.T) {
	got := abbaOrder(4)
	if !slices.Equal(got, []int{0, 1, 1, 0, 0, 1, 1, 0}) {
		t.Fatalf("abbaOrder(4) = %v", got)
	}
	// With an even chunk count both sides sit, on average, at the same position, so
	// a linear drift in load weighs on both alike.
	var pos [2]int
	for i, s := range got {
		pos[s] += i
	}
	if pos[0] != pos[1] {
		t.Fatalf("position sums %v differ", pos)
	}
	if got := abbaOrder(1); !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("abbaOrder(1) = %v", got)
	}
}

func TestChunkBounds(t *testing.T) {
	if got := chunkBounds(10, 3); !slices.Equal(got, []int{0, 3, 6, 10}) {
		t.Fatalf("chunkBounds(10, 3) = %v", got)
	}
	if got := chunkBounds(2, 4); !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("chunkBounds(2, 4) = %v, want no empty chunks", got)
	}
	if got := chunkBounds(2000, 1); !slices.Equal(got, []int{0, 2000}) {
		t.Fatalf("chunkBounds(2000, 1) = %v", got)
	}
}

func TestClosedLoopSteadyThroughputExcludesTail(t *testing.T) {
	// 4 workers, 40 ops of 10ms, except the very last op which takes 200ms: the
	// whole loop takes ~300ms, but while all workers were busy it ran 400 ops/s.
	r := closedLoop(context.Background(), 40, 4, time.Second, func(ctx context.Context, i int) (outcome, error) {
		if i == 39 {
			time.Sleep(200 * time.Millisecond)
		} else {
			time.Sleep(10 * time.Millisecond)
		}
		return outcomeOK, nil
	})
	whole := rate(r.ok, r.elapsed)
	steady := rate(r.steadyOK, r.steadyElapsed)
	if r.steadyOK >= r.ok || r.steadyOK < 30 {
		t.Fatalf("steadyOK %d of %d", r.steadyOK, r.ok)
	}
	if steady < 1.5*whole {
		t.Fatalf("steady rate %.0f/s should be well above the whole-loop rate %.0f/s (tail excluded)", steady, whole)
	}
}

func TestAccumPhaseAndCPU(t *testing.T) {
	a := newAccum("b", titleB)
	a.chunks = 2
	a.loops = []loopResult{
		{attempted: 2, ok: 2, outcomes: []outcome{outcomeOK, outcomeOK}, durations: msDurations(10, 30),
			elapsed: 2 * time.Second, steadyOK: 2, steadyElapsed: time.Second},
		{attempted: 2, ok: 1, errors: 1, outcomes: []outcome{outcomeError, outcomeOK}, durations: msDurations(999, 20),
			elapsed: 2 * time.Second, steadyOK: 1, steadyElapsed: 500 * time.Millisecond, samples: []string{"boom"}},
	}
	a.cpu = cpuDelta{busy: 30, total: 60, groups: map[string]uint64{"bench": 3, "temporal": 21, "postgres": 0}}
	p := a.phase()
	if p.OK != 3 || p.Errors != 1 || p.Attempted != 4 || p.PerSec != 2 || p.ElapsedSec != 4 {
		t.Fatalf("phase = %+v; want 3 ok, 1 error, 4 attempted, 2/s (3 ok in 1.5s steady), 4s", p)
	}
	if p.Latency.Count != 3 || p.Latency.MaxMs != 30 {
		t.Fatalf("latency %+v must cover the 3 ok ops only (not the failed 999ms)", p.Latency)
	}
	c := p.CPU
	if c == nil || c.MachineUtilPct != 50 || c.PerOpMs["machine"] != 100 || c.PerOpMs["temporal"] != 70 || c.PerOpMs["other"] != 20 {
		t.Fatalf("cpu = %+v; want util 50%%, machine 100 ms/op, temporal 70, other 20", c)
	}
	if share := p.otherShare(); share < 0.19 || share > 0.21 {
		t.Fatalf("otherShare = %v, want 0.2", share)
	}
}
