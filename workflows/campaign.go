package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/herald"
)

// Campaign workflow names: the progress query and the live controls (workflow
// updates whose answer is the campaign's new state).
const (
	QueryCampaignProgress = "progress"
	UpdatePause           = "pause"
	UpdateResume          = "resume"
	UpdateCancelCampaign  = "cancel"
)

// Campaign sizing defaults: a batch handles DefaultCampaignPageSize recipients,
// DefaultCampaignWindow batches run at once, and a run continues as new after
// CampaignBatchesPerRun batches so the history stays bounded (about ten events
// per batch: a 1M-recipient campaign is ~2,000 batches, ten runs). The first two
// are also the defaults of HERALD_CAMPAIGN_PAGE_SIZE and HERALD_CAMPAIGN_WINDOW
// (internal/config reads them from here).
const (
	DefaultCampaignPageSize = 500
	DefaultCampaignWindow   = 4
	CampaignBatchesPerRun   = 200
	// campaignPendingPage bounds one drain of owed work (deferrals, retries).
	campaignPendingPage = 500
)

// CampaignInput starts (or, with State, continues) a campaign.
type CampaignInput struct {
	Spec contract.CampaignSpec
	// RatePerSecond caps the campaign's recipients per second (0: as fast as the
	// window allows); the workflow paces batch starts to it, so it holds
	// whatever the number of workers.
	RatePerSecond float64
	SendAt        time.Time
	// PageSize and Window override the defaults (tests, the bench).
	PageSize int
	Window   int
	// State carries the progress across continue-as-new (nil on the first run).
	State *CampaignState
}

// CampaignState is the campaign's progress, answered by the progress query and
// carried across continue-as-new.
type CampaignState struct {
	Status       string
	AudienceSize int64
	UnknownUsers int64
	// Cursor is the last user id of the audience prefix every batch is done with.
	Cursor string
	// AudienceDone: every page of the audience has been handled; owed work
	// (deferrals, retries) may remain.
	AudienceDone bool
	Paused       bool
	Cancelled    bool
	Batches      int
	Totals       contract.CampaignBatchResult
	StartedAt    time.Time
	// LastError is the last batch failure that failed the campaign.
	LastError string
}

// CampaignWorkflowResult is the campaign's final state.
type CampaignWorkflowResult = CampaignState

// CampaignWorkflow is one campaign. Its workflow ID derives from tenant + campaign
// key (Layer 1). It pages through the audience by keyset cursor and hands each
// page to one CampaignBatch activity (gate in bulk, render, write each
// recipient's notification and guarded deliveries), with up to Window batches
// in flight; then it drains the owed work (quiet-hours deferrals at their
// window's end, retries after their backoff). Pause, resume and cancel are
// updates; pausing stops new batches (those in flight finish) and survives
// worker restarts because it is workflow state.
func CampaignWorkflow(ctx workflow.Context, in CampaignInput) (CampaignWorkflowResult, error) {
	c, err := setupCampaign(ctx, in)
	if err != nil {
		return CampaignWorkflowResult{}, err
	}
	return c.run(ctx)
}

type campaign struct {
	in       CampaignInput
	st       CampaignState
	pageSize int
	window   int
	// runBatches counts this run's batches (continue-as-new after CampaignBatchesPerRun).
	runBatches int
	// changed wakes waits when an update changed pause or cancel.
	changed int
}

