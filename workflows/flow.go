package workflows

import (
	"crypto/sha256"
	"errors"
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

// FlowInput is one event of a tenant's flow, as the API accepted it (or, with
// Digest set, a digest's continuation: the steps after a digest step, run once
// for the digest's events).
type FlowInput struct {
	TenantID string
	UserID   string
	FlowID   string
	// FlowVersion and Flow are the version the run started with: the run keeps
	// it whatever is saved meanwhile.
	FlowVersion int
	Flow        flows.Definition
	// Data is the event's data (numbers as the client wrote them).
	Data templates.Data
	// DedupWindow and BodyHash are the event's Layer-1 window and body hash, as
	// for a notification (NotificationInput).
	DedupWindow time.Duration
	BodyHash    []byte
	// Digest is set on a digest's continuation run.
	Digest *DigestResume `json:",omitempty"`
}

// DigestResume is where a digest's continuation starts: after the digest step
// at From (its path in the definition), with the digest in Data["digest"].
type DigestResume struct {
	DigestID string
	From     []int
}

// FlowStepState is one step of a run as the workflow knows it.
type FlowStepState struct {
	Path           string
	StepID         string
	Type           flows.StepType
	Outcome        herald.StepOutcome
	NotificationID string `json:",omitempty"`
	StartedAt      time.Time
	FinishedAt     time.Time
}

// FlowState answers QueryStatus of a flow run and is its result.
type FlowState struct {
	NotificationID string
	UserID         string
	FlowID         string
	FlowVersion    int
	Status         herald.NotificationStatus
	AcceptedAt     time.Time
	DedupUntil     time.Time
	Steps          []FlowStepState
	// DigestKey is the digest the event joined ("" for none).
	DigestKey string `json:",omitempty"`
}

// FlowResult is the run's result.
type FlowResult = FlowState

// flowChildKeys: a send step's notification and a digest's continuation have
// workflow IDs of the notification form (notification/<tenant>/<key hash>), so
// each is a notification the status API shows; their key hashes derive from
// the event (or digest) and the step, so a replay names the same ones.
func derivedKey(parts ...string) ids.KeyHash {
	sum := sha256.Sum256([]byte("flow|" + strings.Join(parts, "|")))
	var k ids.KeyHash
	copy(k[:], sum[:ids.KeyHashLen])
	return k
}

// FlowWorkflow runs one event through a flow version: one deterministic
// interpreter for every flow (no code per flow), walking the steps in order.
// Its workflow ID is the event's Layer-1 dedup key (the notification form), so
// the event has a notification id, the status API and DELETE
// /v1/notifications/{id} (the cancel update) work on it as on a notification,
// and it stays open for the dedup window.
func FlowWorkflow(ctx workflow.Context, in FlowInput) (FlowResult, error) {
	w, err := setupFlow(ctx, in)
	if err != nil {
		return FlowResult{}, err
	}
	return w.run(ctx)
}

type flowRun struct {
	in    FlowInput
	info  *workflow.Info
	key   ids.KeyHash
	state FlowState
	// stepsCtx is cancelled by the cancel update: a delay or wait ends early.
	stepsCtx    workflow.Context
	cancelSteps workflow.CancelFunc
	cancelled   bool
	recorded    bool
	// sending: a send step's notification is running; a cancel is refused then.
	sending string
	// joining: the digest step is adding the event; a cancel waits for it.
	joining bool
	// finished: the steps are done (the run only holds its dedup window).
	finished bool
	// outcomes and sends by step id, for branches and waits.
	outcomes map[string]herald.StepOutcome
	sends    map[string]string
	// lastSend is the status of the last send step that ran.
	lastSend  herald.NotificationStatus
	recipient *contract.Recipient
	inbox     workflow.ReceiveChannel
}

func setupFlow(ctx workflow.Context, in FlowInput) (*flowRun, error) {
	info := workflow.GetInfo(ctx)
	key, err := ids.KeyHashFromWorkflowID(info.WorkflowExecution.ID)
	if err != nil {
		return nil, contract.BadWorkflowID.New(err.Error(), err)
	}
	w := &flowRun{in: in, info: info, key: key, outcomes: map[string]herald.StepOutcome{}, sends: map[string]string{},
		inbox: workflow.GetSignalChannel(ctx, contract.SignalInbox)}
	w.state = FlowState{
		NotificationID: ids.NotificationID(key, info.WorkflowExecution.RunID),
		UserID:         in.UserID, FlowID: in.FlowID, FlowVersion: in.FlowVersion,
		Status:     herald.NotificationQueued,
		AcceptedAt: info.WorkflowStartTime, DedupUntil: info.WorkflowStartTime.Add(in.DedupWindow),
		Steps: []FlowStepState{},
	}
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (FlowState, error) { return w.state, nil }); err != nil {
		return nil, err
	}
	w.stepsCtx, w.cancelSteps = workflow.WithCancel(ctx)
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateCancel, w.cancel, workflow.UpdateHandlerOptions{
		Validator: w.validateCancel,
	}); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *flowRun) run(ctx workflow.Context) (FlowResult, error) {
	if err := workflow.UpsertTypedSearchAttributes(ctx, SearchAttrNotificationID.ValueSet(w.state.NotificationID)); err != nil {
		return w.state, err
	}
	rec := contract.FlowRecordInput{
		TenantID: w.in.TenantID, NotificationID: w.state.NotificationID, UserID: w.in.UserID, FlowID: w.in.FlowID,
		FlowVersion: w.in.FlowVersion, Category: w.in.Flow.Category, WorkflowID: w.info.WorkflowExecution.ID,
		RunID: w.info.WorkflowExecution.RunID, DedupKeyHash: w.key.String(), AcceptedAt: w.state.AcceptedAt,
		BodyHash: w.in.BodyHash, DedupUntil: w.state.DedupUntil,
	}
	if w.in.Digest != nil {
		rec.DigestID = w.in.Digest.DigestID
	}
	if err := w.db(ctx, contract.FlowRecord, rec).Get(ctx, nil); err != nil {
		return w.state, err
	}
	w.recorded = true
	w.setStatus(ctx, herald.NotificationSending)

	var from []int
	if w.in.Digest != nil {
		from = w.in.Digest.From
	}
	final, err := w.runSteps(ctx, w.in.Flow.Steps, "", from)
	if err != nil {
		return w.state, err
	}
	w.finished = true
	// A cancel still recording (a digest removal) has the last word.
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return w.state, err
	}
	if w.cancelled {
		final = herald.NotificationCancelled
	}
	if final == "" {
		final = w.lastSend
	}
	if final == "" {
		final = herald.NotificationSuppressed // no send step ran (a branch with nothing to do)
	}
	if err := w.recordStatus(ctx, final); err != nil {
		return w.state, err
	}
	// Hold the workflow ID for the rest of the dedup window (the duplicate check),
	// answering cancels of a digested event meanwhile.
	if wait := w.state.DedupUntil.Sub(workflow.Now(ctx)); wait > 0 {
		if err := workflow.Sleep(ctx, wait); err != nil {
			return w.state, err
		}
	}
	_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
	return w.state, nil
}

