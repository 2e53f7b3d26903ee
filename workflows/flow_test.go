package workflows

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/herald-notify/herald/activities"
	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/flows"
	"github.com/herald-notify/herald/internal/herald"
)

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	return v
}

// TestNextLocalTimeAcrossDST: "next 09:00" in America/New_York is 14:00 UTC
// in winter and 13:00 UTC in summer, on both sides of each change.
func TestNextLocalTimeAcrossDST(t *testing.T) {
	for _, tc := range []struct{ now, want string }{
		{"2026-03-07T15:00:00Z", "2026-03-08T13:00:00Z"}, // Saturday afternoon EST → Sunday 09:00 EDT (DST began 02:00)
		{"2026-03-08T06:30:00Z", "2026-03-08T13:00:00Z"}, // 01:30 EST, before the jump
		{"2026-03-08T13:00:00Z", "2026-03-09T13:00:00Z"}, // exactly 09:00: the next day's
		{"2026-10-31T20:00:00Z", "2026-11-01T14:00:00Z"}, // DST ends 02:00 on Nov 1: 09:00 EST
	} {
		got := NextLocalTime(mustTime(t, tc.now), "America/New_York", "09:00")
		require.Equal(t, mustTime(t, tc.want), got.UTC(), "from %s", tc.now)
	}
	require.Equal(t, mustTime(t, "2026-03-08T09:00:00Z"), NextLocalTime(mustTime(t, "2026-03-07T15:00:00Z"), "", "09:00").UTC())
	require.Equal(t, mustTime(t, "2026-03-09T13:00:00Z"),
		NextWeeklyTime(mustTime(t, "2026-03-07T15:00:00Z"), "America/New_York", time.Monday, "09:00").UTC())
}

func flowEnv(t *testing.T, start time.Time) *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterActivity(&activities.Activities{})
	env.RegisterWorkflow(FlowWorkflow)
	env.SetStartTime(start)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "notification/t1/0123456789abcdef0123456789abcdef"})
	env.OnActivity(contract.FlowRecord, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(contract.FlowStep, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(contract.RecordStatus, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.RecordStatusInput) (herald.NotificationStatus, error) {
			return in.Status, nil
		})
	env.OnActivity(contract.FlowTemplate, mock.Anything, mock.Anything).Return(contract.FlowTemplateResult{Version: 1, Channels: []herald.Channel{herald.ChannelInApp}}, nil)
	env.OnActivity(contract.LoadRecipient, mock.Anything, mock.Anything).Return(contract.Recipient{UserID: "ada", Timezone: "America/New_York"}, nil)
	return env
}

// stubSends replaces the notification workflow (the send step's child) with
// one that notes when it ran and reports delivered.
func stubSends(env *testsuite.TestWorkflowEnvironment, at *[]time.Time) {
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in NotificationInput) (NotificationResult, error) {
		*at = append(*at, workflow.Now(ctx))
		return NotificationResult{Status: herald.NotificationDelivered}, nil
	}, workflow.RegisterOptions{Name: "NotificationWorkflow"})
}

func def(t *testing.T, raw string) flows.Definition {
	var d flows.Definition
	require.NoError(t, json.Unmarshal([]byte(raw), &d))
	return d
}

// TestFlowDelayUntilNineAcrossDST: a delay until 09:00 started on the Saturday
// before DST begins sends at 09:00 EDT on Sunday (13:00 UTC), not EST.
func TestFlowDelayUntilNineAcrossDST(t *testing.T) {
	env := flowEnv(t, mustTime(t, "2026-03-07T15:00:00Z"))
	var sent []time.Time
	stubSends(env, &sent)
	env.ExecuteWorkflow(FlowWorkflow, FlowInput{TenantID: "t1", UserID: "ada", FlowID: "f", FlowVersion: 1,
		Flow: def(t, `{"category":"c","steps":[{"type":"delay","until":"09:00"},{"type":"send","template_id":"x"}]}`)})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, sent, 1)
	require.Equal(t, mustTime(t, "2026-03-08T13:00:00Z"), sent[0].UTC())
	var st FlowState
	require.NoError(t, env.GetWorkflowResult(&st))
	require.Equal(t, herald.NotificationDelivered, st.Status)
	require.Equal(t, herald.StepElapsed, st.Steps[0].Outcome)
}

