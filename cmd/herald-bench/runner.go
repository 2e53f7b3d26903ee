package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"
)

// outcome classifies one operation.
type outcome int

const (
	outcomeOK         outcome = iota // the expected answer (a start, a rejection, a 202, a duplicate 200)
	outcomeUnexpected                // a valid answer, but not the one this phase expects
	outcomeError                     // transport error, timeout, 5xx, ...
)

// Phase is one measured phase of the report.
type Phase struct {
	Key        string  `json:"key"`
	Title      string  `json:"title"`
	Attempted  int     `json:"attempted"`
	OK         int     `json:"ok"`
	Unexpected int     `json:"unexpected"`
	Errors     int     `json:"errors"`
	ElapsedSec float64 `json:"elapsed_sec"`
	// PerSec is successful operations per second of wall time.
	PerSec  float64   `json:"per_sec"`
	Latency Latency   `json:"latency"`
	CPU     *CPUUsage `json:"cpu,omitempty"`
	// Breakdown is the API-side timing of the same requests (self-host with -breakdown).
	Breakdown *Breakdown `json:"breakdown,omitempty"`
	Samples   []string   `json:"error_samples,omitempty"`
	Notes     []string   `json:"notes,omitempty"`
}

// loopResult is the raw result of a closed loop.
type loopResult struct {
	attempted  int
	outcomes   []outcome
	durations  []time.Duration
	elapsed    time.Duration
	samples    []string
	unexpected int
	errors     int
	ok         int
}

// closedLoop runs op for i in [0, n) with conc workers, each taking the next index
// as soon as its previous operation returned. It stops early when ctx ends; every
// operation gets its own timeout.
func closedLoop(ctx context.Context, n, conc int, opTimeout time.Duration, op func(ctx context.Context, i int) (outcome, error)) loopResult {
	r := loopResult{outcomes: make([]outcome, n), durations: make([]time.Duration, n)}
	var next atomic.Int64
	var attempted atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for range max(1, min(conc, n)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				// Checking ctx before taking an index keeps the attempted indices
				// contiguous: every index taken below n is run.
				if ctx.Err() != nil {
					return
				}
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				attempted.Add(1)
				octx, cancel := context.WithTimeout(ctx, opTimeout)
				t0 := time.Now()
				oc, err := op(octx, i)
				r.durations[i] = time.Since(t0)
				cancel()
				r.outcomes[i] = oc
				if err != nil {
					mu.Lock()
					if len(r.samples) < 5 {
						r.samples = append(r.samples, err.Error())
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	r.elapsed = time.Since(start)
	r.attempted = int(attempted.Load())
	for i := range r.attempted {
		switch r.outcomes[i] {
		case outcomeOK:
			r.ok++
		case outcomeUnexpected:
			r.unexpected++
		default:
			r.errors++
		}
	}
	return r
}

// okDurations are the latencies of the operations that got the expected answer.
func (r loopResult) okDurations() []time.Duration {
	out := make([]time.Duration, 0, r.ok)
	for i := range r.attempted {
		if r.outcomes[i] == outcomeOK {
			out = append(out, r.durations[i])
		}
	}
	return out
}

// measured wraps a phase body with CPU accounting and an optional CPU profile.
func (b *bench) measured(key string, body func() (Phase, error)) (Phase, error) {
	var stopProfile func()
	if b.o.cpuProfile != "" {
		path := fmt.Sprintf("%s.%s.pprof", b.o.cpuProfile, key)
		f, err := os.Create(path)
		if err != nil {
			return Phase{}, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return Phase{}, err
		}
		stopProfile = func() { pprof.StopCPUProfile(); f.Close(); b.logf("  CPU profile: %s", path) }
	}
	before := b.cpu.snap()
	b.rec.begin()
	p, err := body()
	bd := b.rec.end()
	after := b.cpu.snap()
	if stopProfile != nil {
		stopProfile()
	}
	p.Key = key
	p.CPU = usage(before, after, p.OK)
	if bd != nil && (bd.Handler.Count > 0 || bd.Start.Count > 0) {
		p.Breakdown = bd
	}
	return p, err
}

// phaseFrom turns a loop result into a report phase.
func phaseFrom(title string, r loopResult) Phase {
	return Phase{
		Title: title, Attempted: r.attempted, OK: r.ok, Unexpected: r.unexpected, Errors: r.errors,
		ElapsedSec: roundTo(r.elapsed.Seconds(), 3), PerSec: roundTo(rate(r.ok, r.elapsed), 1),
		Latency: summarize(r.okDurations()), Samples: r.samples,
	}
}

// settle waits until this process, the Temporal server and PostgreSQL are close to
// idle — together under 15% of one CPU in two consecutive 300 ms windows — so a
// phase does not inherit the previous one's background work (workflows still being
// processed). Bounded by -settle-timeout; without /proc it just sleeps a second.
func (b *bench) settle(ctx context.Context) (time.Duration, bool) {
	t0 := time.Now()
	prev := b.cpu.snap()
	if !prev.ok {
		sleepCtx(ctx, time.Second)
		return time.Since(t0), false
	}
	const window = 300 * time.Millisecond
	limit := uint64(0.15 * window.Seconds() * clockTick)
	for quiet := 0; time.Since(t0) < b.o.settleTimeout && ctx.Err() == nil; {
		sleepCtx(ctx, window)
		cur := b.cpu.snap()
		if cur.ourJiffies()-prev.ourJiffies() <= limit {
			if quiet++; quiet >= 2 {
				return time.Since(t0), true
			}
		} else {
			quiet = 0
		}
		prev = cur
	}
	return time.Since(t0), false
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