// runSteps runs steps in order. from, when set, resumes after the step at
// from[0] (a digest's continuation; deeper elements enter a branch's arm).
// final is set when the run ends here (throttled, digested, seen, cancelled).
func (w *flowRun) runSteps(ctx workflow.Context, steps []flows.Step, prefix string, from []int) (final herald.NotificationStatus, err error) {
	start := 0
	if len(from) > 0 {
		start = from[0] + 1
		if len(from) > 2 && from[0] < len(steps) && steps[from[0]].Type == flows.StepBranch {
			b := steps[from[0]]
			arm, armPath := branchArm(b, from[1])
			final, err := w.runSteps(ctx, arm, prefix+strconv.Itoa(from[0])+"."+armPath+".", from[2:])
			if err != nil || final != "" {
				return final, err
			}
		}
	}
	for i := start; i < len(steps); i++ {
		if w.cancelled {
			return herald.NotificationCancelled, nil
		}
		final, err := w.runStep(ctx, steps[i], prefix+strconv.Itoa(i))
		if err != nil || final != "" {
			return final, err
		}
	}
	return "", nil
}

// branchArm is a branch's case i, or its else when i is len(cases), with its
// path element.
func branchArm(b flows.Step, i int) ([]flows.Step, string) {
	if i >= 0 && i < len(b.Cases) {
		return b.Cases[i].Steps, "case" + strconv.Itoa(i)
	}
	return b.Else, "else"
}

