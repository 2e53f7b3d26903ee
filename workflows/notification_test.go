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
	"go.temporal.io/sdk/testsuite"

	"github.com/herald-notify/herald/activities"
	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/internal/preferences"
	"github.com/herald-notify/herald/internal/templates"
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

func input(window time.Duration, channels ...herald.Channel) NotificationInput {
	if len(channels) == 0 {
		channels = []herald.Channel{herald.ChannelInApp}
	}
	return NotificationInput{TenantID: "t1", UserID: "u1", TemplateID: "order_shipped", TemplateVersion: 3, Category: "shipping",
		Channels: channels, Data: map[string]any{"order": "42"}, DedupWindow: window}
}

// renders answers Render with the channel's content, as the activity would.
func renders(_ context.Context, in contract.RenderInput) (contract.RenderResult, error) {
	r := templates.Rendered{TemplateID: in.TemplateID, Version: in.TemplateVersion, Channel: in.Channel}
	switch in.Channel {
	case herald.ChannelInApp:
		r.InApp = &templates.RenderedInApp{Title: "Shipped", Body: "order: 42"}
	case herald.ChannelEmail:
		r.Email = &templates.RenderedEmail{Subject: "Shipped", Text: "order: 42"}
	case herald.ChannelSMS:
		r.SMS = &templates.RenderedSMS{Text: "order: 42"}
	case herald.ChannelPush:
		r.Push = &templates.RenderedPush{Title: "Shipped", Body: "order: 42"}
	}
	return contract.RenderResult{Rendered: r}, nil
}

// onGate mocks the preference load and the render every live notification runs.
func (s *notificationSuite) onGate(prefs contract.PreferencesResult) {
	s.env.OnActivity(contract.LoadPreferences, mock.Anything, mock.MatchedBy(func(in contract.LoadPreferencesInput) bool {
		return in.TenantID == "t1" && in.UserID == "u1"
	})).Return(prefs, nil)
	s.env.OnActivity(contract.Render, mock.Anything, mock.Anything).Return(renders)
}

// onAccepted mocks what every live notification runs first: recording the
// acceptance, then loading the recipient r.
func (s *notificationSuite) onAccepted(r contract.Recipient) {
	s.env.OnActivity(contract.RecordAccepted, mock.Anything, mock.Anything).Return(contract.RecordAcceptedResult{}, nil)
	s.env.OnActivity(contract.LoadRecipient, mock.Anything, mock.Anything).Return(r, nil)
}

// onChannelStatus expects one RecordChannelStatus and returns where its input is
// kept, for the test to check after the run.
func (s *notificationSuite) onChannelStatus() *contract.RecordChannelStatusInput {
	var got contract.RecordChannelStatusInput
	s.env.OnActivity(contract.RecordChannelStatus, mock.Anything, mock.Anything).Return(func(_ context.Context, in contract.RecordChannelStatusInput) error {
		got = in
		return nil
	}).Once()
	return &got
}

