package api

import (
	"context"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/herald-notify/herald/internal/flows"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/workflows"
)

// engineFlows is the flow engine as the API reaches it: workflows.Client for
// runs and digests in Temporal, the store for what they recorded.
type engineFlows struct {
	workflows *workflows.Client
	store     *store.Store
	// signals coalesces concurrent digest events' signals (digest_signals.go).
	signals *digestSignals
}

func (e engineFlows) StartFlow(ctx context.Context, workflowID string, lane herald.Lane, ev flowEvent) (workflows.StartedRun, error) {
	return e.workflows.StartFlow(ctx, workflowID, lane, workflows.FlowInput{
		TenantID: ev.TenantID, UserID: ev.UserID, FlowID: ev.FlowID, FlowVersion: ev.FlowVersion, Flow: ev.Flow,
		Data: ev.Data, DedupWindow: ev.DedupWindow, BodyHash: ev.BodyHash,
	})
}

// AcceptDigestEvent writes the event's rows in one transaction
// (store.AcceptDigestEvent), then signals its digest with the row's seq
// (coalesced with the key's concurrent events: digestSignals). Its notification id has the form of every
// notification's: ids.NotificationID(key, a new UUID in the run id's place).
func (e engineFlows) AcceptDigestEvent(ctx context.Context, key ids.KeyHash, lane herald.Lane, ev flowEvent) (digestAccept, error) {
	step := ev.Flow.Steps[0]
	digestKey, err := flows.RenderKey(step.Key, ev.Data)
	if err != nil {
		return digestAccept{}, err // checkFlowKeys refused it already
	}
	runID, err := uuid.NewRandom()
	if err != nil {
		return digestAccept{}, err
	}
	in := workflows.DigestInput{TenantID: ev.TenantID, UserID: ev.UserID, FlowID: ev.FlowID, FlowVersion: ev.FlowVersion,
		Flow: ev.Flow, Path: []int{0}, Key: digestKey}
	now := time.Now().UTC().Truncate(time.Microsecond)
	id := ids.NotificationID(key, runID.String())
	acc, err := e.store.AcceptDigestEvent(ctx, store.AcceptDigestEventParams{
		TenantID: ev.TenantID, UserID: ev.UserID, FlowID: ev.FlowID, FlowVersion: ev.FlowVersion, Category: ev.Flow.Category,
		KeyHash: key.String(), NotificationID: id, WorkflowID: ids.NotificationWorkflowID(ev.TenantID, key), RunID: runID.String(),
		DigestKey: workflows.DigestWorkflowID(ev.TenantID, ev.FlowID, ev.UserID, digestKey), Key: digestKey, StepPath: "0",
		Data: ev.Data, AcceptedAt: now, BodyHash: ev.BodyHash, DedupUntil: now.Add(ev.DedupWindow),
	})
	if err != nil {
		return digestAccept{}, err
	}
	out := digestAccept{NotificationID: acc.NotificationID, Duplicate: acc.Duplicate}
	if acc.Duplicate {
		return out, nil
	}
	out.SignalErr = e.signals.signal(ctx, lane, in, acc.Seq, now)
	return out, nil
}

func (e engineFlows) FlushDigest(ctx context.Context, tenantID, flowID, userID, key string) error {
	return e.workflows.FlushDigest(ctx, tenantID, flowID, userID, key)
}

func (e engineFlows) FlowRun(ctx context.Context, tenantID, notificationID string) (flowRunView, error) {
	r, err := e.store.FlowRunOf(ctx, tenantID, notificationID)
	if err != nil {
		return flowRunView{}, err
	}
	v := flowRunView{FlowID: r.FlowID, FlowVersion: r.FlowVersion, DigestID: r.DigestID, Steps: make([]flowStepView, 0, len(r.Steps))}
	for _, st := range r.Steps {
		v.Steps = append(v.Steps, flowStepView{Path: stepPath(st.Path), StepID: st.StepID, Type: flows.StepType(st.Type),
			Outcome: string(st.Outcome), NotificationID: st.NotificationID, StartedAt: st.StartedAt.UTC(), FinishedAt: utcPtr(st.FinishedAt)})
	}
	if d := r.Digest; d != nil {
		v.Digest = &digestJoinedView{DigestID: d.DigestID, Status: d.Status, Sent: d.Status == herald.DigestSent, NotificationID: d.NotificationID}
	}
	return v, nil
}

func (e engineFlows) OpenDigests(ctx context.Context, tenantID, userID string, after *store.OpenDigestsAfter, limit int) ([]openDigestView, bool, error) {
	open, more, err := e.store.OpenDigests(ctx, tenantID, userID, after, limit)
	if err != nil {
		return nil, false, err
	}
	out := make([]openDigestView, 0, len(open))
	for _, d := range open {
		out = append(out, openDigestView{FlowID: d.FlowID, Key: d.Key, Count: d.Count, CountCapped: d.CountCapped,
			OpenedAt: d.OpenedAt.UTC(), ClosesAt: d.ClosesAt.UTC()})
	}
	return out, more, nil
}

// stepPath writes the engine's step path ("1.case0.2", "1.else.0") as the API
// names fields ("steps[1].cases[0].steps[2]", "steps[1].else[0]"), the form
// validation errors use.
func stepPath(enginePath string) string {
	parts := strings.Split(enginePath, ".")
	var b strings.Builder
	b.WriteString("steps[" + parts[0] + "]")
	for i := 1; i+1 < len(parts); i += 2 {
		arm, idx := parts[i], parts[i+1]
		if n, ok := strings.CutPrefix(arm, "case"); ok {
			b.WriteString(".cases[" + n + "].steps[" + idx + "]")
		} else {
			b.WriteString("." + arm + "[" + idx + "]")
		}
	}
	return b.String()
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