func (w *flowRun) runStep(ctx workflow.Context, s flows.Step, path string) (herald.NotificationStatus, error) {
	st := w.beginStep(ctx, s, path)
	switch s.Type {
	case flows.StepSend:
		return "", w.send(ctx, s, st)
	case flows.StepDelay:
		return w.delay(ctx, s, st)
	case flows.StepDigest:
		return w.digest(ctx, s, st, path)
	case flows.StepWait:
		return w.wait(ctx, s, st)
	case flows.StepThrottle:
		return w.throttle(ctx, s, st)
	case flows.StepBranch:
		return w.branch(ctx, s, st, path)
	}
	// The API validates every definition; one from a newer binary must not be
	// silently skipped.
	w.endStep(ctx, st, herald.StepOutcome(herald.NotificationFailed), "")
	return herald.NotificationFailed, nil
}

// beginStep notes that a step started; the steps that take time (send,
// delay, wait) record it at once, the others only with their outcome (one
// statement instead of two).
func (w *flowRun) beginStep(ctx workflow.Context, s flows.Step, path string) int {
	w.state.Steps = append(w.state.Steps, FlowStepState{Path: path, StepID: s.ID, Type: s.Type, Outcome: herald.StepRunning,
		StartedAt: workflow.Now(ctx)})
	i := len(w.state.Steps) - 1
	switch s.Type {
	case flows.StepSend, flows.StepDelay, flows.StepWait:
		w.recordStep(ctx, i)
	}
	return i
}

// endStep records a step's outcome (and ref: a send's notification, a digest's key).
func (w *flowRun) endStep(ctx workflow.Context, i int, outcome herald.StepOutcome, ref string) {
	st := &w.state.Steps[i]
	st.Outcome, st.FinishedAt = outcome, workflow.Now(ctx)
	if ref != "" {
		st.NotificationID = ref
	}
	if st.StepID != "" {
		w.outcomes[st.StepID] = outcome
	}
	w.recordStep(ctx, i)
}

func (w *flowRun) recordStep(ctx workflow.Context, i int) {
	st := w.state.Steps[i]
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	if err := w.db(dctx, contract.FlowStep, contract.FlowStepInput{
		TenantID: w.in.TenantID, NotificationID: w.state.NotificationID, Path: st.Path, StepID: st.StepID, Type: st.Type,
		Outcome: st.Outcome, Ref: st.NotificationID, StartedAt: st.StartedAt, FinishedAt: st.FinishedAt,
	}).Get(dctx, nil); err != nil {
		workflow.GetLogger(ctx).Error("recording a flow step failed", "path", st.Path, "error", err)
	}
}