func (s *notificationSuite) TestDeliversInAppThenHoldsTheDedupWindow() {
	var recorded contract.RecordAcceptedInput
	s.env.OnActivity(contract.RecordAccepted, mock.Anything, mock.Anything).Return(func(_ context.Context, in contract.RecordAcceptedInput) (contract.RecordAcceptedResult, error) {
		recorded = in
		return contract.RecordAcceptedResult{}, nil
	}).Once()
	s.env.OnActivity(contract.LoadRecipient, mock.Anything, mock.MatchedBy(func(in contract.LoadRecipientInput) bool {
		return in.TenantID == "t1" && in.UserID == "u1" && in.NotificationID == recorded.NotificationID
	})).Return(contract.Recipient{UserID: "u1"}, nil).Once()
	s.onGate(contract.PreferencesResult{})
	s.env.OnActivity(contract.DeliverInApp, mock.Anything, mock.MatchedBy(func(in contract.DeliverInAppInput) bool {
		return in.Title == "Shipped" && in.Body == "order: 42" && in.NotificationID == recorded.NotificationID
	})).Return(contract.DeliverResult{Status: herald.DeliveryDelivered}, nil).Once()
	s.env.OnActivity(contract.RecordStatus, mock.Anything, mock.MatchedBy(func(in contract.RecordStatusInput) bool {
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
	s.onAccepted(contract.Recipient{UserID: "u1"})
	s.onGate(contract.PreferencesResult{})
	s.env.OnActivity(contract.DeliverInApp, mock.Anything, mock.Anything).
		Return(contract.DeliverResult{}, errors.New("connection reset")).Twice()
	s.env.OnActivity(contract.DeliverInApp, mock.Anything, mock.Anything).
		Return(contract.DeliverResult{Status: herald.DeliveryDelivered}, nil).Once()
	s.env.OnActivity(contract.RecordStatus, mock.Anything, mock.MatchedBy(func(in contract.RecordStatusInput) bool {
		return in.Status == herald.NotificationDelivered
	})).Return(herald.NotificationDelivered, nil).Once()

	s.env.ExecuteWorkflow(NotificationWorkflow, input(time.Minute))
	s.Require().NoError(s.env.GetWorkflowError())
}

func (s *notificationSuite) TestErasedUserSuppressesEveryChannelUserDeleted() {
	s.env.OnActivity(contract.RecordAccepted, mock.Anything, mock.Anything).Return(contract.RecordAcceptedResult{}, nil)
	s.env.OnActivity(contract.LoadRecipient, mock.Anything, mock.MatchedBy(func(in contract.LoadRecipientInput) bool {
		return in.NotificationID != "" // so the activity can anonymise the notification
	})).Return(contract.Recipient{}, contract.UnknownUser.New("user does not exist (erased since acceptance)", nil)).Once()
	s.env.OnActivity(contract.RecordChannelStatus, mock.Anything, mock.MatchedBy(func(in contract.RecordChannelStatusInput) bool {
		return in.Status == herald.DeliverySuppressed && in.Reason == herald.ReasonUserDeleted && in.Error == ""
	})).Return(nil)
	s.env.OnActivity(contract.RecordStatus, mock.Anything, mock.MatchedBy(func(in contract.RecordStatusInput) bool {
		return in.Status == herald.NotificationSuppressed
	})).Return(herald.NotificationSuppressed, nil).Once()

	s.env.ExecuteWorkflow(NotificationWorkflow, input(time.Minute))
	s.Require().NoError(s.env.GetWorkflowError())
	var res NotificationResult
	s.Require().NoError(s.env.GetWorkflowResult(&res))
	s.Equal(herald.NotificationSuppressed, res.Status)
	s.Equal(herald.ReasonUserDeleted, res.Channels[herald.ChannelInApp].Reason)
}

func (s *notificationSuite) TestUserErasedDuringQuietHoursIsSuppressedUserDeleted() {
	s.env.SetStartTime(time.Date(2026, 12, 1, 23, 0, 0, 0, time.UTC))
	s.onAccepted(contract.Recipient{UserID: "u1", Phone: "+14155550100", Timezone: "UTC"})
	quiet := preferences.Preferences{QuietHours: &preferences.QuietHours{Start: "22:00", End: "07:00", Timezone: "UTC"}}
	s.env.OnActivity(contract.LoadPreferences, mock.Anything, mock.Anything).Return(contract.PreferencesResult{Prefs: quiet}, nil).Once()
	s.env.OnActivity(contract.LoadPreferences, mock.Anything, mock.Anything).
		Return(contract.PreferencesResult{}, contract.UnknownUser.New("user does not exist (erased)", nil)).Once()
	var recorded []contract.RecordChannelStatusInput
	s.env.OnActivity(contract.RecordChannelStatus, mock.Anything, mock.Anything).Return(func(_ context.Context, in contract.RecordChannelStatusInput) error {
		recorded = append(recorded, in)
		return nil
	})
	s.env.OnActivity(contract.RecordStatus, mock.Anything, mock.Anything).Return(herald.NotificationSuppressed, nil).Once()

	s.env.ExecuteWorkflow(NotificationWorkflow, input(time.Minute, herald.ChannelSMS))
	s.Require().NoError(s.env.GetWorkflowError())
	s.Require().Len(recorded, 2, "scheduled for quiet hours, then suppressed")
	s.Equal(herald.ReasonQuietHours, recorded[0].Reason)
	last := recorded[len(recorded)-1]
	s.Equal(herald.DeliverySuppressed, last.Status)
	s.Equal(herald.ReasonUserDeleted, last.Reason)
}

func (s *notificationSuite) TestOptedOutChannelIsSuppressedBeforeRendering() {
	s.onAccepted(contract.Recipient{UserID: "u1", Phone: "+14155550100"})
	s.env.OnActivity(contract.LoadPreferences, mock.Anything, mock.Anything).Return(contract.PreferencesResult{
		Prefs: preferences.Preferences{Categories: map[string]preferences.CategoryPref{
			"shipping": {Channels: map[herald.Channel]bool{herald.ChannelSMS: false}}}},
	}, nil)
	rendered := map[herald.Channel]int{}
	s.env.OnActivity(contract.Render, mock.Anything, mock.Anything).Return(func(ctx context.Context, in contract.RenderInput) (contract.RenderResult, error) {
		rendered[in.Channel]++
		return renders(ctx, in)
	})
	s.env.OnActivity(contract.DeliverInApp, mock.Anything, mock.Anything).
		Return(contract.DeliverResult{Status: herald.DeliveryDelivered}, nil).Once()
	suppressed := s.onChannelStatus()
	s.env.OnActivity(contract.RecordStatus, mock.Anything, mock.Anything).Return(herald.NotificationDelivered, nil).Once()

	s.env.ExecuteWorkflow(NotificationWorkflow, input(time.Minute, herald.ChannelInApp, herald.ChannelSMS))
	s.Require().NoError(s.env.GetWorkflowError())
	s.Equal(map[herald.Channel]int{herald.ChannelInApp: 1}, rendered, "an opted-out channel must never be rendered")
	s.Equal(herald.ChannelSMS, suppressed.Channel)
	s.Equal(herald.DeliverySuppressed, suppressed.Status)
	s.Equal(herald.ReasonOptedOutCategory, suppressed.Reason)
}

// A recipient address on the suppression list: the preferences are loaded for
// exactly the addresses the workflow would send to, and the listed channel is
// suppressed address_suppressed without being rendered.
func (s *notificationSuite) TestSuppressedAddressIsSuppressedBeforeRendering() {
	s.onAccepted(contract.Recipient{UserID: "u1", Phone: "+14155550100", Email: "ada@example.com"})
	s.env.OnActivity(contract.LoadPreferences, mock.Anything, contract.LoadPreferencesInput{
		TenantID: "t1", UserID: "u1", Email: "ada@example.com", Phone: "+14155550100"}).
		Return(contract.PreferencesResult{Suppressed: map[herald.Channel]bool{herald.ChannelSMS: true}}, nil)
	rendered := map[herald.Channel]int{}
	s.env.OnActivity(contract.Render, mock.Anything, mock.Anything).Return(func(ctx context.Context, in contract.RenderInput) (contract.RenderResult, error) {
		rendered[in.Channel]++
		return renders(ctx, in)
	})
	s.env.OnActivity(contract.DeliverInApp, mock.Anything, mock.Anything).
		Return(contract.DeliverResult{Status: herald.DeliveryDelivered}, nil).Once()
	suppressed := s.onChannelStatus()
	s.env.OnActivity(contract.RecordStatus, mock.Anything, mock.Anything).Return(herald.NotificationDelivered, nil).Once()

	s.env.ExecuteWorkflow(NotificationWorkflow, input(time.Minute, herald.ChannelInApp, herald.ChannelSMS))
	s.Require().NoError(s.env.GetWorkflowError())
	s.Equal(map[herald.Channel]int{herald.ChannelInApp: 1}, rendered, "a suppressed address must never be rendered for")
	s.Equal(herald.ChannelSMS, suppressed.Channel)
	s.Equal(herald.DeliverySuppressed, suppressed.Status)
	s.Equal(herald.ReasonAddressSuppressed, suppressed.Reason)
}

func (s *notificationSuite) TestExhaustedProviderRetriesAreDeadLettered() {
	s.env.OnActivity(contract.RecordAccepted, mock.Anything, mock.Anything).Return(contract.RecordAcceptedResult{}, nil)
	s.env.OnActivity(contract.LoadRecipient, mock.Anything, mock.Anything).
		Return(contract.Recipient{UserID: "u1", Email: "ada@example.com"}, nil)
	s.onGate(contract.PreferencesResult{RetryPolicies: map[herald.Channel]herald.RetryPolicy{herald.ChannelEmail: {MaximumAttempts: 3}}})
	attempts := 0
	s.env.OnActivity(contract.DeliverEmail, mock.Anything, mock.Anything).Return(func(context.Context, contract.DeliverEmailInput) (contract.DeliverResult, error) {
		attempts++
		return contract.DeliverResult{}, errors.New("provider unavailable")
	})
	var dead contract.DeadLetterInput
	s.env.OnActivity(contract.DeadLetter, mock.Anything, mock.Anything).Return(func(_ context.Context, in contract.DeadLetterInput) (int64, error) {
		dead = in
		return 1, nil
	}).Once()
	s.env.OnActivity(contract.RecordStatus, mock.Anything, mock.Anything).Return(herald.NotificationFailed, nil).Once()

	s.env.ExecuteWorkflow(NotificationWorkflow, input(time.Minute, herald.ChannelEmail))
	s.Require().NoError(s.env.GetWorkflowError())
	s.Equal(3, attempts, "the tenant's maximum_attempts override applies")
	s.Equal(herald.ChannelEmail, dead.Channel)
	s.Equal(3, dead.Attempts)
	s.Require().NotNil(dead.Payload.Email, "the dead letter carries the payload to redrive")
	s.Equal("ada@example.com", dead.Payload.Email.To)
	var res NotificationResult
	s.Require().NoError(s.env.GetWorkflowResult(&res))
	s.Equal(herald.ReasonDeadLettered, res.Channels[herald.ChannelEmail].Reason)
}

func (s *notificationSuite) TestQuietHoursDeferThenRereadPreferences() {
	s.env.SetStartTime(time.Date(2026, 12, 1, 23, 0, 0, 0, time.UTC))
	s.onAccepted(contract.Recipient{UserID: "u1", Phone: "+14155550100", Timezone: "UTC"})
	quiet := contract.PreferencesResult{Prefs: preferences.Preferences{QuietHours: &preferences.QuietHours{Start: "22:00", End: "07:00", Timezone: "UTC"}}}
	loads := 0
	s.env.OnActivity(contract.LoadPreferences, mock.Anything, mock.Anything).Return(func(context.Context, contract.LoadPreferencesInput) (contract.PreferencesResult, error) {
		loads++
		return quiet, nil
	})
	s.env.OnActivity(contract.Render, mock.Anything, mock.Anything).Return(renders)
	scheduled := s.onChannelStatus()
	var sentAt time.Time
	s.env.OnActivity(contract.DeliverSMS, mock.Anything, mock.Anything).Return(func(ctx context.Context, _ contract.DeliverSMSInput) (contract.DeliverResult, error) {
		sentAt = s.env.Now()
		return contract.DeliverResult{Status: herald.DeliverySent}, nil
	}).Once()
	s.env.OnActivity(contract.RecordStatus, mock.Anything, mock.Anything).Return(herald.NotificationSent, nil).Once()

	s.env.ExecuteWorkflow(NotificationWorkflow, input(time.Minute, herald.ChannelSMS))
	s.Require().NoError(s.env.GetWorkflowError())
	s.Equal(herald.DeliveryScheduled, scheduled.Status)
	s.Equal(herald.ReasonQuietHours, scheduled.Reason)
	s.Equal(2, loads, "preferences are read again when the wait ends")
	s.Equal(time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC), sentAt.UTC(), "sent when quiet hours end")
}

func (s *notificationSuite) TestCancelWhileScheduled() {
	s.env.OnActivity(contract.RecordAccepted, mock.Anything, mock.MatchedBy(func(in contract.RecordAcceptedInput) bool { return in.Scheduled })).Return(contract.RecordAcceptedResult{}, nil).Once()
	cancelled := s.onChannelStatus()
	s.env.OnActivity(contract.RecordStatus, mock.Anything, mock.Anything).Return(herald.NotificationCancelled, nil)
	s.env.RegisterDelayedCallback(func() {
		s.env.UpdateWorkflow(UpdateCancel, "c1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { s.Fail("cancel rejected", err) },
			OnComplete: func(v any, err error) {
				s.Require().NoError(err)
				s.Equal(herald.NotificationCancelled, v.(NotificationState).Status)
			},
		})
	}, time.Minute)
	in := input(time.Hour)
	in.SendAt = s.env.Now().Add(30 * time.Minute)
	s.env.ExecuteWorkflow(NotificationWorkflow, in)
	s.Require().NoError(s.env.GetWorkflowError())
	s.Equal(herald.DeliveryCancelled, cancelled.Status)
	s.Equal(herald.ReasonCancelled, cancelled.Reason)
	var res NotificationResult
	s.Require().NoError(s.env.GetWorkflowResult(&res))
	s.Equal(herald.NotificationCancelled, res.Status)
}
