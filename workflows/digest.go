package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/flows"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/internal/templates"
)

// Digest names (the workflow type, its signals and its ID live in
// activities/contract, whose DigestAdd activity starts it).
const (
	SignalDigestEvent = contract.SignalDigestEvent
	SignalDigestFlush = contract.SignalDigestFlush
	// SignalInbox wakes a flow run waiting on an inbox item.
	SignalInbox = contract.SignalInbox
	// QueryDigest answers the digest's DigestState.
	QueryDigest = "digest"
)

// DigestInput starts (or continues) a digest.
type DigestInput = contract.DigestInput

// DigestState is a digest's window across continue-as-new.
type DigestState = contract.DigestState

// DigestWorkflowID is the digest of a tenant's flow for one user and key.
func DigestWorkflowID(tenantID, flowID, userID, key string) string {
	return contract.DigestWorkflowID(tenantID, flowID, userID, key)
}

// digestEventsPerRun bounds one run's history: after this many events (about
// two history events each) the digest continues as new, carrying its window.
const digestEventsPerRun = 2000

// DigestResult is what a digest run did.
type DigestResult struct {
	Closed int
}

// DigestWorkflow is one digest key (tenant + flow + user + key), fed by
// signal-with-start from the events' flow runs (the DigestAdd activity writes
// the event's row first, then signals). Temporal runs it one task at a time,
// so events are serialised by construction. A window opens with its first
// event and closes when its mode says (fixed: window after the first event;
// sliding: window after the latest, at most max_wait after the first;
// scheduled: the next local time in the user's zone), when max_items events
// arrived, or on a flush. Closing claims the key's unclaimed event rows in
// PostgreSQL (each row at most once), then starts the digest's continuation:
// the steps after the digest, once, with {{.digest.count}}, {{.digest.items}},
// {{.digest.first_at}} and {{.digest.last_at}}. Signals are drained before the
// run completes or continues as new; see docs/digests.md for the races.
func DigestWorkflow(ctx workflow.Context, in DigestInput) (DigestResult, error) {
	d := &digest{in: in, events: workflow.GetSignalChannel(ctx, SignalDigestEvent), flush: workflow.GetSignalChannel(ctx, SignalDigestFlush)}
	if in.State != nil {
		d.st = *in.State
	}
	d.step = stepAt(in.Flow.Steps, in.Path)
	if err := workflow.SetQueryHandler(ctx, QueryDigest, func() (DigestState, error) { return d.st, nil }); err != nil {
		return DigestResult{}, err
	}
	return d.run(ctx)
}

type digest struct {
	in     DigestInput
	st     DigestState
	step   flows.Step
	events workflow.ReceiveChannel
	flush  workflow.ReceiveChannel
	// runEvents counts this run's events (continue-as-new after digestEventsPerRun).
	runEvents int
	closed    int
	timezone  *string
}

// stepAt is the step at path (indexes; a branch's arm in between).
func stepAt(steps []flows.Step, path []int) flows.Step {
	for len(path) > 0 {
		i := path[0]
		if i < 0 || i >= len(steps) {
			return flows.Step{}
		}
		if len(path) == 1 {
			return steps[i]
		}
		steps, _ = branchArm(steps[i], path[1])
		path = path[2:]
	}
	return flows.Step{}
}

func (d *digest) run(ctx workflow.Context) (DigestResult, error) {
	for {
		if !d.st.Open {
			// Nothing open: take the next event, or end. The check is the last
			// thing before returning, so a signal that arrived meanwhile is
			// taken (Temporal refuses to complete a run with unhandled signals).
			var ev contract.DigestEvent
			if !d.events.ReceiveAsync(&ev) {
				d.flush.ReceiveAsync(nil) // a flush of nothing open is nothing
				return DigestResult{Closed: d.closed}, nil
			}
			if err := d.open(ctx, ev); err != nil {
				return DigestResult{}, err
			}
		}
		if err := d.collect(ctx); err != nil {
			return DigestResult{}, err
		}
		if err := d.close(ctx); err != nil {
			return DigestResult{}, err
		}
		if d.runEvents >= digestEventsPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			d.drain(ctx)
			next := d.in
			st := d.st
			next.State = &st
			return DigestResult{Closed: d.closed}, workflow.NewContinueAsNewError(ctx, DigestWorkflow, next)
		}
	}
}

