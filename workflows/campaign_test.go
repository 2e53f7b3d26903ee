package workflows

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/herald-notify/herald/activities"
	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/herald"
)

// fakeAudience is an audience of n users c000 … paged as the store would.
type fakeAudience struct {
	users []string
	mu    sync.Mutex
	// batches: the (after, through] ranges handled, in completion order.
	batches  [][2]string
	inFlight atomic.Int32
	maxSeen  atomic.Int32
	statuses []string
}

func newFakeAudience(n int) *fakeAudience {
	a := &fakeAudience{}
	for i := range n {
		a.users = append(a.users, fmt.Sprintf("c%03d", i))
	}
	return a
}

func (a *fakeAudience) pages(_ context.Context, in contract.CampaignPagesInput) ([]string, error) {
	var ids []string
	for _, u := range a.users {
		if u > in.After && len(ids) < in.PageSize*in.Pages {
			ids = append(ids, u)
		}
	}
	var out []string
	for i := in.PageSize - 1; i < len(ids); i += in.PageSize {
		out = append(out, ids[i])
	}
	if n := len(ids); n > 0 && n%in.PageSize != 0 {
		out = append(out, ids[n-1])
	}
	return out, nil
}

func (a *fakeAudience) batch(_ context.Context, in contract.CampaignBatchInput) (contract.CampaignBatchResult, error) {
	n := a.inFlight.Add(1)
	defer a.inFlight.Add(-1)
	for {
		m := a.maxSeen.Load()
		if n <= m || a.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(2 * time.Millisecond) // let the window fill
	count := 0
	for _, u := range a.users {
		if u > in.After && u <= in.Through {
			count++
		}
	}
	a.mu.Lock()
	a.batches = append(a.batches, [2]string{in.After, in.Through})
	a.mu.Unlock()
	return contract.CampaignBatchResult{Recipients: count, Delivered: count}, nil
}

func (a *fakeAudience) setStatus(_ context.Context, in contract.CampaignSetStatusInput) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.statuses = append(a.statuses, in.Status)
	return nil
}

func campaignEnv(t *testing.T, a *fakeAudience) *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterActivity(&activities.Activities{})
	env.RegisterWorkflow(CampaignWorkflow)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "campaign/t1/c1"})
	env.OnActivity(contract.CampaignStart, mock.Anything, mock.Anything).Return(contract.CampaignStartResult{AudienceSize: int64(len(a.users))}, nil)
	env.OnActivity(contract.CampaignPages, mock.Anything, mock.Anything).Return(a.pages)
	env.OnActivity(contract.CampaignBatch, mock.Anything, mock.Anything).Return(a.batch)
	env.OnActivity(contract.CampaignSetStatus, mock.Anything, mock.Anything).Return(a.setStatus)
	return env
}

func campaignIn() CampaignInput {
	return CampaignInput{Spec: contract.CampaignSpec{TenantID: "t1", CampaignID: "c1", Channels: []herald.Channel{herald.ChannelInApp}},
		PageSize: 10, Window: 3}
}

// TestCampaignSlidingWindow: every page is handled exactly once, never more
// than Window at a time, and the campaign completes with every recipient counted.
func TestCampaignSlidingWindow(t *testing.T) {
	a := newFakeAudience(95)
	env := campaignEnv(t, a)
	env.OnActivity(contract.CampaignNextDue, mock.Anything, mock.Anything).Return(contract.CampaignNextDueResult{}, nil)
	env.ExecuteWorkflow(CampaignWorkflow, campaignIn())
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var st CampaignState
	require.NoError(t, env.GetWorkflowResult(&st))
	require.Equal(t, herald.CampaignCompleted, st.Status)
	require.Equal(t, 95, st.Totals.Recipients)
	require.Equal(t, 10, st.Batches)
	require.Len(t, a.batches, 10)
	seen := map[string]bool{}
	for _, b := range a.batches {
		require.False(t, seen[b[1]], "page %v handled twice", b)
		seen[b[1]] = true
	}
	require.LessOrEqual(t, a.maxSeen.Load(), int32(3))
	require.Equal(t, []string{herald.CampaignRunning, herald.CampaignCompleted}, a.statuses)
}

// TestCampaignContinuesAsNew: after CampaignBatchesPerRun batches the run
// continues as new with the cursor at the end of the last page it completed.
func TestCampaignContinuesAsNew(t *testing.T) {
	a := newFakeAudience(1)
	for i := range CampaignBatchesPerRun*2 + 5 {
		a.users = append(a.users, fmt.Sprintf("d%04d", i))
	}
	a.users = a.users[1:]
	env := campaignEnv(t, a)
	in := campaignIn()
	in.PageSize = 1
	env.ExecuteWorkflow(CampaignWorkflow, in)
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "want continue-as-new, got %v", env.GetWorkflowError())
	var next CampaignInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.NotNil(t, next.State)
	require.Equal(t, fmt.Sprintf("d%04d", CampaignBatchesPerRun-1), next.State.Cursor)
	require.Equal(t, CampaignBatchesPerRun, next.State.Batches)
	require.False(t, next.State.AudienceDone)
}