func setupCampaign(ctx workflow.Context, in CampaignInput) (*campaign, error) {
	c := &campaign{in: in, pageSize: in.PageSize, window: in.Window}
	if c.pageSize <= 0 {
		c.pageSize = DefaultCampaignPageSize
	}
	if in.RatePerSecond > 0 {
		// About a second of sends per batch, so pacing stays smooth.
		c.pageSize = max(1, min(c.pageSize, int(in.RatePerSecond)))
	}
	if c.window <= 0 {
		c.window = DefaultCampaignWindow
	}
	if in.State != nil {
		c.st = *in.State
	} else {
		// Set before the handlers exist: a control that arrives with the start
		// runs before run's first step and must find the campaign scheduled.
		c.st.Status = herald.CampaignScheduled
	}
	if err := workflow.SetQueryHandler(ctx, QueryCampaignProgress, func() (CampaignState, error) { return c.st, nil }); err != nil {
		return nil, err
	}
	for _, u := range []struct {
		name string
		fn   func(workflow.Context) (CampaignState, error)
	}{{UpdatePause, c.pause}, {UpdateResume, c.resume}, {UpdateCancelCampaign, c.cancel}} {
		if err := workflow.SetUpdateHandlerWithOptions(ctx, u.name, u.fn, workflow.UpdateHandlerOptions{Validator: c.validateControl}); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *campaign) run(ctx workflow.Context) (CampaignWorkflowResult, error) {
	if c.st.Status == herald.CampaignScheduled {
		if wait := c.in.SendAt.Sub(workflow.Now(ctx)); !c.in.SendAt.IsZero() && wait > 0 {
			_, _ = workflow.AwaitWithTimeout(ctx, wait, func() bool { return c.st.Cancelled })
		}
		if !c.st.Cancelled {
			var res contract.CampaignStartResult
			if err := c.db(ctx, contract.CampaignStart, c.in.Spec).Get(ctx, &res); err != nil {
				return c.fail(ctx, err)
			}
			c.st.AudienceSize, c.st.UnknownUsers, c.st.StartedAt = res.AudienceSize, res.UnknownUsers, workflow.Now(ctx)
			if c.st.Paused {
				c.setStatus(ctx, herald.CampaignPaused)
			} else {
				c.setStatus(ctx, herald.CampaignRunning)
			}
		}
	}
	if !c.st.AudienceDone && !c.st.Cancelled {
		if err := c.sendAudience(ctx); err != nil {
			return c.fail(ctx, err)
		}
		if c.runBatches >= CampaignBatchesPerRun && !c.st.AudienceDone && !c.st.Cancelled {
			return c.continueAsNew(ctx)
		}
	}
	if !c.st.Cancelled {
		if err := c.drainPending(ctx); err != nil {
			return c.fail(ctx, err)
		}
		if c.runBatches >= CampaignBatchesPerRun && !c.st.Cancelled {
			return c.continueAsNew(ctx)
		}
	}
	// Let a control update that is still recording finish before the last word.
	_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
	final := herald.CampaignCompleted
	if c.st.Cancelled {
		final = herald.CampaignCancelled
	}
	if err := c.record(ctx, final); err != nil {
		return c.st, err
	}
	c.st.Status = final
	c.upsertStatus(ctx)
	return c.st, nil
}

// drainPending handles owed work as it falls due: deferrals at the end of the
// recipients' quiet hours, retries after their backoff.
func (c *campaign) drainPending(ctx workflow.Context) error {
	for !c.st.Cancelled && c.runBatches < CampaignBatchesPerRun {
		var next contract.CampaignNextDueResult
		if err := c.db(ctx, contract.CampaignNextDue, c.in.Spec).Get(ctx, &next); err != nil {
			return err
		}
		if !next.Any {
			return nil
		}
		if wait := next.Due.Sub(workflow.Now(ctx)); wait > 0 {
			seen := c.changed
			if ok, _ := workflow.AwaitWithTimeout(ctx, wait, func() bool { return c.changed != seen }); ok {
				continue
			}
		}
		if c.st.Paused {
			if err := workflow.Await(ctx, func() bool { return !c.st.Paused || c.st.Cancelled }); err != nil {
				return err
			}
			continue
		}
		var res contract.CampaignPendingResult
		c.runBatches++
		if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, campaignBatchOptions), contract.CampaignPendingBatch,
			contract.CampaignPendingInput{Campaign: c.in.Spec, Limit: campaignPendingPage}).Get(ctx, &res); err != nil {
			return err
		}
		c.st.Totals.Add(res.CampaignBatchResult)
		c.st.Totals.Recipients -= res.Recipients // owed work is for recipients already counted
		c.st.Batches++
	}
	return nil
}

func (c *campaign) continueAsNew(ctx workflow.Context) (CampaignWorkflowResult, error) {
	_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
	next := c.in
	st := c.st
	next.State = &st
	return c.st, workflow.NewContinueAsNewError(ctx, CampaignWorkflow, next)
}