// TestFlowBranchOnDataAndOutcome: a branch takes the first case that holds,
// on event data and on an earlier step's outcome, then goes on after it.
func TestFlowBranchOnDataAndOutcome(t *testing.T) {
	env := flowEnv(t, mustTime(t, "2026-03-07T15:00:00Z"))
	var sent []time.Time
	stubSends(env, &sent)
	env.ExecuteWorkflow(FlowWorkflow, FlowInput{TenantID: "t1", UserID: "ada", FlowID: "f", FlowVersion: 1,
		Data: map[string]any{"amount": json.Number("150")},
		Flow: def(t, `{"category":"c","steps":[{"type":"send","id":"first","template_id":"x"},
			{"type":"branch","cases":[{"if":{"field":"data.amount","op":"lt","value":100},"steps":[{"type":"delay","duration":"1h"}]},
				{"if":{"field":"steps.first.outcome","op":"eq","value":"delivered"},"steps":[{"type":"send","template_id":"y"}]}],
			 "else":[{"type":"delay","duration":"2h"}]},
			{"type":"send","template_id":"z"}]}`)})
	require.NoError(t, env.GetWorkflowError())
	var st FlowState
	require.NoError(t, env.GetWorkflowResult(&st))
	require.Len(t, sent, 3)
	require.Equal(t, herald.BranchOutcome(1), st.Steps[1].Outcome)
	require.Equal(t, "1.case1.0", st.Steps[2].Path)
	require.Equal(t, "2", st.Steps[3].Path)
}

// TestDigestScheduledDailyInUserZone: a scheduled daily digest at 09:00 in the
// user's zone (Asia/Tokyo, no DST) closes at 00:00 UTC, claims its events and
// starts one continuation.
func TestDigestScheduledDailyInUserZone(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterActivity(&activities.Activities{})
	env.RegisterWorkflow(DigestWorkflow)
	env.SetStartTime(mustTime(t, "2026-03-07T15:00:00Z"))
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "digest/t1/f/abc"})
	env.OnActivity(contract.LoadRecipient, mock.Anything, mock.Anything).Return(contract.Recipient{UserID: "ada", Timezone: "Asia/Tokyo"}, nil)
	var opened []contract.DigestOpenInput
	env.OnActivity(contract.DigestOpen, mock.Anything, mock.Anything).Return(func(_ context.Context, in contract.DigestOpenInput) error {
		opened = append(opened, in)
		return nil
	})
	var closes []contract.DigestCloseInput
	env.OnActivity(contract.DigestClose, mock.Anything, mock.Anything).Return(func(_ context.Context, in contract.DigestCloseInput) (contract.DigestCloseResult, error) {
		closes = append(closes, in)
		return contract.DigestCloseResult{Count: 3, FirstAt: in.ClosedAt, LastAt: in.ClosedAt}, nil
	})
	var continued []FlowInput
	var at []time.Time
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in FlowInput) (FlowResult, error) {
		continued = append(continued, in)
		at = append(at, workflow.Now(ctx))
		return FlowResult{}, nil
	}, workflow.RegisterOptions{Name: "FlowWorkflow"})
	for i := int64(1); i <= 3; i++ {
		env.RegisterDelayedCallback(func() {
			env.SignalWorkflow(SignalDigestEvent, contract.DigestEvent{Seq: i, At: mustTime(t, "2026-03-07T15:00:00Z")})
		}, time.Duration(i-1)*time.Minute)
	}
	env.ExecuteWorkflow(DigestWorkflow, DigestInput{TenantID: "t1", UserID: "ada", FlowID: "f", FlowVersion: 1, Path: []int{0},
		Flow: def(t, `{"category":"c","steps":[{"type":"digest","mode":"scheduled","schedule":{"every":"day","at":"09:00"}},{"type":"send","template_id":"x"}]}`)})
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, opened, 1)
	require.Equal(t, mustTime(t, "2026-03-08T00:00:00Z"), opened[0].ClosesAt.UTC())
	require.Len(t, closes, 1)
	require.Equal(t, int64(3), closes[0].MaxSeq)
	require.Equal(t, mustTime(t, "2026-03-08T00:00:00Z"), closes[0].ClosedAt.UTC())
	require.Len(t, continued, 1)
	require.Equal(t, []int{0}, continued[0].Digest.From)
	require.Equal(t, closes[0].DigestID, continued[0].Digest.DigestID)
	digest := continued[0].Data["digest"].(map[string]any)
	require.EqualValues(t, json.Number("3"), digest["count"])
}

// fakeDigestRows is the digest_events table as DigestClose sees it: rows by
// seq, each claimed at most once.
type fakeDigestRows struct {
	rows    []int64
	claimed map[int64]string
	closes  []contract.DigestCloseInput
}

