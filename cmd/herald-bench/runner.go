package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
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
	// PerSec is successful operations per second while every worker was busy: the
	// drain-out tail of each closed loop (the last operations finishing while the
	// other workers have nothing left to take) is not counted, so chunking a phase
	// does not bias it.
	PerSec  float64   `json:"per_sec"`
	Latency Latency   `json:"latency"`
	Chunks  int       `json:"chunks,omitempty"`
	CPU     *CPUUsage `json:"cpu,omitempty"`
	// PGPool is the self-host connection pool's activity during the phase.
	PGPool *PoolStats `json:"pg_pool,omitempty"`
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
	// steadyOK operations succeeded within steadyElapsed, the time until the first
	// worker found no more work.
	steadyOK      int
	steadyElapsed time.Duration
}

// closedLoop runs op for i in [0, n) with conc workers, each taking the next index
// as soon as its previous operation returned. It stops early when ctx ends; every
// operation gets its own timeout.
func closedLoop(ctx context.Context, n, conc int, opTimeout time.Duration, op func(ctx context.Context, i int) (outcome, error)) loopResult {
	r := loopResult{outcomes: make([]outcome, n), durations: make([]time.Duration, n)}
	finished := make([]time.Duration, n) // completion time, from start
	var next atomic.Int64
	var firstExit atomic.Int64
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
					firstExit.CompareAndSwap(0, int64(time.Since(start)))
					return
				}
				octx, cancel := context.WithTimeout(ctx, opTimeout)
				t0 := time.Now()
				oc, err := op(octx, i)
				r.durations[i] = time.Since(t0)
				finished[i] = time.Since(start)
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
	r.attempted = min(int(next.Load()), n)
	steadyEnd := time.Duration(firstExit.Load())
	for i := range r.attempted {
		switch r.outcomes[i] {
		case outcomeOK:
			r.ok++
			if finished[i] <= steadyEnd {
				r.steadyOK++
			}
		case outcomeUnexpected:
			r.unexpected++
		default:
			r.errors++
		}
	}
	r.steadyElapsed = steadyEnd
	// A loop cut short, or too short to have a steady part, counts as a whole.
	if steadyEnd == 0 || r.steadyOK < r.ok/2 {
		r.steadyOK, r.steadyElapsed = r.ok, r.elapsed
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

// accum collects one phase over its chunks: loop results, CPU and API timings.
type accum struct {
	key, title string
	loops      []loopResult
	cpu        cpuDelta
	cpuOK      bool
	handler    []time.Duration
	start      []time.Duration
	describe   []time.Duration
	queries    map[string][]time.Duration
	pool       poolSnap // summed deltas
	chunks     int
}

func newAccum(key, title string) *accum { return &accum{key: key, title: title, cpuOK: true} }

// chunk measures one chunk: body runs with CPU accounting, the API-side recorder and
// (with -cpuprofile) a CPU profile written to PREFIX.<key>.<chunk>.pprof.
func (b *bench) chunk(a *accum, body func() loopResult) error {
	var stopProfile func()
	if b.o.cpuProfile != "" {
		path := fmt.Sprintf("%s.%s.%d.pprof", b.o.cpuProfile, a.key, a.chunks)
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return err
		}
		stopProfile = func() { pprof.StopCPUProfile(); f.Close() }
	}
	before, poolBefore := b.cpu.snap(), b.poolSnap()
	b.rec.begin()
	r := body()
	t := b.rec.end()
	after, poolAfter := b.cpu.snap(), b.poolSnap()
	if poolBefore.ok && poolAfter.ok {
		a.pool.ok = true
		a.pool.maxConns = poolAfter.maxConns
		a.pool.acquires += poolAfter.acquires - poolBefore.acquires
		a.pool.waited += poolAfter.waited - poolBefore.waited
		a.pool.acquireDur += poolAfter.acquireDur - poolBefore.acquireDur
	}
	if stopProfile != nil {
		stopProfile()
	}
	a.chunks++
	a.loops = append(a.loops, r)
	if d, ok := delta(before, after); ok {
		a.cpu.add(d)
	} else {
		a.cpuOK = false
	}
	if t != nil {
		a.handler = append(a.handler, t.handler...)
		a.start = append(a.start, t.start...)
		a.describe = append(a.describe, t.describes...)
		for q, ds := range t.queries {
			if a.queries == nil {
				a.queries = map[string][]time.Duration{}
			}
			a.queries[q] = append(a.queries[q], ds...)
		}
	}
	return nil
}