// fail records the campaign failed; the workflow itself completes (the failure
// is the campaign's status, visible through the API).
func (c *campaign) fail(ctx workflow.Context, cause error) (CampaignWorkflowResult, error) {
	c.st.LastError = contract.ErrorMessage(cause)
	workflow.GetLogger(ctx).Error("campaign failed", "campaign", c.in.Spec.CampaignID, "error", cause)
	reason := herald.CampaignBatchFailed
	switch {
	case contract.CampaignQuota.Is(cause):
		reason = herald.CampaignQuotaExceeded
	case contract.CampaignAudience.Is(cause):
		reason = herald.CampaignAudienceTooLarge
	}
	if err := c.db(ctx, contract.CampaignSetStatus, contract.CampaignSetStatusInput{
		TenantID: c.in.Spec.TenantID, CampaignID: c.in.Spec.CampaignID, Status: herald.CampaignFailed,
		Reason: reason, Message: c.st.LastError,
	}).Get(ctx, nil); err != nil {
		return c.st, err
	}
	c.st.Status = herald.CampaignFailed
	c.upsertStatus(ctx)
	return c.st, nil
}

func (c *campaign) validateControl(ctx workflow.Context) error {
	if herald.CampaignFinal(c.st.Status) || c.st.Cancelled {
		return contract.CampaignFinal.New("the campaign has already finished ("+c.st.Status+")", nil)
	}
	return nil
}

func (c *campaign) pause(ctx workflow.Context) (CampaignState, error) {
	if !c.st.Paused {
		c.st.Paused = true
		c.changed++
		if c.st.Status != herald.CampaignScheduled {
			c.setStatus(ctx, herald.CampaignPaused)
		}
	}
	return c.st, nil
}

func (c *campaign) resume(ctx workflow.Context) (CampaignState, error) {
	if c.st.Paused {
		c.st.Paused = false
		c.changed++
		if c.st.Status != herald.CampaignScheduled {
			c.setStatus(ctx, herald.CampaignRunning)
		}
	}
	return c.st, nil
}

// cancel stops the campaign: no batch starts any more, owed work is cancelled
// once the batches in flight are done, and the campaign ends cancelled.
func (c *campaign) cancel(ctx workflow.Context) (CampaignState, error) {
	c.st.Cancelled = true
	c.changed++
	c.setStatus(ctx, herald.CampaignCancelled)
	return c.st, nil
}

// setStatus records a (non-final) status in PostgreSQL and the search attribute.
func (c *campaign) setStatus(ctx workflow.Context, status string) {
	c.st.Status = status
	if err := c.record(ctx, status); err != nil {
		workflow.GetLogger(ctx).Error("recording the campaign status failed", "status", status, "error", err)
	}
	c.upsertStatus(ctx)
}

func (c *campaign) upsertStatus(ctx workflow.Context) {
	if err := workflow.UpsertTypedSearchAttributes(ctx, SearchAttrStatus.ValueSet(c.st.Status)); err != nil {
		workflow.GetLogger(ctx).Warn("upserting status search attribute failed", "error", err)
	}
}

func (c *campaign) record(ctx workflow.Context, status string) error {
	return c.db(ctx, contract.CampaignSetStatus, contract.CampaignSetStatusInput{
		TenantID: c.in.Spec.TenantID, CampaignID: c.in.Spec.CampaignID, Status: status,
	}).Get(ctx, nil)
}

// db runs a small database activity of the campaign as a local activity.
func (c *campaign) db(ctx workflow.Context, activity string, args ...any) workflow.Future {
	return workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, localDatabaseOptions), activity, args...)
}

// campaignBatchOptions: a batch is a regular activity (it heartbeats, runs on any
// bulk worker and is retried with backoff for up to a day: re-running a batch is
// safe, the delivery guard skips what was sent).
var campaignBatchOptions = workflow.ActivityOptions{
	StartToCloseTimeout:    10 * time.Minute,
	ScheduleToCloseTimeout: 24 * time.Hour,
	HeartbeatTimeout:       5 * time.Second,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:        time.Second,
		BackoffCoefficient:     2,
		MaximumInterval:        time.Minute,
		NonRetryableErrorTypes: []string{herald.ErrTypeRenderFailed},
	},
}