// open starts a window with its first event; first: send_now sends that event
// at once, alone.
func (d *digest) open(ctx workflow.Context, ev contract.DigestEvent) error {
	now := workflow.Now(ctx)
	d.st = DigestState{Open: true, OpenedAt: now, LastAt: now, Closed: d.st.Closed}
	d.absorb(ctx, ev)
	closesAt, err := d.fixedClose(ctx)
	if err != nil {
		return err
	}
	if err := d.db(ctx, contract.DigestOpen, contract.DigestOpenInput{
		TenantID: d.in.TenantID, DigestKey: d.key(ctx), FlowID: d.in.FlowID, UserID: d.in.UserID, Key: d.in.Key,
		OpenedAt: now, ClosesAt: closesAt, Window: d.step.Window.D(), MaxWait: d.step.MaxWait.D(),
	}).Get(ctx, nil); err != nil {
		return err
	}
	if d.step.First == flows.FirstSendNow {
		d.st.FirstSent = true
		return d.claimAndSend(ctx, ev.Seq)
	}
	return nil
}

// absorb counts a signal's events (one, or a coalesced batch) into the open window.
func (d *digest) absorb(ctx workflow.Context, ev contract.DigestEvent) {
	n := max(1, ev.Count)
	d.st.Known += n
	d.runEvents += n
	d.st.MaxSeq = max(d.st.MaxSeq, ev.Seq)
	d.st.LastAt = workflow.Now(ctx)
}

// fixedClose is the window's close when it does not move with events: fixed
// and scheduled windows (zero for sliding).
func (d *digest) fixedClose(ctx workflow.Context) (time.Time, error) {
	switch d.step.Mode {
	case flows.DigestSliding:
		return time.Time{}, nil
	case flows.DigestScheduled:
		tz, err := d.userTimezone(ctx)
		if err != nil {
			return time.Time{}, err
		}
		return scheduledClose(d.st.OpenedAt, tz, d.step.Schedule), nil
	}
	return d.st.OpenedAt.Add(d.step.Window.D()), nil
}

// closesAt is when the open window closes now.
func (d *digest) closesAt(ctx workflow.Context) (time.Time, error) {
	if d.step.Mode == flows.DigestSliding {
		at := d.st.LastAt.Add(d.step.Window.D())
		if d.step.MaxWait > 0 {
			at = minTime(at, d.st.OpenedAt.Add(d.step.MaxWait.D()))
		}
		return at, nil
	}
	return d.fixedClose(ctx)
}

// collect takes events into the open window until it closes: its time, its
// max_items, or a flush. The close timer is started once and kept while the
// close time stays put (fixed and scheduled windows: an event costs its digest
// its signal and nothing more); a sliding window's close moves with each
// event, so its timer is replaced.
func (d *digest) collect(ctx workflow.Context) error {
	var timer workflow.Future
	var timerAt time.Time
	cancelTimer := func() {}
	defer func() { cancelTimer() }() // a flush or max_items closes before the timer
	for !d.st.Flush && !d.full() {
		at, err := d.closesAt(ctx)
		if err != nil {
			return err
		}
		left := at.Sub(workflow.Now(ctx))
		if left <= 0 {
			return nil
		}
		if timer == nil || !at.Equal(timerAt) {
			cancelTimer()
			tctx, cancel := workflow.WithCancel(ctx)
			timer, timerAt, cancelTimer = workflow.NewTimer(tctx, left), at, cancel
		}
		fired := false
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(timer, func(workflow.Future) { fired = true })
		sel.AddReceive(d.events, func(c workflow.ReceiveChannel, _ bool) {
			var ev contract.DigestEvent
			c.Receive(ctx, &ev)
			d.absorb(ctx, ev)
		})
		sel.AddReceive(d.flush, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, nil)
			d.st.Flush = true
		})
		sel.Select(ctx)
		if fired {
			return nil
		}
		if d.runEvents >= digestEventsPerRun {
			// Continue as new with the window still open (the timer is
			// re-created from the state in the next run).
			d.drain(ctx)
			next := d.in
			st := d.st
			next.State = &st
			return workflow.NewContinueAsNewError(ctx, DigestWorkflow, next)
		}
	}
	return nil
}