// phase turns the chunks into a report phase.
func (a *accum) phase() Phase {
	p := Phase{Key: a.key, Title: a.title, Chunks: a.chunks}
	var elapsed, steady time.Duration
	var steadyOK int
	var lat []time.Duration
	for _, r := range a.loops {
		p.Attempted += r.attempted
		p.OK += r.ok
		p.Unexpected += r.unexpected
		p.Errors += r.errors
		elapsed += r.elapsed
		steady += r.steadyElapsed
		steadyOK += r.steadyOK
		lat = append(lat, r.okDurations()...)
		for _, s := range r.samples {
			if len(p.Samples) < 5 {
				p.Samples = append(p.Samples, s)
			}
		}
	}
	p.ElapsedSec = roundTo(elapsed.Seconds(), 3)
	p.PerSec = roundTo(rate(steadyOK, steady), 1)
	if len(a.loops) > 1 {
		perChunk := make([]string, len(a.loops))
		for i, r := range a.loops {
			perChunk[i] = fmt.Sprintf("%.1f", rate(r.steadyOK, r.steadyElapsed))
		}
		p.Notes = append(p.Notes, "per chunk, in the order run: "+strings.Join(perChunk, ", ")+" per sec")
	}
	p.Latency = summarize(lat)
	if a.cpuOK && a.chunks > 0 {
		p.CPU = a.cpu.usage(p.OK)
	}
	if len(a.handler) > 0 || len(a.start) > 0 {
		p.Breakdown = &Breakdown{Handler: summarize(a.handler), Start: summarize(a.start), Describe: summarize(a.describe)}
		for q, ds := range a.queries {
			if p.Breakdown.Queries == nil {
				p.Breakdown.Queries = map[string]Latency{}
			}
			p.Breakdown.Queries[q] = summarize(ds)
		}
	}
	if a.pool.ok {
		p.PGPool = &PoolStats{MaxConns: a.pool.maxConns, Acquires: a.pool.acquires, Waited: a.pool.waited}
		if a.pool.acquires > 0 {
			p.PGPool.MeanAcquireMs = ms(a.pool.acquireDur / time.Duration(a.pool.acquires))
		}
	}
	return p
}

// abbaOrder is the order in which chunks of two interleaved phases run:
// first, second, second, first, first, second, ... so that drift in the
// machine's load (and any backlog building up) falls on both alike.
func abbaOrder(chunks int) []int {
	out := make([]int, 0, 2*chunks)
	for i := range chunks {
		if i%2 == 0 {
			out = append(out, 0, 1)
		} else {
			out = append(out, 1, 0)
		}
	}
	return out
}

// chunkBounds splits n operations into chunks of near-equal size: chunk i covers
// [bounds[i], bounds[i+1]).
func chunkBounds(n, chunks int) []int {
	chunks = max(1, min(chunks, n))
	out := make([]int, chunks+1)
	for i := range chunks + 1 {
		out[i] = i * n / chunks
	}
	return out
}

// settle waits until this process, the Temporal server and PostgreSQL are close to
// idle — together under 15% of one CPU in two consecutive 300 ms windows — so a
// phase does not inherit the previous one's background work (workflows still being
// processed). Bounded by -settle-timeout; without /proc it just sleeps a second.
func (b *bench) settle(ctx context.Context) (time.Duration, bool) {
	return settleCPU(ctx, b.cpu, b.o.settleTimeout)
}

// settleCPU is settle for any bench: cpu's processes, bounded by timeout.
func settleCPU(ctx context.Context, cpu *cpuWatcher, timeout time.Duration) (time.Duration, bool) {
	t0 := time.Now()
	prev := cpu.snap()
	if !prev.ok {
		sleepCtx(ctx, time.Second)
		return time.Since(t0), false
	}
	const window = 300 * time.Millisecond
	limit := uint64(0.15 * window.Seconds() * clockTick)
	for quiet := 0; time.Since(t0) < timeout && ctx.Err() == nil; {
		sleepCtx(ctx, window)
		cur := cpu.snap()
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
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
