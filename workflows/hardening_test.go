package workflows

import (
	"context"

	"github.com/stretchr/testify/mock"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/herald"
)

// A channel whose rendered content is too large to carry fails visibly, with the
// reason, and the notification reaches its final status (Temporal would
// otherwise terminate the run on the oversized payload).
func (s *notificationSuite) TestOversizedContentFailsTheChannelWithTheReason() {
	s.onAccepted(contract.Recipient{UserID: "u1", Email: "ada@example.com"})
	s.env.OnActivity(contract.LoadPreferences, mock.Anything, mock.Anything).Return(contract.PreferencesResult{}, nil)
	s.env.OnActivity(contract.Render, mock.Anything, mock.Anything).Return(func(ctx context.Context, in contract.RenderInput) (contract.RenderResult, error) {
		if in.Channel == herald.ChannelEmail {
			err := &contract.ContentTooLargeError{Channel: in.Channel, Bytes: 3 << 20}
			return contract.RenderResult{}, contract.ContentTooLarge.New(err.Error(), err)
		}
		return renders(ctx, in)
	})
	s.env.OnActivity(contract.DeliverInApp, mock.Anything, mock.Anything).
		Return(contract.DeliverResult{Status: herald.DeliveryDelivered}, nil).Once()
	failed := s.onChannelStatus()
	s.env.OnActivity(contract.RecordStatus, mock.Anything, mock.MatchedBy(func(in contract.RecordStatusInput) bool {
		return in.Status == herald.NotificationPartiallyFailed
	})).Return(herald.NotificationPartiallyFailed, nil).Once()

	s.env.ExecuteWorkflow(NotificationWorkflow, input(0, herald.ChannelInApp, herald.ChannelEmail))
	s.Require().NoError(s.env.GetWorkflowError())
	s.Equal(herald.ChannelEmail, failed.Channel)
	s.Equal(herald.DeliveryFailed, failed.Status)
	s.Equal(herald.ReasonContentTooLarge, failed.Reason)
	s.Contains(failed.Error, "524288")
	var res NotificationResult
	s.Require().NoError(s.env.GetWorkflowResult(&res))
	s.Equal(herald.NotificationPartiallyFailed, res.Status)
}