func (d *digest) full() bool {
	return d.step.MaxItems > 0 && d.st.Known >= d.step.MaxItems
}

// drain takes every signal already delivered into the state, so nothing is
// left behind by a continue-as-new.
func (d *digest) drain(ctx workflow.Context) {
	var ev contract.DigestEvent
	for d.events.ReceiveAsync(&ev) {
		if !d.st.Open {
			now := workflow.Now(ctx)
			d.st = DigestState{Open: true, OpenedAt: now, LastAt: now, Closed: d.st.Closed}
		}
		d.absorb(ctx, ev)
	}
	for d.flush.ReceiveAsync(nil) {
		if d.st.Open {
			d.st.Flush = true
		}
	}
}

// close claims the window's events and sends the digest. Events left unclaimed
// (over max_items, or known by a seq the claim did not reach) open the next
// window at once.
func (d *digest) close(ctx workflow.Context) error {
	limit := d.step.MaxItems
	res, err := d.claim(ctx, limit, 0, false)
	if err != nil {
		return err
	}
	if res.Count > 0 {
		if err := d.send(ctx, res); err != nil {
			return err
		}
	}
	d.st.Open, d.st.Flush, d.st.FirstSent = false, false, false
	if res.Remaining > 0 {
		now := workflow.Now(ctx)
		d.st = DigestState{Open: true, OpenedAt: now, LastAt: now, Closed: d.st.Closed, Known: res.Remaining, MaxSeq: d.st.MaxSeq}
		closesAt, err := d.fixedClose(ctx)
		if err != nil {
			return err
		}
		return d.db(ctx, contract.DigestOpen, contract.DigestOpenInput{
			TenantID: d.in.TenantID, DigestKey: d.key(ctx), FlowID: d.in.FlowID, UserID: d.in.UserID, Key: d.in.Key,
			OpenedAt: now, ClosesAt: closesAt, Window: d.step.Window.D(), MaxWait: d.step.MaxWait.D(),
		}).Get(ctx, nil)
	}
	return nil
}

// claimAndSend claims one event alone and sends it, the window staying open
// (first: send_now).
func (d *digest) claimAndSend(ctx workflow.Context, onlySeq int64) error {
	res, err := d.claim(ctx, 1, onlySeq, true)
	if err != nil {
		return err
	}
	if res.Count > 0 {
		return d.send(ctx, res)
	}
	return nil
}

// claim closes a digest id over the key's unclaimed events (DigestClose).
func (d *digest) claim(ctx workflow.Context, limit int, onlySeq int64, keepOpen bool) (contract.DigestCloseResult, error) {
	d.st.Closed++
	d.closed++
	items := d.step.Items
	if items <= 0 {
		items = flows.DefaultDigestItems
	}
	var res contract.DigestCloseResult
	err := d.db(ctx, contract.DigestClose, contract.DigestCloseInput{
		TenantID: d.in.TenantID, DigestKey: d.key(ctx), DigestID: d.digestID(ctx), FlowID: d.in.FlowID, UserID: d.in.UserID,
		Key: d.in.Key, MaxSeq: d.st.MaxSeq, Limit: limit, OnlySeq: onlySeq, Items: items, ClosedAt: workflow.Now(ctx),
		KeepOpen: keepOpen,
	}).Get(ctx, &res)
	if err == nil {
		d.st.Known = max(0, d.st.Known-res.Count)
	}
	return res, err
}