// send runs the existing notification workflow as a child, so preferences,
// quiet hours, caps, render, the Layer-2 guard, failover, retries and dead
// letters apply unchanged, when the step runs. Its notification id derives
// from this run's notification id and the step's path.
func (w *flowRun) send(ctx workflow.Context, s flows.Step, i int) error {
	path := w.state.Steps[i].Path
	var tmpl contract.FlowTemplateResult
	if err := w.db(ctx, contract.FlowTemplate, contract.FlowTemplateInput{TenantID: w.in.TenantID, TemplateID: s.TemplateID}).
		Get(ctx, &tmpl); err != nil {
		if contract.IsPermanent(err) {
			w.lastSend = herald.NotificationFailed
			w.endStep(ctx, i, herald.StepOutcome(herald.NotificationFailed), "")
			return nil
		}
		return err
	}
	channels := s.Channels
	if len(channels) == 0 {
		channels = tmpl.Channels
	}
	category := w.in.Flow.Category
	if category == "" {
		category = tmpl.Category
	}
	key := derivedKey("send", w.state.NotificationID, path)
	child := NotificationInput{TenantID: w.in.TenantID, UserID: w.in.UserID, TemplateID: s.TemplateID, Channels: channels,
		Data: w.in.Data, TemplateVersion: tmpl.Version, Category: category}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            ids.NotificationWorkflowID(w.in.TenantID, key),
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		// A cancel of the flow never reaches a send under way: the send's own
		// guard decides; the flow refuses a cancel while one runs.
		ParentClosePolicy:   enumspb.PARENT_CLOSE_POLICY_ABANDON,
		WaitForCancellation: true,
		Memo:                map[string]any{memoUser: w.in.UserID, memoTemplate: s.TemplateID, memoChannels: channels},
		TypedSearchAttributes: temporal.NewSearchAttributes(
			SearchAttrTenant.ValueSet(w.in.TenantID), SearchAttrUser.ValueSet(w.in.UserID),
			SearchAttrStatus.ValueSet(string(herald.NotificationQueued))),
	})
	w.sending = path
	defer func() { w.sending = "" }()
	fut := workflow.ExecuteChildWorkflow(cctx, NotificationWorkflow, child)
	var started workflow.Execution
	if err := fut.GetChildWorkflowExecution().Get(ctx, &started); err != nil {
		return err
	}
	notificationID := ids.NotificationID(key, started.RunID)
	w.state.Steps[i].NotificationID = notificationID
	w.recordStep(ctx, i)
	if s.ID != "" {
		w.sends[s.ID] = notificationID
	}
	var res NotificationResult
	if err := fut.Get(ctx, &res); err != nil {
		w.lastSend = herald.NotificationFailed
		w.endStep(ctx, i, herald.StepOutcome(herald.NotificationFailed), notificationID)
		return nil
	}
	w.lastSend = res.Status
	w.endStep(ctx, i, herald.StepOutcome(res.Status), notificationID)
	return nil
}

// delay sleeps for the step's duration, or until the next local time of day
// in the user's time zone.
func (w *flowRun) delay(ctx workflow.Context, s flows.Step, i int) (herald.NotificationStatus, error) {
	until := workflow.Now(ctx).Add(s.Duration.D())
	if s.Until != "" {
		r, err := w.loadRecipient(ctx)
		if err != nil {
			return "", err
		}
		until = NextLocalTime(workflow.Now(ctx), r.Timezone, s.Until)
	}
	w.setStatus(ctx, herald.NotificationScheduled)
	err := workflow.Sleep(w.stepsCtx, until.Sub(workflow.Now(ctx)))
	if w.cancelled || temporal.IsCanceledError(err) {
		w.endStep(ctx, i, herald.StepCancelled, "")
		return herald.NotificationCancelled, nil
	}
	if err != nil {
		return "", err
	}
	w.setStatus(ctx, herald.NotificationSending)
	w.endStep(ctx, i, herald.StepElapsed, "")
	return "", nil
}

