package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/herald-notify/herald/activities/contract"
)

// batchWindow sends the campaign's audience: a sliding window of up to
// campaign.window CampaignBatch activities over the audience's pages, fetched
// ahead by keyset, started no faster than the campaign's rate, with the
// cursor moved only over the batches done in page order. It is workflow code:
// everything it waits on goes through the workflow's context.
type batchWindow struct {
	c   *campaign
	sel workflow.Selector
	// queue holds page ends not yet started; ended: the audience has no page
	// after them.
	queue []string
	ended bool
	// launched is the page end of the last batch started.
	launched string
	// slots are the batches started and not yet passed by the cursor, in page
	// order; inflight counts those not done.
	slots    []*slot
	inflight int
	// tokens is the pacing budget in recipients, as of tokensAt (zero: pacing
	// has not begun in this run).
	tokens   float64
	tokensAt time.Time
}

// slot is one batch of the window.
type slot struct {
	through string
	done    bool
	err     error
}

// sendAudience runs batches over the audience, up to the window at once, until
// it ends, the campaign is cancelled, or this run has done its share.
func (c *campaign) sendAudience(ctx workflow.Context) error {
	w := &batchWindow{c: c, sel: workflow.NewSelector(ctx), launched: c.st.Cursor}
	for {
		if err := w.fill(ctx); err != nil {
			return err
		}
		if err := w.advance(); err != nil {
			return err
		}
		if w.inflight > 0 {
			w.sel.Select(ctx)
			continue
		}
		if stop, err := w.idle(ctx); stop || err != nil {
			return err
		}
	}
}

// fill starts batches while the window has room and the campaign may send.
func (w *batchWindow) fill(ctx workflow.Context) error {
	c := w.c
	for w.inflight < c.window && !c.st.Paused && !c.st.Cancelled && c.runBatches < CampaignBatchesPerRun {
		queued, err := w.refill(ctx)
		if err != nil || !queued {
			return err
		}
		if w.pace(ctx) {
			continue // a pause or cancel came: look again
		}
		w.launch(ctx)
	}
	return nil
}

// refill fetches the next page boundaries when the queue is empty and the
// audience may have more; it reports whether a page is queued.
func (w *batchWindow) refill(ctx workflow.Context) (bool, error) {
	if len(w.queue) == 0 && !w.ended {
		c := w.c
		var pages []string
		if err := c.db(ctx, contract.CampaignPages, contract.CampaignPagesInput{
			Campaign: c.in.Spec, After: w.launched, PageSize: c.pageSize, Pages: 2 * c.window,
		}).Get(ctx, &pages); err != nil {
			return false, err
		}
		w.queue, w.ended = pages, len(pages) < 2*c.window
	}
	return len(w.queue) > 0, nil
}

// pace holds the next batch to rate_per_second by tokens: a budget that
// refills at the rate, a page spent per batch. When the budget is short it
// waits whole seconds, never a sub-second timer: timers fire late (by up to a
// second on a dev server), and the budget that accrued meanwhile starts the
// batches that fell behind at once, so the rate holds over any few seconds
// instead of collapsing to a batch per timer. It reports true when a pause or
// cancel interrupted the wait (the batch does not start yet).
func (w *batchWindow) pace(ctx workflow.Context) bool {
	c := w.c
	rate := c.in.RatePerSecond
	if rate <= 0 {
		return false
	}
	page := float64(c.pageSize)
	if w.refillTokens(ctx); w.tokens < page {
		wait := max(time.Second, time.Duration((page-w.tokens)/rate*float64(time.Second)))
		seen := c.changed
		if ok, _ := workflow.AwaitWithTimeout(ctx, wait, func() bool { return c.changed != seen }); ok {
			return true
		}
		w.refillTokens(ctx)
	}
	w.tokens -= page
	return false
}

// refillTokens adds what the rate earned since the last refill. The budget
// starts at one page (the first batch goes at once, and N recipients take
// (N - page) / rate seconds, as the rate promises) and holds at most two
// seconds of sends: enough that a wait of a second whose timer fires a second
// late loses nothing, too little for a slow window to save up a burst.
func (w *batchWindow) refillTokens(ctx workflow.Context) {
	rate := w.c.in.RatePerSecond
	now := workflow.Now(ctx)
	if w.tokensAt.IsZero() {
		w.tokens = float64(w.c.pageSize)
	} else {
		w.tokens = min(max(float64(w.c.pageSize), 2*rate), w.tokens+rate*now.Sub(w.tokensAt).Seconds())
	}
	w.tokensAt = now
}

// launch starts the batch of the queue's first page; when it ends, its result
// counts into the campaign's totals.
func (w *batchWindow) launch(ctx workflow.Context) {
	c := w.c
	s := &slot{through: w.queue[0]}
	after := w.launched
	w.launched, w.queue = w.queue[0], w.queue[1:]
	w.slots = append(w.slots, s)
	w.inflight++
	c.runBatches++
	f := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, campaignBatchOptions), contract.CampaignBatch,
		contract.CampaignBatchInput{Campaign: c.in.Spec, After: after, Through: s.through, Limit: c.pageSize})
	w.sel.AddFuture(f, func(f workflow.Future) {
		var res contract.CampaignBatchResult
		s.err = f.Get(ctx, &res)
		s.done = true
		w.inflight--
		c.st.Totals.Add(res)
		c.st.Batches++
	})
}

// advance moves the cursor over the done prefix only, so a continue-as-new (or
// a cancel) never skips a page still in flight. A failed batch there fails the
// sending.
func (w *batchWindow) advance() error {
	for len(w.slots) > 0 && w.slots[0].done {
		if w.slots[0].err != nil {
			return w.slots[0].err
		}
		w.c.st.Cursor = w.slots[0].through
		w.slots = w.slots[1:]
	}
	return nil
}

// idle decides with nothing in flight: stop (cancelled, the audience is done,
// or this run has done its share), wait out a pause, or start again from the
// queue (paused and resumed while nothing was in flight). It reports whether
// the sending stops.
func (w *batchWindow) idle(ctx workflow.Context) (bool, error) {
	st := &w.c.st
	switch {
	case st.Cancelled:
		return true, nil
	case w.ended && len(w.queue) == 0:
		st.AudienceDone = true
		return true, nil
	case w.c.runBatches >= CampaignBatchesPerRun:
		return true, nil
	case st.Paused:
		return false, workflow.Await(ctx, func() bool { return !st.Paused || st.Cancelled })
	}
	return false, nil
}
