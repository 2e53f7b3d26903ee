package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/workflows"
)

// noisyShare is the share of busy CPU used by unrelated processes above which a
// phase is flagged as measured on a noisy machine.
const noisyShare = 0.2

// Phase titles.
const (
	titleA    = "(a)  bare start, new ID"
	titleADup = "(a') bare start, duplicate (rejected)"
	titleB    = "(b)  POST /v1/notifications, new"
	titleC    = "(c)  POST /v1/notifications, duplicate"
	titleD    = "(d)  accept -> inbox visible"
)

// side is one phase of an interleaved pair: run measures operations [lo, hi).
type side struct {
	key, title string
	run        func(ctx context.Context, lo, hi int) loopResult
}

// phases runs the pairs (a)+(b), then (a')+(c), then (d). Each pair is measured
// interleaved: -chunks chunks per phase in ABBA order (a b b a a b b a ...), so a
// change in the machine's load during the pair, or the delivery backlog (b) builds
// up, weighs on both sides alike; the ratio then compares like with like. Before
// each pair: warm-ups, then a wait until Temporal and PostgreSQL are idle (settle).
//
// (c) re-submits (b)'s keys. Its steady state — a client retrying a notification
// accepted a while ago — finds the original recorded in PostgreSQL, which the
// notification workflow does first; until then the API asks Temporal instead. On
// this kind of machine the worker records and delivers far more slowly than the
// API accepts, so waiting for all n originals would take minutes. The bench waits
// at most -ready-timeout for (b)'s originals to be ready (self-host: recorded in
// PostgreSQL; -api-url: visible in the inbox), and (c) then re-submits the K ready
// keys round-robin, n times; (a') re-starts K of (a)'s running IDs round-robin,
// n times, so both sides hit the same number of distinct workflows. Self-host stops
// Herald's worker for (a')+(c), so they do not share the machine with (b)'s
// delivery backlog, then terminates (b)'s workflows and restarts it for (d).
func (b *bench) phases(ctx context.Context, rep *Report) error {
	n, w := b.o.n, b.o.warmup
	aw, as := b.series("aw", w, b.bUsers), b.series("a", n, b.bUsers)
	bw, bs := b.series("bw", max(w, len(b.bUsers)), b.bUsers), b.series("b", n, b.bUsers)
	bwIDs, bIDs := make([]string, len(bw)), make([]string, len(bs))

	err := b.pair(ctx, rep, func() {
		b.logf("warm-up: %d bare starts, %d submissions (every bench user at least once, to warm the API's caches)", len(aw), len(bw))
		b.startEmpty(ctx, aw, false)
		b.submit(ctx, bw, bwIDs, false)
	},
		side{"a", titleA, func(ctx context.Context, lo, hi int) loopResult { return b.startEmpty(ctx, as[lo:hi], false) }},
		side{"b", titleB, func(ctx context.Context, lo, hi int) loopResult { return b.submit(ctx, bs[lo:hi], bIDs[lo:hi], false) }})
	if err != nil {
		return err
	}
	if err := b.startWorkers(); err != nil { // -workers-after-b held them back
		return err
	}
	all, allIDs := append(append([]notification(nil), bw...), bs...), append(append([]string(nil), bwIDs...), bIDs...)

	// Originals ready for (c).
	b.logf("waiting up to %s for (b)'s originals to be ready for (c)", b.o.readyTimeout)
	ready, took, how, err := b.readyOriginals(ctx, bs, bIDs)
	if err != nil {
		return err
	}
	if b.selfHost {
		b.stopWorker("herald")
	}
	k := len(ready)
	note := fmt.Sprintf("(c) re-submitted %d distinct (b) keys round-robin (%d of %d originals %s %.1fs after (b) ended)", k, k, n, how, took.Seconds())
	if k == 0 {
		// Nothing ready in time: measure what there is, the not-yet-recorded path.
		for i := range bs {
			if bIDs[i] != "" {
				ready = append(ready, i)
			}
		}
		k = len(ready)
		note = fmt.Sprintf("WARNING: no original was %s within -ready-timeout; (c) re-submitted all %d keys and answers came from DescribeWorkflowExecution", how, k)
	}
	if k == 0 {
		return fmt.Errorf("(b) accepted nothing; cannot measure (c)")
	}
	cs, cIDs, ads := make([]notification, n), make([]string, n), make([]notification, n)
	for i := range n {
		j := ready[i%k]
		cs[i], cIDs[i] = bs[j], bIDs[j]
		ads[i] = as[i%min(k, len(as))]
	}
	if b.selfHost {
		note += "; Herald's worker was stopped for (a')+(c)"
	}
	rep.Notes = append(rep.Notes, note)
	cwIDs := append([]string(nil), cIDs[:min(len(cIDs), len(bw))]...)

	err = b.pair(ctx, rep, func() {
		b.logf("warm-up: %d duplicate bare starts, %d duplicate submissions", len(aw), len(cwIDs))
		b.startEmpty(ctx, aw, true)
		b.submit(ctx, cs[:len(cwIDs)], cwIDs, true)
	},
		side{"a-dup", titleADup, func(ctx context.Context, lo, hi int) loopResult { return b.startEmpty(ctx, ads[lo:hi], true) }},
		side{"c", titleC, func(ctx context.Context, lo, hi int) loopResult { return b.submit(ctx, cs[lo:hi], cIDs[lo:hi], true) }})
	if err != nil {
		return err
	}

	if b.selfHost {
		// (b)'s workflows have done their part; terminate them rather than deliver
		// them, then bring Herald's worker back for (d).
		wfIDs := make([]string, 0, len(all))
		b.mu.Lock()
		for i, nt := range all {
			if allIDs[i] != "" {
				wfIDs = append(wfIDs, b.notificationWorkflowID(nt.key))
				b.terminated[nt.key] = true
			}
		}
		b.mu.Unlock()
		tctx, cancel := context.WithTimeout(ctx, b.o.cleanupTimeout)
		msg := b.terminate(tctx, wfIDs, "herald-bench: (b) and (c) measured")
		cancel()
		b.logf("(b)'s workflows: %s", msg)
		rep.Notes = append(rep.Notes, "after (c): (b)'s workflows: "+msg)
		if err := b.startWorker("herald"); err != nil {
			return err
		}
	}

	// (d), on users of its own.
	dw := b.series("dw", len(b.dUsers), b.dUsers)
	dwIDs := make([]string, len(dw))
	b.logf("(d) warm-up: one notification per (d) user, until visible")
	b.submit(ctx, dw, dwIDs, false)
	b.drain(ctx, b.dUsers, dw, dwIDs, b.o.pollRate, b.o.dTimeout)
	settled := b.settleNote(ctx)
	b.logf("(d) %d submissions to %d users, polling inboxes at <= %.0f/s", b.o.dN, len(b.dUsers), b.o.pollRate)
	acc := newAccum("d", titleD)
	var p Phase
	if err := b.chunk(acc, func() loopResult {
		p = b.acceptToInbox(ctx, b.series("d", b.o.dN, b.dUsers))
		return loopResult{}
	}); err != nil {
		return err
	}
	p.Key = "d"
	if a := acc.phase(); a.Breakdown != nil {
		p.Breakdown = a.Breakdown
	}
	if acc.cpuOK {
		p.CPU = acc.cpu.usage(p.OK)
	}
	p.Notes = append(p.Notes, settled)
	b.addPhase(rep, p)
	return ctx.Err()
}

