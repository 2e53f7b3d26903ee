package workflows

import (
	"context"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/herald"
)

// orderedInput is an email notification with an ordering key and a hold bound.
func orderedInput(hold time.Duration) NotificationInput {
	in := input(time.Minute, herald.ChannelEmail)
	in.OrderingKey, in.OrderMaxHold = "user", hold
	return in
}

// onOrdered mocks an ordered email notification behind "n_prev" up to the
// provider send (whose time it records) and the release, which names wf-next to
// signal; it returns where the send time and the wait are kept.
func (s *notificationSuite) onOrdered() (*time.Time, *contract.FinishOrderWaitInput) {
	s.env.OnActivity(contract.RecordAccepted, mock.Anything, mock.MatchedBy(func(in contract.RecordAcceptedInput) bool {
		return in.OrderingKey == "user" && len(in.Ordered) == 1 && in.Ordered[0] == herald.ChannelEmail
	})).Return(contract.RecordAcceptedResult{Places: []contract.ClaimOrderResult{{Channel: herald.ChannelEmail, Seq: 2, Behind: "n_prev"}}}, nil).Once()
	s.env.OnActivity(contract.LoadRecipient, mock.Anything, mock.Anything).Return(contract.Recipient{UserID: "u1", Email: "ada@example.com"}, nil)
	s.onGate(contract.PreferencesResult{})
	var wait contract.FinishOrderWaitInput
	s.env.OnActivity(contract.FinishOrderWait, mock.Anything, mock.Anything).Return(func(_ context.Context, in contract.FinishOrderWaitInput) error {
		wait = in
		return nil
	}).Once()
	var sentAt time.Time
	s.env.OnActivity(contract.DeliverEmail, mock.Anything, mock.Anything).Return(func(context.Context, contract.DeliverEmailInput) (contract.DeliverResult, error) {
		sentAt = s.env.Now()
		return contract.DeliverResult{Status: herald.DeliverySent}, nil
	}).Once()
	s.env.OnActivity(contract.ReleaseOrder, mock.Anything, mock.MatchedBy(func(in contract.ReleaseOrderInput) bool {
		return in.Channel == herald.ChannelEmail
	})).Return(contract.ReleaseOrderResult{WorkflowID: "wf-next", RunID: "run-next", NotificationID: "n_next", Channel: herald.ChannelEmail}, nil).Once()
	s.env.OnSignalExternalWorkflow(mock.Anything, "wf-next", "run-next", SignalOrderingReleased, contract.OrderReleased{Channel: herald.ChannelEmail}).Return(nil).Once()
	s.env.OnActivity(contract.RecordStatus, mock.Anything, mock.Anything).Return(herald.NotificationSent, nil).Once()
	return &sentAt, &wait
}

func (s *notificationSuite) TestOrderedChannelWaitsForTheReleaseSignal() {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s.env.SetStartTime(start)
	sentAt, wait := s.onOrdered()
	s.env.RegisterDelayedCallback(func() {
		s.env.SignalWorkflow(SignalOrderingReleased, contract.OrderReleased{Channel: herald.ChannelEmail})
	}, 3*time.Minute)
	s.env.ExecuteWorkflow(NotificationWorkflow, orderedInput(time.Hour))
	s.Require().NoError(s.env.GetWorkflowError())
	s.Equal(3*time.Minute, sentAt.Sub(start).Round(time.Second), "sent when released, not before")
	s.False(wait.TimedOut)
	s.Equal(3*time.Minute, wait.Waited.Round(time.Second))
	var res NotificationResult
	s.Require().NoError(s.env.GetWorkflowResult(&res))
	s.Equal(herald.Reason(""), res.Channels[herald.ChannelEmail].Reason)
}

func (s *notificationSuite) TestOrderedChannelGoesAtItsHoldBound() {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s.env.SetStartTime(start)
	sentAt, wait := s.onOrdered()
	s.env.ExecuteWorkflow(NotificationWorkflow, orderedInput(2*time.Second))
	s.Require().NoError(s.env.GetWorkflowError())
	s.Equal(2*time.Second, sentAt.Sub(start).Round(time.Second), "sent at max_hold")
	s.True(wait.TimedOut)
	var res NotificationResult
	s.Require().NoError(s.env.GetWorkflowResult(&res))
	s.Equal(herald.ReasonOrderTimeout, res.Channels[herald.ChannelEmail].Reason)
	s.Equal(herald.DeliverySent, res.Channels[herald.ChannelEmail].Status)
}

// A run that fails before its channel starts (the gate's activity gave up)
// still gives up the place the API took at acceptance, so the lane's later
// notifications are not held to their bound.
func (s *notificationSuite) TestOrderedPlaceReleasedWhenTheRunFails() {
	s.env.OnActivity(contract.RecordAccepted, mock.Anything, mock.Anything).
		Return(contract.RecordAcceptedResult{Places: []contract.ClaimOrderResult{{Channel: herald.ChannelEmail, Seq: 1}}}, nil).Once()
	s.env.OnActivity(contract.LoadRecipient, mock.Anything, mock.Anything).Return(contract.Recipient{UserID: "u1", Email: "ada@example.com"}, nil)
	s.env.OnActivity(contract.LoadPreferences, mock.Anything, mock.Anything).
		Return(contract.PreferencesResult{}, temporal.NewNonRetryableApplicationError("preferences unreadable", "test", nil))
	released := 0
	s.env.OnActivity(contract.ReleaseOrder, mock.Anything, mock.MatchedBy(func(in contract.ReleaseOrderInput) bool {
		return in.Channel == herald.ChannelEmail
	})).Return(func(context.Context, contract.ReleaseOrderInput) (contract.ReleaseOrderResult, error) {
		released++
		return contract.ReleaseOrderResult{}, nil
	})
	s.env.ExecuteWorkflow(NotificationWorkflow, orderedInput(time.Hour))
	s.Require().Error(s.env.GetWorkflowError(), "the run fails with the gate")
	s.Equal(1, released, "the place is released once")
}
