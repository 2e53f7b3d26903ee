package workflows

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/suite"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/herald-notify/herald/activities"
	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/preferences"
)

// redriveSuite: the redrive re-checks the user's preferences and address before it
// sends (mocked activities, time skipping).
type redriveSuite struct {
	suite.Suite
	testsuite.WorkflowTestSuite
	env *testsuite.TestWorkflowEnvironment
	// finished is the FinishRedrive input, reopened counts ReopenRedrive calls.
	finished *contract.FinishRedriveInput
	reopened int
}

func TestRedriveWorkflow(t *testing.T) { suite.Run(t, new(redriveSuite)) }

func (s *redriveSuite) SetupSuite() {
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
}

func (s *redriveSuite) SetupTest() {
	s.env = s.NewTestWorkflowEnvironment()
	s.env.RegisterActivity(&activities.Activities{})
	s.finished, s.reopened = nil, 0
	s.env.OnActivity(contract.ReopenRedrive, mock.Anything, contract.ReopenRedriveInput{TenantID: "t1", DeadLetterID: 7}).
		Return(func(context.Context, contract.ReopenRedriveInput) error { s.reopened++; return nil }).Maybe()
	s.env.OnActivity(contract.FinishRedrive, mock.Anything, mock.Anything).
		Return(func(_ context.Context, in contract.FinishRedriveInput) error { s.finished = &in; return nil }).Maybe()
}

func (s *redriveSuite) AfterTest(_, _ string) { s.env.AssertExpectations(s.T()) }

// claim is a dead letter of notification n1's channel, with its payload addressed
// as it was when the notification was sent.
func (s *redriveSuite) claim(channel herald.Channel, critical bool) {
	c := contract.BeginRedriveResult{Claimed: true, NotificationID: "n1", Channel: channel, TemplateID: "order",
		UserID: "u1", Category: "marketing", Critical: critical}
	switch channel {
	case herald.ChannelEmail:
		c.Payload.Email = &contract.DeliverEmailInput{TenantID: "t1", NotificationID: "n1", To: "old@example.com", Subject: "Hi", Text: "Hello"}
	case herald.ChannelSMS:
		c.Payload.SMS = &contract.DeliverSMSInput{TenantID: "t1", NotificationID: "n1", To: "+14155550100", Body: "Hello"}
	case herald.ChannelPush:
		c.Payload.Push = &contract.DeliverPushInput{TenantID: "t1", NotificationID: "n1", UserID: "u1", Title: "Hi", Body: "Hello"}
	}
	s.env.OnActivity(contract.BeginRedrive, mock.Anything, contract.BeginRedriveInput{TenantID: "t1", DeadLetterID: 7}).Return(c, nil).Once()
}

func (s *redriveSuite) user(r contract.Recipient, prefs preferences.Preferences) {
	r.UserID = "u1"
	s.env.OnActivity(contract.LoadRecipient, mock.Anything, contract.LoadRecipientInput{TenantID: "t1", UserID: "u1"}).Return(r, nil)
	s.env.OnActivity(contract.LoadPreferences, mock.Anything, contract.LoadPreferencesInput{TenantID: "t1", UserID: "u1", Email: r.Email, Phone: r.Phone}).
		Return(contract.PreferencesResult{Prefs: prefs}, nil)
}

func (s *redriveSuite) run() RedriveResult {
	s.env.ExecuteWorkflow(RedriveWorkflow, RedriveInput{TenantID: "t1", DeadLetterID: 7})
	s.Require().NoError(s.env.GetWorkflowError())
	var res RedriveResult
	s.Require().NoError(s.env.GetWorkflowResult(&res))
	return res
}

var off = false

var marketingOff = preferences.Preferences{Categories: map[string]preferences.CategoryPref{"marketing": {Enabled: &off}}}

func (s *redriveSuite) TestOptedOutSinceIsSuppressedNotSent() {
	s.claim(herald.ChannelEmail, false)
	s.user(contract.Recipient{Email: "old@example.com"}, marketingOff)
	res := s.run()
	s.Equal(RedriveResult{Claimed: true, Status: herald.DeliverySuppressed, Reason: herald.ReasonOptedOutCategory}, res)
	s.Require().NotNil(s.finished)
	s.Equal(herald.ReasonOptedOutCategory, s.finished.SuppressedReason)
	s.Zero(s.reopened, "the delivery is not reopened")
}