func (f *fakeDigestRows) close(_ context.Context, in contract.DigestCloseInput) (contract.DigestCloseResult, error) {
	f.closes = append(f.closes, in)
	var res contract.DigestCloseResult
	for _, seq := range f.rows {
		if f.claimed[seq] != "" || seq > in.MaxSeq || (in.OnlySeq != 0 && seq != in.OnlySeq) || (in.Limit > 0 && res.Count >= in.Limit) {
			continue
		}
		f.claimed[seq] = in.DigestID
		res.Count++
	}
	for _, seq := range f.rows {
		if f.claimed[seq] == "" && seq <= in.MaxSeq {
			res.Remaining++
		}
	}
	return res, nil
}

// digestTestEnv runs a digest step (raw) fed with events at the given offsets
// from the start; it returns the fake table and when each continuation
// started (from the start).
func digestTestEnv(t *testing.T, raw string, offsets ...time.Duration) (*fakeDigestRows, []time.Duration) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterActivity(&activities.Activities{})
	env.RegisterWorkflow(DigestWorkflow)
	start := mustTime(t, "2026-03-07T15:00:00Z")
	env.SetStartTime(start)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "digest/t1/f/abc"})
	env.OnActivity(contract.DigestOpen, mock.Anything, mock.Anything).Return(nil)
	f := &fakeDigestRows{claimed: map[int64]string{}}
	env.OnActivity(contract.DigestClose, mock.Anything, mock.Anything).Return(f.close)
	var sends []time.Duration
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in FlowInput) (FlowResult, error) {
		sends = append(sends, workflow.Now(ctx).Sub(start).Round(time.Second))
		return FlowResult{}, nil
	}, workflow.RegisterOptions{Name: "FlowWorkflow"})
	for i, off := range offsets {
		seq := int64(i + 1)
		f.rows = append(f.rows, seq)
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalDigestEvent, contract.DigestEvent{Seq: seq}) }, off)
	}
	env.ExecuteWorkflow(DigestWorkflow, DigestInput{TenantID: "t1", UserID: "ada", FlowID: "f", FlowVersion: 1, Path: []int{0},
		Flow: def(t, `{"category":"c","steps":[`+raw+`,{"type":"send","template_id":"x"}]}`)})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	for _, seq := range f.rows {
		require.NotEmpty(t, f.claimed[seq], "event %d in no digest", seq)
	}
	return f, sends
}

// TestDigestSlidingWindowCappedByMaxWait: a sliding window moves with each
// event (window 10 s) but closes max_wait (30 s) after it opened.
func TestDigestSlidingWindowCappedByMaxWait(t *testing.T) {
	f, sends := digestTestEnv(t, `{"type":"digest","mode":"sliding","window":"10s","max_wait":"30s"}`,
		0, 5*time.Second, 12*time.Second, 20*time.Second, 26*time.Second)
	require.Len(t, f.closes, 1)
	require.Equal(t, int64(5), f.closes[0].MaxSeq)
	require.Len(t, sends, 1)
	require.Equal(t, 30*time.Second, sends[0])
}

// TestDigestMaxItemsClosesEarly: max_items 3 closes the window at the third
// event with three; the two that arrived with it (still in the signal
// channel) open the next window, which closes on time. (Events after a run
// completed start the next run by signal-with-start, which the test
// environment does not do.)
func TestDigestMaxItemsClosesEarly(t *testing.T) {
	f, sends := digestTestEnv(t, `{"type":"digest","window":"1h","max_items":3}`,
		0, time.Minute, 2*time.Minute, 2*time.Minute, 2*time.Minute)
	require.Len(t, sends, 2)
	require.Equal(t, []time.Duration{2 * time.Minute, 2*time.Minute + time.Hour}, sends)
	require.Equal(t, 3, f.closes[0].Limit)
	counts := map[string]int{}
	for _, id := range f.claimed {
		counts[id]++
	}
	require.Len(t, counts, 2)
	require.Equal(t, 3, counts[f.closes[0].DigestID])
}

// TestDigestFirstSendNow: the first event goes out at once as a digest of
// one; the rest are digested when the window closes.
func TestDigestFirstSendNow(t *testing.T) {
	f, sends := digestTestEnv(t, `{"type":"digest","window":"10m","first":"send_now"}`, 0, time.Minute, 2*time.Minute)
	require.Equal(t, []time.Duration{0, 10 * time.Minute}, sends)
	require.Equal(t, int64(1), f.closes[0].OnlySeq)
	require.True(t, f.closes[0].KeepOpen)
	require.NotEqual(t, f.claimed[1], f.claimed[2])
	require.Equal(t, f.claimed[2], f.claimed[3])
}