// digest adds the event to its digest (its row in PostgreSQL, then a
// signal-with-start of the digest's workflow). The steps after the digest run
// once per digest, in the digest's continuation run; this run ends here.
func (w *flowRun) digest(ctx workflow.Context, s flows.Step, i int, path string) (herald.NotificationStatus, error) {
	w.joining = true
	defer func() { w.joining = false }()
	var res contract.DigestAddResult
	if err := w.db(ctx, contract.DigestAdd, contract.DigestAddInput{
		Digest: contract.DigestInput{TenantID: w.in.TenantID, UserID: w.in.UserID, FlowID: w.in.FlowID, FlowVersion: w.in.FlowVersion,
			Flow: w.in.Flow, Path: parsePath(path)},
		KeyExpr: s.Key, NotificationID: w.state.NotificationID, At: workflow.Now(ctx), Data: w.in.Data,
		TaskQueue: w.info.TaskQueueName,
	}).Get(ctx, &res); err != nil {
		return "", err
	}
	w.state.DigestKey = res.DigestKey
	w.endStep(ctx, i, herald.StepDigested, res.DigestKey)
	return herald.NotificationDigested, nil
}

// parsePath turns a step path ("1.case0.2") into its indexes ([1 0 2]; else
// is the branch's len(cases), which branchArm reads back).
func parsePath(path string) []int {
	var out []int
	for _, part := range strings.Split(path, ".") {
		switch {
		case strings.HasPrefix(part, "case"):
			n, _ := strconv.Atoi(strings.TrimPrefix(part, "case"))
			out = append(out, n)
		case part == "else":
			out = append(out, -1)
		default:
			n, _ := strconv.Atoi(part)
			out = append(out, n)
		}
	}
	return out
}

// wait waits until the inbox item of the earlier send step s.Step is seen (or
// read), woken by the inbox's mark path (SignalInbox), or until the timeout.
// Seen in time ends the run; on timeout the steps after it run.
func (w *flowRun) wait(ctx workflow.Context, s flows.Step, i int) (herald.NotificationStatus, error) {
	target := w.sends[s.Step]
	if target == "" {
		// The send step did not run (or had no in-app item): nothing can be seen.
		w.endStep(ctx, i, herald.StepTimedOut, "")
		return "", nil
	}
	var reg contract.FlowWaitResult
	in := contract.FlowWaitInput{TenantID: w.in.TenantID, UserID: w.in.UserID, NotificationID: target,
		WorkflowID: w.info.WorkflowExecution.ID, RunID: w.info.WorkflowExecution.RunID}
	if err := w.db(ctx, contract.FlowWait, in).Get(ctx, &reg); err != nil {
		return "", err
	}
	satisfied := func(seen, read bool) bool { return read || (seen && s.For != flows.WaitRead) }
	done, seen, read := satisfied(reg.Seen, reg.Read), reg.Seen, reg.Read
	if !done {
		deadline := workflow.Now(ctx).Add(s.Timeout.D())
		for !done && !w.cancelled {
			left := deadline.Sub(workflow.Now(ctx))
			if left <= 0 {
				break
			}
			sel := workflow.NewSelector(ctx)
			timer := workflow.NewTimer(w.stepsCtx, left)
			fired := false
			sel.AddFuture(timer, func(workflow.Future) { fired = true })
			sel.AddReceive(w.inbox, func(c workflow.ReceiveChannel, _ bool) {
				var sig contract.InboxSignal
				c.Receive(ctx, &sig)
				if sig.NotificationID == target {
					seen, read = seen || sig.Seen || sig.Read, read || sig.Read
					done = satisfied(seen, read)
				}
			})
			sel.Select(ctx)
			if fired {
				break
			}
		}
	}
	if !done && !w.cancelled {
		// The timeout: look once more, in case a wake-up signal was lost (the
		// API could not reach Temporal after the mark committed).
		if err := w.db(ctx, contract.FlowWait, in).Get(ctx, &reg); err != nil {
			return "", err
		}
		done, seen, read = satisfied(reg.Seen, reg.Read), reg.Seen, reg.Read
	}
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	if err := w.db(dctx, contract.FlowWaitDone, in).Get(dctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("removing the flow waiter failed", "error", err)
	}
	switch {
	case w.cancelled:
		w.endStep(ctx, i, herald.StepCancelled, target)
		return herald.NotificationCancelled, nil
	case done && read:
		w.endStep(ctx, i, herald.StepRead, target)
		return w.lastSend, nil
	case done:
		w.endStep(ctx, i, herald.StepSeen, target)
		return w.lastSend, nil
	}
	w.endStep(ctx, i, herald.StepTimedOut, target)
	return "", nil
}