func (s *redriveSuite) TestCriticalIgnoresTheCategoryOptOut() {
	s.claim(herald.ChannelEmail, true)
	s.user(contract.Recipient{Email: "old@example.com"}, marketingOff)
	s.env.OnActivity(contract.DeliverEmail, mock.Anything, mock.Anything).Return(contract.DeliverResult{Status: herald.DeliverySent}, nil).Once()
	s.Equal(herald.DeliverySent, s.run().Status)
}

func (s *redriveSuite) TestChangedAddressIsUsed() {
	s.claim(herald.ChannelEmail, false)
	s.user(contract.Recipient{Email: "new@example.com"}, preferences.Preferences{})
	var sent contract.DeliverEmailInput
	s.env.OnActivity(contract.DeliverEmail, mock.Anything, mock.Anything).Return(func(_ context.Context, in contract.DeliverEmailInput) (contract.DeliverResult, error) {
		sent = in
		return contract.DeliverResult{Status: herald.DeliverySent}, nil
	}).Once()
	s.Equal(RedriveResult{Claimed: true, Status: herald.DeliverySent}, s.run())
	s.Equal("new@example.com", sent.To)
	s.Equal("Hi", sent.Subject, "the stored message is sent, not re-rendered")
	s.Equal(1, s.reopened)
	s.Require().NotNil(s.finished)
	s.Empty(s.finished.SuppressedReason)
}

func (s *redriveSuite) TestRemovedPhoneIsNoAddress() {
	s.claim(herald.ChannelSMS, false)
	s.user(contract.Recipient{Email: "ada@example.com"}, preferences.Preferences{})
	s.Equal(RedriveResult{Claimed: true, Status: herald.DeliverySuppressed, Reason: herald.ReasonNoAddress}, s.run())
	s.Zero(s.reopened)
}

func (s *redriveSuite) TestErasedUserIsUserDeleted() {
	s.claim(herald.ChannelSMS, false)
	s.env.OnActivity(contract.LoadRecipient, mock.Anything, mock.Anything).
		Return(contract.Recipient{}, contract.UnknownUser.New("user does not exist", nil)).Once()
	s.Equal(herald.ReasonUserDeleted, s.run().Reason)
}

func (s *redriveSuite) TestNoDeviceLeftIsNoAddress() {
	s.claim(herald.ChannelPush, false)
	s.user(contract.Recipient{}, preferences.Preferences{})
	s.env.OnActivity(contract.DeliverPush, mock.Anything, mock.Anything).
		Return(contract.DeliverResult{}, contract.NoDevice.New("the user has no registered device", nil)).Once()
	s.Equal(RedriveResult{Claimed: true, Status: herald.DeliverySuppressed, Reason: herald.ReasonNoAddress}, s.run())
	s.Equal(herald.ReasonNoAddress, s.finished.SuppressedReason)
}

func (s *redriveSuite) TestQuietHoursAreWaitedOut() {
	s.env.SetStartTime(time.Date(2026, 12, 1, 23, 0, 0, 0, time.UTC))
	s.claim(herald.ChannelSMS, false)
	s.env.OnActivity(contract.LoadRecipient, mock.Anything, mock.Anything).Return(contract.Recipient{UserID: "u1", Phone: "+14155550199", Timezone: "UTC"}, nil)
	loads := 0
	s.env.OnActivity(contract.LoadPreferences, mock.Anything, mock.Anything).Return(func(context.Context, contract.LoadPreferencesInput) (contract.PreferencesResult, error) {
		loads++
		return contract.PreferencesResult{Prefs: preferences.Preferences{QuietHours: &preferences.QuietHours{Start: "22:00", End: "07:00", Timezone: "UTC"}}}, nil
	})
	var sentAt time.Time
	var sent contract.DeliverSMSInput
	s.env.OnActivity(contract.DeliverSMS, mock.Anything, mock.Anything).Return(func(_ context.Context, in contract.DeliverSMSInput) (contract.DeliverResult, error) {
		sentAt, sent = s.env.Now(), in
		return contract.DeliverResult{Status: herald.DeliverySent}, nil
	}).Once()
	s.Equal(herald.DeliverySent, s.run().Status)
	s.Equal(2, loads, "preferences are read again when the wait ends")
	s.Equal(time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC), sentAt.UTC())
	s.Equal("+14155550199", sent.To)
}