// pair warms up, settles, then measures two phases interleaved in chunks.
func (b *bench) pair(ctx context.Context, rep *Report, warm func(), sides ...side) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	warm()
	settled := b.settleNote(ctx)
	accs := []*accum{newAccum(sides[0].key, sides[0].title), newAccum(sides[1].key, sides[1].title)}
	bounds := chunkBounds(b.o.n, b.o.chunks)
	chunks := len(bounds) - 1
	b.logf("measuring %s and %s: %d operations each, concurrency %d, %d interleaved chunks each", sides[0].title, sides[1].title, b.o.n, b.o.concurrency, chunks)
	next := []int{0, 0}
	for _, s := range abbaOrder(chunks) {
		if ctx.Err() != nil {
			break
		}
		k := next[s]
		next[s]++
		if err := b.chunk(accs[s], func() loopResult { return sides[s].run(ctx, bounds[k], bounds[k+1]) }); err != nil {
			return err
		}
	}
	for _, a := range accs {
		p := a.phase()
		p.Notes = append(p.Notes, settled)
		b.addPhase(rep, p)
	}
	return ctx.Err()
}

func (b *bench) settleNote(ctx context.Context) string {
	took, idle := b.settle(ctx)
	s := fmt.Sprintf("waited %.1fs for Temporal/PostgreSQL to go idle before measuring", took.Seconds())
	if !idle {
		s += " (still busy at -settle-timeout)"
	}
	return s
}

