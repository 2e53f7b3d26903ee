package api

import (
	"context"
	"strings"
	"time"

	"github.com/herald-notify/herald/internal/flows"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/workflows"
)

// engineFlows is the flow engine as the API reaches it: workflows.Client for
// runs and digests in Temporal, the store for what they recorded.
type engineFlows struct {
	workflows *workflows.Client
	store     *store.Store
}

func (e engineFlows) StartFlow(ctx context.Context, workflowID string, lane herald.Lane, ev flowEvent) (workflows.StartedRun, error) {
	return e.workflows.StartFlow(ctx, workflowID, lane, workflows.FlowInput{
		TenantID: ev.TenantID, UserID: ev.UserID, FlowID: ev.FlowID, FlowVersion: ev.FlowVersion, Flow: ev.Flow,
		Data: ev.Data, DedupWindow: ev.DedupWindow, BodyHash: ev.BodyHash,
	})
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
