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
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/internal/store"
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
	return NotificationInput{TenantID: "t1", UserID: "u1", TemplateID: "order_shipped", Channels: []string{ChannelInApp},
		Data: map[string]any{"title": "Shipped", "order": "42"}, DedupWindow: window}
}

func (s *notificationSuite) TestDeliversInAppThenHoldsTheDedupWindow() {
	var recorded activities.RecordAcceptedInput
	s.env.OnActivity(a.RecordAccepted, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.RecordAcceptedInput) error {
		recorded = in
		return nil
	}).Once()
	s.env.OnActivity(a.LoadRecipient, mock.Anything, activities.LoadRecipientInput{TenantID: "t1", UserID: "u1"}).
		Return(activities.Recipient{UserID: "u1"}, nil).Once()
	s.env.OnActivity(a.DeliverInApp, mock.Anything, mock.MatchedBy(func(in activities.DeliverInAppInput) bool {
		return in.Title == "Shipped" && in.Body == "order: 42" && in.NotificationID == recorded.NotificationID
	})).Return(activities.DeliverResult{Status: store.DeliveryDelivered}, nil).Once()
	s.env.OnActivity(a.RecordStatus, mock.Anything, mock.MatchedBy(func(in activities.RecordStatusInput) bool {
		return in.Status == store.NotificationDelivered
	})).Return(store.NotificationDelivered, nil).Once()

	// While the window is open the query answers "delivered".
	s.env.RegisterDelayedCallback(func() {
		v, err := s.env.QueryWorkflow(QueryStatus)
		s.Require().NoError(err)
		var st NotificationState
		s.Require().NoError(v.Get(&st))
		s.Equal(store.NotificationDelivered, st.Status)
		s.Equal(store.DeliveryDelivered, st.Channels[ChannelInApp].Status)
		s.False(s.env.IsWorkflowCompleted(), "the workflow must stay open for the dedup window")
	}, 23*time.Hour)

	s.env.ExecuteWorkflow(NotificationWorkflow, input(24*time.Hour))
	s.Require().True(s.env.IsWorkflowCompleted())
	s.Require().NoError(s.env.GetWorkflowError())
	var res NotificationResult
	s.Require().NoError(s.env.GetWorkflowResult(&res))
	s.Equal(store.NotificationDelivered, res.Status)
	s.Equal(ids.NotificationID(s.key, recorded.RunID), res.NotificationID)
	s.Equal(recorded.NotificationID, res.NotificationID)
	s.Equal(s.key.String(), recorded.DedupKeyHash)
	s.GreaterOrEqual(s.env.Now().Sub(recorded.AcceptedAt), 24*time.Hour-time.Second, "closed before the dedup window ended")
}

func (s *notificationSuite) TestRetriesATransientInboxFailure() {
	s.env.OnActivity(a.RecordAccepted, mock.Anything, mock.Anything).Return(nil)
	s.env.OnActivity(a.LoadRecipient, mock.Anything, mock.Anything).Return(activities.Recipient{UserID: "u1"}, nil)
	s.env.OnActivity(a.DeliverInApp, mock.Anything, mock.Anything).
		Return(activities.DeliverResult{}, errors.New("connection reset")).Twice()
	s.env.OnActivity(a.DeliverInApp, mock.Anything, mock.Anything).
		Return(activities.DeliverResult{Status: store.DeliveryDelivered}, nil).Once()
	s.env.OnActivity(a.RecordStatus, mock.Anything, mock.MatchedBy(func(in activities.RecordStatusInput) bool {
		return in.Status == store.NotificationDelivered
	})).Return(store.NotificationDelivered, nil).Once()

	s.env.ExecuteWorkflow(NotificationWorkflow, input(time.Minute))
	s.Require().NoError(s.env.GetWorkflowError())
}

func (s *notificationSuite) TestDeletedUserFailsEveryChannelWithTheReason() {
	s.env.OnActivity(a.RecordAccepted, mock.Anything, mock.Anything).Return(nil)
	s.env.OnActivity(a.LoadRecipient, mock.Anything, mock.Anything).
		Return(activities.Recipient{}, temporal.NewNonRetryableApplicationError("user u1 does not exist", activities.ErrTypeUnknownUser, nil)).Once()
	s.env.OnActivity(a.RecordChannelStatus, mock.Anything, mock.MatchedBy(func(in activities.RecordChannelStatusInput) bool {
		return in.Status == store.DeliveryFailed && in.Error == "user u1 does not exist"
	})).Return(nil)
	s.env.OnActivity(a.RecordStatus, mock.Anything, mock.MatchedBy(func(in activities.RecordStatusInput) bool {
		return in.Status == store.NotificationFailed
	})).Return(store.NotificationFailed, nil).Once()

	s.env.ExecuteWorkflow(NotificationWorkflow, input(time.Minute))
	s.Require().NoError(s.env.GetWorkflowError())
	var res NotificationResult
	s.Require().NoError(s.env.GetWorkflowResult(&res))
	s.Equal(store.NotificationFailed, res.Status)
	s.Equal("user u1 does not exist", res.Channels[ChannelInApp].LastError)
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
		{st(store.DeliveryDelivered), store.NotificationDelivered},
		{st(store.DeliveryDelivered, store.DeliverySent), store.NotificationSent},
		{st(store.DeliveryFailed, store.DeliveryFailed), store.NotificationFailed},
		{st(store.DeliveryFailed, store.DeliveryDelivered), store.NotificationPartiallyFailed},
		{st(store.DeliverySuppressed), store.NotificationSuppressed},
		{st(store.DeliverySuppressed, store.DeliveryDelivered), store.NotificationDelivered},
		{st(store.DeliverySending, store.DeliveryDelivered), store.NotificationSending},
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