func (b *bench) addPhase(rep *Report, p Phase) {
	if share := p.otherShare(); share > noisyShare && b.selfHost {
		p.Notes = append(p.Notes, fmt.Sprintf("WARNING: other processes used %.0f%% of the busy CPU during this phase; its numbers reflect a shared machine", 100*share))
	}
	rep.Phases = append(rep.Phases, p)
	b.logf("  %s: %d ok, %d unexpected, %d errors, %.1f/s, p50 %s, p99 %s", p.Title, p.OK, p.Unexpected, p.Errors, p.PerSec, fmtMs(p.Latency.P50Ms), fmtMs(p.Latency.P99Ms))
}

// sortPhases puts the phases in report order: (a), (a'), (b), (c), (d).
func sortPhases(rep *Report) {
	rank := map[string]int{"a": 0, "a-dup": 1, "b": 2, "c": 3, "d": 4}
	sort.SliceStable(rep.Phases, func(i, j int) bool { return rank[rep.Phases[i].Key] < rank[rep.Phases[j].Key] })
}

// startEmpty starts (or, dup, re-starts) the empty workflow for each notification
// with exactly the options the API uses for that notification, on the bench queue.
func (b *bench) startEmpty(ctx context.Context, list []notification, dup bool) loopResult {
	pctx, cancel := context.WithTimeout(ctx, b.o.phaseTimeout)
	defer cancel()
	return closedLoop(pctx, len(list), b.o.concurrency, b.o.reqTimeout, func(ctx context.Context, i int) (outcome, error) {
		nt := list[i]
		// The same derivation as the API: tenant + hashed idempotency key.
		id := ids.NotificationWorkflowID(b.tenantID, ids.IdempotencyKeyHash(nt.key))
		_, err := b.tc.ExecuteWorkflow(ctx, workflows.NotificationStartOptions(id, b.benchQueue, nt.input), benchWorkflowName, nt.input)
		var already *serviceerror.WorkflowExecutionAlreadyStarted
		switch {
		case err == nil:
			b.rememberEmpty(id)
			if dup {
				return outcomeUnexpected, fmt.Errorf("duplicate start of %s was accepted", id)
			}
			return outcomeOK, nil
		case errors.As(err, &already):
			if dup {
				return outcomeOK, nil
			}
			return outcomeUnexpected, err
		default:
			return outcomeError, err
		}
	})
}

// submit posts each notification. New submissions must get 202 dedup:"new" (their
// ids are stored in ids); duplicates must get 200 dedup:"duplicate" with the id the
// original got.
func (b *bench) submit(ctx context.Context, list []notification, ids []string, dup bool) loopResult {
	pctx, cancel := context.WithTimeout(ctx, b.o.phaseTimeout)
	defer cancel()
	return closedLoop(pctx, len(list), b.o.concurrency, b.o.reqTimeout, func(ctx context.Context, i int) (outcome, error) {
		status, a, err := b.postNotification(ctx, list[i].body)
		if err != nil {
			return outcomeError, err
		}
		switch {
		case !dup && status == http.StatusAccepted && a.Dedup == "new":
			ids[i] = a.NotificationID
			b.rememberKey(list[i].key)
			return outcomeOK, nil
		case dup && status == http.StatusOK && a.Dedup == "duplicate":
			if ids[i] != "" && a.NotificationID != ids[i] {
				return outcomeUnexpected, fmt.Errorf("duplicate of %s answered %s, want %s", list[i].key, a.NotificationID, ids[i])
			}
			return outcomeOK, nil
		default:
			if status == http.StatusAccepted {
				b.rememberKey(list[i].key)
			}
			return outcomeUnexpected, fmt.Errorf("%s: got %d dedup=%q", list[i].key, status, a.Dedup)
		}
	})
}

