package main

import (
	"context"
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

	"github.com/herald-notify/herald/api"
	"github.com/herald-notify/herald/internal/ids"
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

// phases runs (a), (b), (a'), (c), (d) in that order. Before each: a warm-up, then
// a wait until Temporal and PostgreSQL are idle (see settle). Between (b) and (a')
// it also waits until (b)'s notifications have reached their inboxes, so (a') and
// (c) run without a backlog of workflows being processed, and (c) hits originals
// already recorded in PostgreSQL (the duplicate path's steady state).
func (b *bench) phases(ctx context.Context, rep *Report) error {
	n, w := b.o.n, b.o.warmup
	phase := func(key, title string, warm func(), body func() Phase) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		warm()
		took, idle := b.settle(ctx)
		settled := fmt.Sprintf("waited %.1fs for Temporal/PostgreSQL to go idle before measuring", took.Seconds())
		if !idle {
			settled += " (still busy at -settle-timeout)"
		}
		b.logf("%s: measuring (%s)", title, settled)
		p, err := b.measured(key, func() (Phase, error) { return body(), nil })
		p.Notes = append(p.Notes, settled)
		if p.CPU != nil && p.CPU.PerOpMs["machine"] > 0 {
			if share := p.CPU.PerOpMs["other"] / p.CPU.PerOpMs["machine"]; share > noisyShare {
				p.Notes = append(p.Notes, fmt.Sprintf("WARNING: other processes used %.0f%% of the busy CPU during this phase; its numbers reflect a shared machine", 100*share))
			}
		}
		if err == nil && ctx.Err() != nil {
			err = ctx.Err()
		}
		rep.Phases = append(rep.Phases, p)
		b.logf("  %s: %d ok, %d unexpected, %d errors, %.1f/s, p50 %s, p99 %s", p.Title, p.OK, p.Unexpected, p.Errors, p.PerSec, fmtMs(p.Latency.P50Ms), fmtMs(p.Latency.P99Ms))
		return err
	}

	// Each ratio's pair runs back to back — (a) then (b), (a') then (c) — so that
	// drift in the machine's load affects both sides alike.
	aw, as := b.series("aw", w, b.bUsers), b.series("a", n, b.bUsers)
	bw, bs := b.series("bw", max(w, len(b.bUsers)), b.bUsers), b.series("b", n, b.bUsers)
	bwIDs, bIDs := make([]string, len(bw)), make([]string, len(bs))
	if err := phase("a", titleA,
		func() { b.logf("(a) warm-up: %d bare starts", len(aw)); b.startEmpty(ctx, aw, false) },
		func() Phase { return phaseFrom(titleA, b.startEmpty(ctx, as, false)) }); err != nil {
		return err
	}
	if err := phase("b", titleB,
		func() {
			b.logf("(b) warm-up: %d submissions (every bench user at least once, to warm the API's caches)", len(bw))
			b.submit(ctx, bw, bwIDs, false)
		},
		func() Phase { return phaseFrom(titleB, b.submit(ctx, bs, bIDs, false)) }); err != nil {
		return err
	}
	// Let the worker deliver (b)'s backlog, so (a') and (c) run on a quiet system and
	// (c)'s originals are recorded in PostgreSQL.
	b.logf("waiting for (b)'s %d notifications to reach their inboxes (polling <= %.0f/s)", len(bw)+len(bs), b.o.drainRate)
	all, allIDs := append(append([]notification(nil), bw...), bs...), append(append([]string(nil), bwIDs...), bIDs...)
	seen, took := b.drain(ctx, b.bUsers, all, allIDs, b.o.drainRate)
	rep.Notes = append(rep.Notes, fmt.Sprintf(
		"after (b): %s of (b)'s notifications (incl. warm-up) reached their inboxes %.1fs after (b) ended (the worker's backlog; polled <= %.0f/s)",
		seen, took.Seconds(), b.o.drainRate))
	if err := phase("a-dup", titleADup,
		func() { b.logf("(a') warm-up: %d duplicate starts", len(aw)); b.startEmpty(ctx, aw, true) },
		func() Phase { return phaseFrom(titleADup, b.startEmpty(ctx, as, true)) }); err != nil {
		return err
	}
	if err := phase("c", titleC,
		func() { b.logf("(c) warm-up: %d duplicate submissions", len(bw)); b.submit(ctx, bw, bwIDs, true) },
		func() Phase { return phaseFrom(titleC, b.submit(ctx, bs, bIDs, true)) }); err != nil {
		return err
	}

	// (d).
	dw := b.series("dw", len(b.dUsers), b.dUsers)
	dwIDs := make([]string, len(dw))
	return phase("d", titleD,
		func() {
			b.logf("(d) warm-up: one notification per (d) user, until visible")
			b.submit(ctx, dw, dwIDs, false)
			b.drain(ctx, b.dUsers, dw, dwIDs, b.o.pollRate)
		},
		func() Phase { return b.acceptToInbox(ctx, b.series("d", b.o.dN, b.dUsers)) })
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
		_, err := b.tc.ExecuteWorkflow(ctx, api.StartOptions(id, b.benchQueue, nt.input), benchWorkflowName, nt.input)
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

// drain waits (bounded by -d-timeout) until the given accepted notifications are in
// their users' inboxes.
func (b *bench) drain(ctx context.Context, users []string, list []notification, ids []string, pollRate float64) (string, time.Duration) {
	t0 := time.Now()
	t := newTracker(users)
	total := 0
	for i, id := range ids {
		if id != "" {
			t.add(list[i].user, id, t0)
			total++
		}
	}
	dctx, cancel := context.WithTimeout(ctx, b.o.dTimeout)
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

// cleanupWorkflows terminates every workflow the bench started: the empty (a)
// workflows and, in self-host mode, the notification workflows (they would
// otherwise hold their dedup window on a task queue nobody polls any more).
// Database rows of the bench tenant are left in place.
func (b *bench) cleanupWorkflows() string {
	b.mu.Lock()
	wfIDs := append([]string(nil), b.emptyIDs...)
	nNotif := 0
	if b.selfHost {
		for _, k := range b.notifKeys {
			wfIDs = append(wfIDs, ids.NotificationWorkflowID(b.tenantID, ids.IdempotencyKeyHash(k)))
		}
		nNotif = len(b.notifKeys)
	}
	b.mu.Unlock()
	if len(wfIDs) == 0 {
		return "nothing to terminate"
	}
	b.logf("cleanup: terminating %d workflows (%d empty, %d notification)", len(wfIDs), len(wfIDs)-nNotif, nNotif)
	ctx, cancel := context.WithTimeout(context.Background(), b.o.cleanupTimeout)
	defer cancel()
	var goneN atomic.Int64
	r := closedLoop(ctx, len(wfIDs), b.o.concurrency, b.o.reqTimeout, func(ctx context.Context, i int) (outcome, error) {
		err := b.tc.TerminateWorkflow(ctx, wfIDs[i], "", "herald-bench finished")
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
	b.logf("cleanup: %s", msg)
	return msg
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
			fmt.Fprintf(w, "%-58s %6.3f  (%.1f / %.1f per sec)  goal >= %.2f  %s\n", r.Name, r.Value, r.Numerator, r.Denominator, r.Goal, r.Verdict())
		} else {
			fmt.Fprintf(w, "%-58s    n/a  goal >= %.2f  %s (%s)\n", r.Name, r.Goal, r.Verdict(), r.Note)
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
