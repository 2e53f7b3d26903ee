package activities

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/herald"
)

// The sweeper of digest events accepted without a workflow of their own (the
// API's fast path for flows whose first step is a digest, docs/digests.md):
// the API commits the event's row, then signals its digest. A crash (or a Temporal error answered 503) between the commit and
// the signal leaves a row no digest knows of; the sweeper signals its digest,
// so every accepted event ends in a digest, and so in a final, visible state,
// whether or not the client retries.

// DigestSweepGrace is how long an accepted event may wait for its signal
// before the sweeper sends one: well past the API's 10-second accept deadline
// and the moment a signalled digest takes to record its open window, so the
// sweeper almost never signals an event its digest knows (a repeated signal is
// harmless either way: membership is the row's claim).
const DigestSweepGrace = 30 * time.Second

// DigestSweepInterval is how often a worker process sweeps.
const DigestSweepInterval = 15 * time.Second

// digestSweepBatch bounds one sweep's digests, and the expired dedup keys it
// deletes (the next sweep takes the rest).
const digestSweepBatch = 500

// SweepDigestEvents signals the digest of every key with events accepted
// before olderThan that no digest knows of (store.OverdueDigests). It returns
// how many digests it signalled.
//
// A function, not a method: the worker registers every method of Activities
// as an activity, and this runs beside the worker, not in a workflow.
func SweepDigestEvents(ctx context.Context, a *Activities, olderThan time.Time) (int, error) {
	if a.Digests == nil {
		return 0, errors.New("this process has no Temporal client for digests")
	}
	pending, err := a.Store.OverdueDigests(ctx, olderThan, digestSweepBatch)
	if err != nil {
		return 0, err
	}
	signalled := 0
	var errs []error
	for _, p := range pending {
		rec, err := a.Store.GetFlow(ctx, p.TenantID, p.FlowID, p.FlowVersion)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		in := contract.DigestInput{TenantID: p.TenantID, UserID: p.UserID, FlowID: p.FlowID, FlowVersion: p.FlowVersion,
			Flow: rec.Definition, Path: []int{0}, Key: p.Key}
		if err := a.Digests.SignalDigestEvent(ctx, herald.LaneNormal, in, contract.DigestEvent{Seq: p.Seq, At: p.At}); err != nil {
			errs = append(errs, err)
			continue
		}
		signalled++
	}
	return signalled, errors.Join(errs...)
}

// SweepDigestEventsEvery sweeps every interval until ctx is done, deleting
// expired dedup keys of digest-first events on the way (a worker process runs
// it; several processes sweeping at once only repeat signals).
func SweepDigestEventsEvery(ctx context.Context, a *Activities, interval time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := a.Store.PruneDigestEventKeys(ctx, time.Now(), digestSweepBatch); err != nil && ctx.Err() == nil {
			log.Warn("pruning expired digest event keys", "error", err)
		}
		n, err := SweepDigestEvents(ctx, a, time.Now().Add(-DigestSweepGrace))
		if err != nil && ctx.Err() == nil {
			log.Warn("sweeping digest events", "signalled", n, "error", err)
		} else if n > 0 {
			log.Info("swept digest events: signalled digests their events had not reached", "digests", n)
		}
	}
}
