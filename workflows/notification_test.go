package workflows

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/suite"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/herald-notify/herald/activities"
	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
)

type notificationSuite struct {
	suite.Suite
	testsuite.WorkflowTestSuite
	env *testsuite.TestWorkflowEnvironment
	key ids.KeyHash
}

func TestNotificationWorkflow(t *testing.T) { suite.Run(t, new(notificationSuite)) }

func (s *notificationSuite) SetupSuite() {
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
}

func (s *notificationSuite) SetupTest() {
	s.env = s.NewTestWorkflowEnvironment()
	s.env.RegisterActivity(&activities.Activities{})
	s.key = ids.IdempotencyKeyHash("k1")
	s.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: ids.NotificationWorkflowID("t1", s.key)})
}

func (s *notificationSuite) AfterTest(_, _ string) { s.env.AssertExpectations(s.T()) }

func input(window time.Duration) NotificationInput {
	return NotificationInput{TenantID: "t1", UserID: "u1", TemplateID: "order_shipped", Channels: []string{herald.ChannelInApp},
		Data: map[string]any{"title": "Shipped", "order": "42"}, DedupWindow: window}
}

func (s *notificationSuite) TestDeliversInAppThenHoldsTheDedupWindow() {
	var recorded contract.RecordAcceptedInput
	s.env.OnActivity(a.RecordAccepted, mock.Anything, mock.Anything).Return(func(_ context.Context, in contract.RecordAcceptedInput) error {
		recorded = in
		return nil
	}).Once()
	s.env.OnActivity(a.LoadRecipient, mock.Anything, contract.LoadRecipientInput{TenantID: "t1", UserID: "u1"}).
		Return(contract.Recipient{UserID: "u1"}, nil).Once()
	s.env.OnActivity(a.DeliverInApp, mock.Anything, mock.MatchedBy(func(in contract.DeliverInAppInput) bool {
		return in.Title == "Shipped" && in.Body == "order: 42" && in.NotificationID == recorded.NotificationID
	})).Return(contract.DeliverResult{Status: herald.DeliveryDelivered}, nil).Once()
	s.env.OnActivity(a.RecordStatus, mock.Anything, mock.MatchedBy(func(in contract.RecordStatusInput) bool {
		return in.Status == herald.NotificationDelivered
	})).Return(herald.NotificationDelivered, nil).Once()

	// While the window is open the query answers "delivered".
	s.env.RegisterDelayedCallback(func() {
		v, err := s.env.QueryWorkflow(QueryStatus)
		s.Require().NoError(err)
		var st NotificationState
		s.Require().NoError(v.Get(&st))
		s.Equal(herald.NotificationDelivered, st.Status)
		s.Equal(herald.DeliveryDelivered, st.Channels[herald.ChannelInApp].Status)
		s.False(s.env.IsWorkflowCompleted(), "the workflow must stay open for the dedup window")
	}, 23*time.Hour)

	s.env.ExecuteWorkflow(NotificationWorkflow, input(24*time.Hour))
	s.Require().True(s.env.IsWorkflowCompleted())
	s.Require().NoError(s.env.GetWorkflowError())
	var res NotificationResult
	s.Require().NoError(s.env.GetWorkflowResult(&res))
	s.Equal(herald.NotificationDelivered, res.Status)
	s.Equal(ids.NotificationID(s.key, recorded.RunID), res.NotificationID)
	s.Equal(recorded.NotificationID, res.NotificationID)
	s.Equal(s.key.String(), recorded.DedupKeyHash)
	s.GreaterOrEqual(s.env.Now().Sub(recorded.AcceptedAt), 24*time.Hour-time.Second, "closed before the dedup window ended")
}

