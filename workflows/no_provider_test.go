package workflows

import (
	"context"
	"time"

	"github.com/stretchr/testify/mock"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/herald"
)

// TestNoProviderFailsTheChannelWithTheReason: a delivery that finds no provider
// (a production worker, no sandbox fallback) is tried once, recorded failed with
// reason no_provider and not dead-lettered.
func (s *notificationSuite) TestNoProviderFailsTheChannelWithTheReason() {
	s.onAccepted(contract.Recipient{UserID: "u1", Email: "ada@example.com"})
	s.onGate(contract.PreferencesResult{})
	attempts := 0
	s.env.OnActivity(contract.DeliverEmail, mock.Anything, mock.Anything).Return(func(context.Context, contract.DeliverEmailInput) (contract.DeliverResult, error) {
		attempts++
		return contract.DeliverResult{}, contract.NoProvider.New("no provider is configured for email", nil)
	})
	recorded := s.onChannelStatus()
	s.env.OnActivity(contract.RecordStatus, mock.Anything, mock.Anything).Return(herald.NotificationFailed, nil).Once()

	s.env.ExecuteWorkflow(NotificationWorkflow, input(time.Minute, herald.ChannelEmail))
	s.Require().NoError(s.env.GetWorkflowError())
	s.Equal(1, attempts, "no provider is not retried")
	s.Equal(contract.RecordChannelStatusInput{TenantID: "t1", NotificationID: recorded.NotificationID, Channel: herald.ChannelEmail,
		Status: herald.DeliveryFailed, Error: "no provider is configured for email", Reason: herald.ReasonNoProvider}, *recorded)
	var res NotificationResult
	s.Require().NoError(s.env.GetWorkflowResult(&res))
	s.Equal(herald.DeliveryFailed, res.Channels[herald.ChannelEmail].Status)
	s.Equal(herald.ReasonNoProvider, res.Channels[herald.ChannelEmail].Reason)
}