// drain waits (bounded by timeout) until the given accepted notifications are in
// their users' inboxes.
func (b *bench) drain(ctx context.Context, users []string, list []notification, ids []string, pollRate float64, timeout time.Duration) (string, time.Duration) {
	t0 := time.Now()
	t := newTracker(users)
	total := 0
	for i, id := range ids {
		if id != "" {
			t.add(list[i].user, id, t0)
			total++
		}
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := make(chan struct{})
	close(done)
	b.poll(dctx, t, pollRate, done)
	return fmt.Sprintf("%d/%d", total-t.remaining(), total), time.Since(t0)
}

// acceptToInbox is (d): submit while polling the inboxes; latency runs from each
// POST's send time to the first poll response that lists the notification.
func (b *bench) acceptToInbox(ctx context.Context, list []notification) Phase {
	dctx, cancel := context.WithTimeout(ctx, b.o.dTimeout)
	defer cancel()
	t := newTracker(b.dUsers)
	submitted, polled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(polled)
		b.poll(dctx, t, b.o.pollRate, submitted)
	}()
	begin := time.Now()
	postDur := make([]time.Duration, len(list)) // the POSTs alone, without pacing
	r := closedLoop(dctx, len(list), b.o.concurrency, b.o.reqTimeout+b.pacingSlack(), func(ctx context.Context, i int) (outcome, error) {
		if b.o.dRate > 0 { // open-loop pacing: submission i is due at begin + i/rate
			sleepCtx(ctx, time.Until(begin.Add(time.Duration(float64(i)/b.o.dRate*float64(time.Second)))))
		}
		sent := time.Now()
		rctx, cancel := context.WithTimeout(ctx, b.o.reqTimeout)
		defer cancel()
		status, a, err := b.postNotification(rctx, list[i].body)
		postDur[i] = time.Since(sent)
		if err != nil {
			return outcomeError, err
		}
		if status != http.StatusAccepted || a.Dedup != "new" {
			return outcomeUnexpected, fmt.Errorf("%s: got %d dedup=%q", list[i].key, status, a.Dedup)
		}
		b.rememberKey(list[i].key)
		t.add(list[i].user, a.NotificationID, sent)
		return outcomeOK, nil
	})
	close(submitted)
	<-polled

	t.mu.Lock()
	defer t.mu.Unlock()
	visible := len(t.latencies)
	elapsed := t.lastSeen.Sub(t.firstSend)
	p := Phase{
		Title: titleD, Attempted: r.attempted, OK: visible, Unexpected: r.unexpected + t.open, Errors: r.errors,
		ElapsedSec: roundTo(elapsed.Seconds(), 3), PerSec: roundTo(rate(visible, elapsed), 1),
		Latency: summarize(t.latencies), Samples: r.samples,
	}
	var okPosts []time.Duration
	for i := range r.attempted {
		if r.outcomes[i] == outcomeOK {
			okPosts = append(okPosts, postDur[i])
		}
	}
	sub := summarize(okPosts)
	p.Notes = append(p.Notes,
		fmt.Sprintf("submissions: %d accepted in %.2fs (%.1f/s, p50 %s, p99 %s) while the worker delivered",
			r.ok, r.elapsed.Seconds(), rate(r.ok, r.elapsed), fmtMs(sub.P50Ms), fmtMs(sub.P99Ms)),
		fmt.Sprintf("inbox polls: %d (%.0f/s, %d failed) over %d users; visibility is the poll response time, so latency includes up to one poll interval",
			t.polls, rate(t.polls, elapsed), t.pollErrs, len(b.dUsers)))
	if t.open > 0 {
		p.Notes = append(p.Notes, fmt.Sprintf("%d accepted notifications were not visible within -d-timeout %s", t.open, b.o.dTimeout))
	}
	if t.errSample != "" {
		p.Samples = append(p.Samples, "poll: "+t.errSample)
	}
	return p
}

// pacingSlack is the longest a paced (d) submission can wait for its slot: the
// -concurrency workers take indices in order, so at most concurrency/rate.
func (b *bench) pacingSlack() time.Duration {
	if b.o.dRate <= 0 {
		return 0
	}
	return time.Duration(float64(b.o.concurrency)/b.o.dRate*float64(time.Second)) + time.Second
}