// throttle claims one run of the step's bucket (durable, in PostgreSQL); a run
// that finds it full ends throttled.
func (w *flowRun) throttle(ctx workflow.Context, s flows.Step, i int) (herald.NotificationStatus, error) {
	var allowed bool
	if err := w.db(ctx, contract.FlowThrottle, contract.FlowThrottleInput{
		TenantID: w.in.TenantID, FlowID: w.in.FlowID, UserID: w.in.UserID, KeyExpr: s.Key, Data: w.in.Data,
		NotificationID: w.state.NotificationID, Path: w.state.Steps[i].Path, Limit: s.Limit, Window: s.Window.D(),
		At: workflow.Now(ctx),
	}).Get(ctx, &allowed); err != nil {
		return "", err
	}
	if !allowed {
		w.endStep(ctx, i, herald.StepThrottled, "")
		return herald.NotificationThrottled, nil
	}
	w.endStep(ctx, i, herald.StepAllowed, "")
	return "", nil
}

// branch runs the first case whose condition holds, else its else; then the
// flow goes on after the branch.
func (w *flowRun) branch(ctx workflow.Context, s flows.Step, i int, path string) (herald.NotificationStatus, error) {
	var user *contract.Recipient
	for _, c := range s.Cases {
		if strings.HasPrefix(c.If.Field, "user.") && user == nil {
			r, err := w.loadRecipient(ctx)
			if err != nil {
				return "", err
			}
			user = &r
		}
	}
	arm := len(s.Cases)
	for ci, c := range s.Cases {
		if EvalCondition(c.If, w.in.Data, user, w.outcomes) {
			arm = ci
			break
		}
	}
	steps, armPath := branchArm(s, arm)
	outcome := herald.StepElse
	if arm < len(s.Cases) {
		outcome = herald.BranchOutcome(arm)
	}
	w.endStep(ctx, i, outcome, "")
	return w.runSteps(ctx, steps, path+"."+armPath+".", nil)
}

func (w *flowRun) loadRecipient(ctx workflow.Context) (contract.Recipient, error) {
	if w.recipient != nil {
		return *w.recipient, nil
	}
	var r contract.Recipient
	if err := w.db(ctx, contract.LoadRecipient, contract.LoadRecipientInput{TenantID: w.in.TenantID, UserID: w.in.UserID}).
		Get(ctx, &r); err != nil && !contract.UnknownUser.Is(err) {
		return r, err
	}
	w.recipient = &r
	return r, nil
}

// validateCancel admits a cancel while the event can still be stopped: steps
// left to run and no send under way, or a digest not yet closed with it.
func (w *flowRun) validateCancel(ctx workflow.Context) error {
	switch {
	case w.cancelled:
		return nil
	case w.sending != "":
		return contract.AlreadySent.New("the flow's step "+w.sending+" is sending", nil)
	case w.finished && w.state.DigestKey == "":
		return contract.AlreadySent.New("the flow run has finished ("+string(w.state.Status)+")", nil)
	}
	return nil
}