// TestCampaignPauseResume: a pause update stops new batches (the answer is
// paused), a resume lets the campaign finish.
func TestCampaignPauseResume(t *testing.T) {
	a := newFakeAudience(200)
	env := campaignEnv(t, a)
	env.OnActivity(contract.CampaignNextDue, mock.Anything, mock.Anything).Return(contract.CampaignNextDueResult{}, nil)
	in := campaignIn()
	in.RatePerSecond = 10 // one 10-recipient batch a second
	var pausedAt int
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(UpdatePause, "p1", &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { t.Errorf("pause rejected: %v", err) },
			OnComplete: func(v any, err error) {
				require.NoError(t, err)
				require.Equal(t, herald.CampaignPaused, v.(CampaignState).Status)
			},
		})
	}, 5*time.Second)
	env.RegisterDelayedCallback(func() {
		a.mu.Lock()
		pausedAt = len(a.batches)
		a.mu.Unlock()
	}, 10*time.Minute)
	env.RegisterDelayedCallback(func() {
		a.mu.Lock()
		require.Equal(t, pausedAt, len(a.batches), "batches ran while paused")
		a.mu.Unlock()
		env.UpdateWorkflow(UpdateResume, "r1", &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { t.Errorf("resume rejected: %v", err) },
			OnComplete: func(v any, err error) {
				require.NoError(t, err)
				require.Equal(t, herald.CampaignRunning, v.(CampaignState).Status)
			},
		})
	}, 2*time.Hour)
	env.ExecuteWorkflow(CampaignWorkflow, in)
	require.NoError(t, env.GetWorkflowError())
	var st CampaignState
	require.NoError(t, env.GetWorkflowResult(&st))
	require.Equal(t, herald.CampaignCompleted, st.Status)
	require.Equal(t, 200, st.Totals.Recipients)
	require.Less(t, pausedAt, 20)
	require.Contains(t, a.statuses, herald.CampaignPaused)
}

// TestCampaignDrainsDeferredWork: owed work (a quiet-hours deferral) is handled
// when it falls due, then the campaign completes.
func TestCampaignDrainsDeferredWork(t *testing.T) {
	a := newFakeAudience(5)
	env := campaignEnv(t, a)
	var due time.Time
	drained := false
	env.OnActivity(contract.CampaignNextDue, mock.Anything, mock.Anything).Return(func(context.Context, contract.CampaignSpec) (contract.CampaignNextDueResult, error) {
		if drained {
			return contract.CampaignNextDueResult{}, nil
		}
		if due.IsZero() {
			due = env.Now().Add(3 * time.Hour)
		}
		return contract.CampaignNextDueResult{Any: true, Due: due}, nil
	})
	env.OnActivity(contract.CampaignPendingBatch, mock.Anything, mock.Anything).Return(func(context.Context, contract.CampaignPendingInput) (contract.CampaignPendingResult, error) {
		require.False(t, env.Now().Before(due), "owed work ran before it was due")
		drained = true
		return contract.CampaignPendingResult{CampaignBatchResult: contract.CampaignBatchResult{Delivered: 1}}, nil
	})
	env.ExecuteWorkflow(CampaignWorkflow, campaignIn())
	require.NoError(t, env.GetWorkflowError())
	var st CampaignState
	require.NoError(t, env.GetWorkflowResult(&st))
	require.Equal(t, herald.CampaignCompleted, st.Status)
	require.True(t, drained)
	require.Equal(t, 6, st.Totals.Delivered)
}

// TestCampaignCancelWhilePaused: cancel ends a paused campaign at once.
func TestCampaignCancelWhilePaused(t *testing.T) {
	a := newFakeAudience(100)
	env := campaignEnv(t, a)
	in := campaignIn()
	in.RatePerSecond = 10
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(UpdatePause, "p1", &testsuite.TestUpdateCallback{OnAccept: func() {}, OnReject: func(error) {}, OnComplete: func(any, error) {}})
	}, 3*time.Second)
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(UpdateCancelCampaign, "c1", &testsuite.TestUpdateCallback{OnAccept: func() {}, OnReject: func(err error) { t.Errorf("cancel rejected: %v", err) },
			OnComplete: func(v any, err error) { require.Equal(t, herald.CampaignCancelled, v.(CampaignState).Status) }})
	}, time.Hour)
	env.ExecuteWorkflow(CampaignWorkflow, in)
	require.NoError(t, env.GetWorkflowError())
	var st CampaignState
	require.NoError(t, env.GetWorkflowResult(&st))
	require.Equal(t, herald.CampaignCancelled, st.Status)
	require.Less(t, st.Totals.Recipients, 100)
}

// TestCampaignControlsBeforeTheFirstStep: a pause and a resume that reach a
// scheduled campaign before its workflow has taken a step (they arrive with
// the start) leave it scheduled: it still waits for send_at, and a cancel
// before then ends it without a recipient started.
func TestCampaignControlsBeforeTheFirstStep(t *testing.T) {
	a := newFakeAudience(20)
	env := campaignEnv(t, a)
	in := campaignIn()
	in.SendAt = env.Now().Add(time.Hour)
	answered := map[string]string{}
	control := func(name string) func() {
		return func() {
			env.UpdateWorkflow(name, name, &testsuite.TestUpdateCallback{OnAccept: func() {},
				OnReject:   func(err error) { t.Errorf("%s rejected: %v", name, err) },
				OnComplete: func(v any, err error) { require.NoError(t, err); answered[name] = v.(CampaignState).Status }})
		}
	}
	env.RegisterDelayedCallback(control(UpdatePause), 0)
	env.RegisterDelayedCallback(control(UpdateResume), 0)
	env.RegisterDelayedCallback(control(UpdateCancelCampaign), 10*time.Minute)
	env.ExecuteWorkflow(CampaignWorkflow, in)
	require.NoError(t, env.GetWorkflowError())
	var st CampaignState
	require.NoError(t, env.GetWorkflowResult(&st))
	require.Equal(t, herald.CampaignCancelled, st.Status)
	require.Equal(t, map[string]string{UpdatePause: herald.CampaignScheduled, UpdateResume: herald.CampaignScheduled,
		UpdateCancelCampaign: herald.CampaignCancelled}, answered)
	env.AssertNotCalled(t, contract.CampaignStart, mock.Anything, mock.Anything)
	require.Empty(t, a.batches, "a recipient was sent before send_at")
}