// cleanupWorkflows terminates every workflow the bench started and has not
// terminated yet: the empty (a) workflows and, in self-host mode, the notification
// workflows (they would otherwise hold their dedup window on a task queue nobody
// polls any more). Database rows of the bench tenant are left in place.
func (b *bench) cleanupWorkflows() string {
	b.mu.Lock()
	wfIDs := append([]string(nil), b.emptyIDs...)
	nNotif := 0
	if b.selfHost {
		for _, k := range b.notifKeys {
			if !b.terminated[k] {
				wfIDs = append(wfIDs, b.notificationWorkflowID(k))
				nNotif++
			}
		}
	}
	b.mu.Unlock()
	if len(wfIDs) == 0 {
		return "nothing to terminate"
	}
	b.logf("cleanup: terminating %d workflows (%d empty, %d notification)", len(wfIDs), len(wfIDs)-nNotif, nNotif)
	ctx, cancel := context.WithTimeout(context.Background(), b.o.cleanupTimeout)
	defer cancel()
	msg := b.terminate(ctx, wfIDs, "herald-bench finished")
	b.logf("cleanup: %s", msg)
	return msg
}

func (b *bench) notificationWorkflowID(key string) string {
	return ids.NotificationWorkflowID(b.tenantID, ids.IdempotencyKeyHash(key))
}

// terminate terminates the given workflows (their current runs) and says how it went.
func (b *bench) terminate(ctx context.Context, wfIDs []string, reason string) string {
	var goneN atomic.Int64
	r := closedLoop(ctx, len(wfIDs), max(64, b.o.concurrency), b.o.reqTimeout, func(ctx context.Context, i int) (outcome, error) {
		err := b.tc.TerminateWorkflow(ctx, wfIDs[i], "", reason)
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			goneN.Add(1)
			return outcomeOK, nil
		}
		if err != nil {
			return outcomeError, err
		}
		return outcomeOK, nil
	})
	gone := int(goneN.Load())
	msg := fmt.Sprintf("terminated %d of %d workflows in %.1fs (%d already closed)", r.ok-gone, len(wfIDs), r.elapsed.Seconds(), gone)
	if r.errors > 0 || r.attempted < len(wfIDs) {
		msg += fmt.Sprintf("; %d failed, %d not attempted: %v", r.errors, len(wfIDs)-r.attempted, r.samples)
	}
	return msg
}

// readyOriginals waits at most -ready-timeout until (b)'s accepted notifications
// are ready to be duplicated in their steady state, and returns the indices of
// those that are. Self-host: recorded in PostgreSQL (one query a second over the
// bench tenant's notifications). -api-url: visible in their users' inboxes.
func (b *bench) readyOriginals(ctx context.Context, list []notification, nIDs []string) ([]int, time.Duration, string, error) {
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(ctx, b.o.readyTimeout)
	defer cancel()
	want := 0
	for _, id := range nIDs {
		if id != "" {
			want++
		}
	}
	if !b.selfHost {
		t := newTracker(b.bUsers)
		for i, id := range nIDs {
			if id != "" {
				t.add(list[i].user, id, t0)
			}
		}
		done := make(chan struct{})
		close(done)
		b.poll(ctx, t, b.o.drainRate, done)
		var ready []int
		t.mu.Lock()
		for i, id := range nIDs {
			if id != "" && t.seen[id] {
				ready = append(ready, i)
			}
		}
		t.mu.Unlock()
		return ready, time.Since(t0), "were in their inboxes", nil
	}
	recorded := map[string]bool{}
	for {
		rows, err := b.pool.Query(ctx, `SELECT id FROM notifications WHERE tenant_id = $1`, b.tenantID)
		if err == nil {
			for rows.Next() {
				var id string
				if rows.Scan(&id) == nil {
					recorded[id] = true
				}
			}
			rows.Close()
			err = rows.Err()
		}
		if err != nil && ctx.Err() == nil {
			return nil, time.Since(t0), "", fmt.Errorf("reading recorded notifications: %w", err)
		}
		n := 0
		for _, id := range nIDs {
			if id != "" && recorded[id] {
				n++
			}
		}
		if n >= want || ctx.Err() != nil {
			break
		}
		sleepCtx(ctx, time.Second)
	}
	var ready []int
	for i, id := range nIDs {
		if id != "" && recorded[id] {
			ready = append(ready, i)
		}
	}
	return ready, time.Since(t0), "were recorded in PostgreSQL", nil
}