// cancel stops the run: a delay or wait ends, no later step runs, and a
// digested event leaves its digest if the digest has not closed (otherwise the
// cancel is refused: the digest was sent with it).
func (w *flowRun) cancel(ctx workflow.Context) (NotificationState, error) {
	if w.cancelled {
		return w.cancelState(), nil
	}
	if err := workflow.Await(ctx, func() bool { return w.recorded && !w.joining }); err != nil {
		return w.cancelState(), err
	}
	if w.state.DigestKey != "" {
		var res contract.DigestRemoveResult
		if err := w.db(ctx, contract.DigestRemove, contract.DigestRemoveInput{TenantID: w.in.TenantID, NotificationID: w.state.NotificationID}).
			Get(ctx, &res); err != nil {
			return w.cancelState(), err
		}
		if !res.Removed {
			return w.cancelState(), contract.AlreadySent.New("the digest the event joined has closed ("+res.DigestID+")", nil)
		}
		w.cancelled = true
		if w.finished {
			return w.cancelState(), w.recordStatus(ctx, herald.NotificationCancelled)
		}
		return w.cancelState(), nil
	}
	if w.sending != "" || w.finished {
		return w.cancelState(), contract.AlreadySent.New("the flow run can no longer be cancelled", nil)
	}
	w.cancelled = true
	w.cancelSteps()
	return w.cancelState(), nil
}

func (w *flowRun) cancelState() NotificationState {
	return NotificationState{NotificationID: w.state.NotificationID, UserID: w.in.UserID, Status: w.state.Status,
		AcceptedAt: w.state.AcceptedAt, DedupUntil: w.state.DedupUntil}
}

func (w *flowRun) recordStatus(ctx workflow.Context, status herald.NotificationStatus) error {
	if err := w.db(ctx, contract.RecordStatus, contract.RecordStatusInput{
		TenantID: w.in.TenantID, NotificationID: w.state.NotificationID, Status: status,
	}).Get(ctx, &status); err != nil {
		return err
	}
	w.setStatus(ctx, status)
	return nil
}

func (w *flowRun) setStatus(ctx workflow.Context, status herald.NotificationStatus) {
	w.state.Status = status
	if err := workflow.UpsertTypedSearchAttributes(ctx, SearchAttrStatus.ValueSet(string(status))); err != nil {
		workflow.GetLogger(ctx).Warn("upserting status search attribute failed", "error", err)
	}
}

func (w *flowRun) db(ctx workflow.Context, activity string, args ...any) workflow.Future {
	return workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, localDatabaseOptions), activity, args...)
}

// NextLocalTime is the first instant after now at which the clock in the time
// zone tz (an IANA name; UTC when empty or unknown) reads hhmm ("09:00"). A
// day's wall time that a DST change skips resolves as time.Date does (the
// instant an hour later); computed from the workflow's clock and the time zone
// database alone, so a replay computes the same instant.
func NextLocalTime(now time.Time, tz, hhmm string) time.Time {
	loc := location(tz)
	h, m := parseHHMM(hhmm)
	local := now.In(loc)
	t := time.Date(local.Year(), local.Month(), local.Day(), h, m, 0, 0, loc)
	for d := 1; !t.After(now); d++ {
		t = time.Date(local.Year(), local.Month(), local.Day()+d, h, m, 0, 0, loc)
	}
	return t
}

// NextWeeklyTime is the first instant after now at which it is weekday at hhmm in tz.
func NextWeeklyTime(now time.Time, tz string, weekday time.Weekday, hhmm string) time.Time {
	loc := location(tz)
	h, m := parseHHMM(hhmm)
	local := now.In(loc)
	for d := 0; ; d++ {
		t := time.Date(local.Year(), local.Month(), local.Day()+d, h, m, 0, 0, loc)
		if t.Weekday() == weekday && t.After(now) {
			return t
		}
	}
}

func location(tz string) *time.Location {
	if tz == "" {
		return time.UTC
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return time.UTC
	}
	return loc
}

func parseHHMM(s string) (int, int) {
	hh, mm, _ := strings.Cut(s, ":")
	h, err1 := strconv.Atoi(hh)
	m, err2 := strconv.Atoi(mm)
	if err := errors.Join(err1, err2); err != nil || h < 0 || h > 23 || m < 0 || m > 59 {
		return 0, 0
	}
	return h, m
}