// digestID names the digest being closed: derived from the workflow's first
// run (a new chain after the key went quiet gets a new one) and the count of
// digests this chain closed, so a replay or a retried close names the same one.
func (d *digest) digestID(ctx workflow.Context) string {
	info := workflow.GetInfo(ctx)
	sum := sha256.Sum256([]byte(info.WorkflowExecution.ID + "|" + info.FirstRunID + "|" + strconv.Itoa(d.st.Closed)))
	return "dg_" + hex.EncodeToString(sum[:16])
}

func (d *digest) key(ctx workflow.Context) string { return workflow.GetInfo(ctx).WorkflowExecution.ID }

// send starts the digest's continuation: the steps after the digest step, as a
// flow run whose workflow ID (and so notification id) derives from the digest
// id, so its sends are guarded by Layer 2 like any notification. The digest
// waits for the start only; the continuation outlives it.
func (d *digest) send(ctx workflow.Context, res contract.DigestCloseResult) error {
	digestID := d.digestID(ctx)
	items := make([]any, 0, len(res.Items))
	for _, it := range res.Items {
		items = append(items, map[string]any(it))
	}
	data := templates.Data{"digest": map[string]any{
		"count": res.Count, "items": items, "id": digestID,
		"first_at": res.FirstAt.UTC().Format(time.RFC3339), "last_at": res.LastAt.UTC().Format(time.RFC3339),
	}}
	key := derivedKey("digest", digestID)
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            ids.NotificationWorkflowID(d.in.TenantID, key),
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		Memo:                  map[string]any{memoUser: d.in.UserID, memoTemplate: "", memoChannels: []herald.Channel{}},
		TypedSearchAttributes: temporal.NewSearchAttributes(
			SearchAttrTenant.ValueSet(d.in.TenantID), SearchAttrUser.ValueSet(d.in.UserID),
			SearchAttrStatus.ValueSet(string(herald.NotificationQueued))),
	})
	fut := workflow.ExecuteChildWorkflow(cctx, FlowWorkflow, FlowInput{
		TenantID: d.in.TenantID, UserID: d.in.UserID, FlowID: d.in.FlowID, FlowVersion: d.in.FlowVersion, Flow: d.in.Flow,
		Data: data, Digest: &DigestResume{DigestID: digestID, From: d.in.Path},
	})
	var started workflow.Execution
	if err := fut.GetChildWorkflowExecution().Get(ctx, &started); err != nil {
		if temporal.IsWorkflowExecutionAlreadyStartedError(err) {
			return nil // started before (cannot happen on replay; a second start is refused, never sent twice)
		}
		return err
	}
	return nil
}

func (d *digest) userTimezone(ctx workflow.Context) (string, error) {
	if d.timezone != nil {
		return *d.timezone, nil
	}
	var r contract.Recipient
	if err := d.db(ctx, contract.LoadRecipient, contract.LoadRecipientInput{TenantID: d.in.TenantID, UserID: d.in.UserID}).
		Get(ctx, &r); err != nil && !contract.UnknownUser.Is(err) {
		return "", err
	}
	d.timezone = &r.Timezone
	return r.Timezone, nil
}

func (d *digest) db(ctx workflow.Context, activity string, args ...any) workflow.Future {
	return workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, localDatabaseOptions), activity, args...)
}

// scheduledClose is a scheduled digest's next close after from: every day at
// At, or every week on Weekday at At, in the user's zone.
func scheduledClose(from time.Time, tz string, s *flows.Schedule) time.Time {
	if s == nil {
		return from.Add(24 * time.Hour)
	}
	if s.Every == "week" {
		return NextWeeklyTime(from, tz, parseWeekday(s.Weekday), s.At)
	}
	return NextLocalTime(from, tz, s.At)
}

func parseWeekday(s string) time.Weekday {
	for d := time.Sunday; d <= time.Saturday; d++ {
		if strings.EqualFold(d.String(), s) {
			return d
		}
	}
	return time.Monday
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