func (s *notificationSuite) TestRetriesATransientInboxFailure() {
	s.env.OnActivity(a.RecordAccepted, mock.Anything, mock.Anything).Return(nil)
	s.env.OnActivity(a.LoadRecipient, mock.Anything, mock.Anything).Return(contract.Recipient{UserID: "u1"}, nil)
	s.env.OnActivity(a.DeliverInApp, mock.Anything, mock.Anything).
		Return(contract.DeliverResult{}, errors.New("connection reset")).Twice()
	s.env.OnActivity(a.DeliverInApp, mock.Anything, mock.Anything).
		Return(contract.DeliverResult{Status: herald.DeliveryDelivered}, nil).Once()
	s.env.OnActivity(a.RecordStatus, mock.Anything, mock.MatchedBy(func(in contract.RecordStatusInput) bool {
		return in.Status == herald.NotificationDelivered
	})).Return(herald.NotificationDelivered, nil).Once()

	s.env.ExecuteWorkflow(NotificationWorkflow, input(time.Minute))
	s.Require().NoError(s.env.GetWorkflowError())
}

func (s *notificationSuite) TestDeletedUserFailsEveryChannelWithTheReason() {
	s.env.OnActivity(a.RecordAccepted, mock.Anything, mock.Anything).Return(nil)
	s.env.OnActivity(a.LoadRecipient, mock.Anything, mock.Anything).
		Return(contract.Recipient{}, temporal.NewNonRetryableApplicationError("user u1 does not exist", herald.ErrTypeUnknownUser, nil)).Once()
	s.env.OnActivity(a.RecordChannelStatus, mock.Anything, mock.MatchedBy(func(in contract.RecordChannelStatusInput) bool {
		return in.Status == herald.DeliveryFailed && in.Error == "user u1 does not exist"
	})).Return(nil)
	s.env.OnActivity(a.RecordStatus, mock.Anything, mock.MatchedBy(func(in contract.RecordStatusInput) bool {
		return in.Status == herald.NotificationFailed
	})).Return(herald.NotificationFailed, nil).Once()

	s.env.ExecuteWorkflow(NotificationWorkflow, input(time.Minute))
	s.Require().NoError(s.env.GetWorkflowError())
	var res NotificationResult
	s.Require().NoError(s.env.GetWorkflowResult(&res))
	s.Equal(herald.NotificationFailed, res.Status)
	s.Equal("user u1 does not exist", res.Channels[herald.ChannelInApp].LastError)
}

func TestOverallStatus(t *testing.T) {
	st := func(statuses ...string) map[string]*ChannelState {
		m := map[string]*ChannelState{}
		for i, s := range statuses {
			m[string(rune('a'+i))] = &ChannelState{Status: s}
		}
		return m
	}
	cases := []struct {
		in   map[string]*ChannelState
		want string
	}{
		{st(herald.DeliveryDelivered), herald.NotificationDelivered},
		{st(herald.DeliveryDelivered, herald.DeliverySent), herald.NotificationSent},
		{st(herald.DeliveryFailed, herald.DeliveryFailed), herald.NotificationFailed},
		{st(herald.DeliveryFailed, herald.DeliveryDelivered), herald.NotificationPartiallyFailed},
		{st(herald.DeliverySuppressed), herald.NotificationSuppressed},
		{st(herald.DeliverySuppressed, herald.DeliveryDelivered), herald.NotificationDelivered},
		{st(herald.DeliverySending, herald.DeliveryDelivered), herald.NotificationSending},
	}
	for _, c := range cases {
		if got := overallStatus(c.in); got != c.want {
			t.Errorf("overallStatus(%v) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestRenderSimple(t *testing.T) {
	title, body := renderSimple("order_shipped", map[string]any{"order": "42", "carrier": "DHL"})
	if title != "order shipped" || body != "carrier: DHL, order: 42" {
		t.Fatalf("got %q / %q", title, body)
	}
	title, body = renderSimple("x", map[string]any{"title": "T", "body": "B"})
	if title != "T" || body != "B" {
		t.Fatalf("got %q / %q", title, body)
	}
}