// printTable writes the human-readable report.
func printTable(w io.Writer, rep *Report) {
	fmt.Fprintf(w, "\nHerald bench — %s, %d CPUs, %s, n=%d concurrency=%d warm-up=%d, (d) n=%d over %d users\n",
		rep.Mode, rep.CPUs, rep.GoVersion, rep.N, rep.Concurrency, rep.Warmup, rep.DN, rep.DUsers)
	fmt.Fprintf(w, "API %s   command: %s\n\n", rep.APIURL, rep.Command)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "phase\tok\tunexp\terr\tper sec\tp50\tp90\tp99\tmax\tCPU ms/op: machine\tbench\ttemporal\tpostgres\tother\tutil\t")
	for _, p := range rep.Phases {
		cpu := "\t\t\t\t\t"
		if p.CPU != nil {
			c := p.CPU.PerOpMs
			cpu = fmt.Sprintf("%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.0f%%", c["machine"], c["bench"], c["temporal"], c["postgres"], c["other"], p.CPU.MachineUtilPct)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.1f\t%s\t%s\t%s\t%s\t%s\t\n", p.Title, p.OK, p.Unexpected, p.Errors, p.PerSec,
			fmtMs(p.Latency.P50Ms), fmtMs(p.Latency.P90Ms), fmtMs(p.Latency.P99Ms), fmtMs(p.Latency.MaxMs), cpu)
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, r := range rep.Ratios {
		if r.Valid {
			fmt.Fprintf(w, "%-58s %6.3f  (%.1f / %.1f per sec)  goal >= %.2f  %s\n", r.Name, r.Value, r.Numerator, r.Denominator, r.Goal, r.VerdictNote())
		} else {
			fmt.Fprintf(w, "%-58s    n/a  goal >= %.2f  %s\n", r.Name, r.Goal, r.VerdictNote())
		}
	}
	var extra []string
	for _, p := range rep.Phases {
		if p.Breakdown != nil {
			bd := p.Breakdown
			line := fmt.Sprintf("%s: API handler p50 %s p99 %s; ExecuteWorkflow x%d p50 %s p99 %s",
				p.Title, fmtMs(bd.Handler.P50Ms), fmtMs(bd.Handler.P99Ms), bd.Start.Count, fmtMs(bd.Start.P50Ms), fmtMs(bd.Start.P99Ms))
			if bd.Describe.Count > 0 {
				line += fmt.Sprintf("; DescribeWorkflowExecution x%d p50 %s", bd.Describe.Count, fmtMs(bd.Describe.P50Ms))
			}
			extra = append(extra, line)
			qs := make([]string, 0, len(bd.Queries))
			for q := range bd.Queries {
				qs = append(qs, q)
			}
			sort.Slice(qs, func(i, j int) bool {
				li, lj := bd.Queries[qs[i]], bd.Queries[qs[j]]
				return li.MeanMs*float64(li.Count) > lj.MeanMs*float64(lj.Count)
			})
			for _, q := range qs {
				l := bd.Queries[q]
				extra = append(extra, fmt.Sprintf("%s: API query x%d p50 %s p99 %s: %s", p.Title, l.Count, fmtMs(l.P50Ms), fmtMs(l.P99Ms), q))
			}
		}
		if pp := p.PGPool; pp != nil && pp.Acquires > 0 {
			extra = append(extra, fmt.Sprintf("%s: pgxpool (max %d conns, API + worker): %d acquires, %d had to wait, mean acquire %s",
				p.Title, pp.MaxConns, pp.Acquires, pp.Waited, fmtMs(pp.MeanAcquireMs)))
		}
		for _, n := range p.Notes {
			extra = append(extra, p.Title+": "+n)
		}
		for _, s := range p.Samples {
			extra = append(extra, p.Title+": error: "+s)
		}
	}
	extra = append(extra, rep.Notes...)
	if rep.Cleanup != "" {
		extra = append(extra, "cleanup: "+rep.Cleanup)
	}
	if rep.Error != "" {
		extra = append(extra, "ERROR: "+rep.Error)
	}
	if len(extra) > 0 {
		fmt.Fprintln(w)
		for _, e := range extra {
			fmt.Fprintln(w, "  "+strings.TrimSpace(e))
		}
	}
	fmt.Fprintf(w, "\nrun took %.1fs\n", rep.DurationSec)
}

// benchBodyHash stands in for the API's body hash in (a)'s input and memo: the
// same size (SHA-256), so (a) and (b) start workflows of the same size.
func benchBodyHash(key string) []byte {
	sum := sha256.Sum256([]byte(key))
	return sum[:]
}
