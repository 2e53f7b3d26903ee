package contract

import (
	"errors"
	"time"

	"github.com/herald-notify/herald/internal/herald"
)

// Addressee is the notification a rendered channel belongs to and where its
// recipient is reached.
type Addressee struct {
	TenantID       string
	NotificationID string
	UserID         string
	Email          string
	Phone          string
	// Category is the template's (the inbox filters by it, email carries it).
	Category   string
	AcceptedAt time.Time
}

// Delivery is a rendered channel as its delivery takes it: InApp for the
// inbox, or one field of Provider for a provider channel.
type Delivery struct {
	InApp    *DeliverInAppInput
	Provider RedrivePayload
}

var (
	// ErrNoContent: the rendering has no content for the channel (or the
	// channel is one this binary does not know).
	ErrNoContent = errors.New("the rendering has no content for the channel")
	// ErrNoAddress: the recipient has no email address or phone number for the
	// channel (push tokens are read at send time).
	ErrNoAddress = errors.New("the recipient has no address for the channel")
)

// DeliveryPayload turns a channel's rendered content into what its delivery
// takes. A single notification's workflow and a campaign batch both build
// their deliveries here, so a dead letter's payload (Provider) means the same
// whichever sent it.
func DeliveryPayload(to Addressee, channel herald.Channel, r RenderResult) (Delivery, error) {
	c := r.Rendered
	switch {
	case channel == herald.ChannelInApp && c.InApp != nil:
		return Delivery{InApp: &DeliverInAppInput{TenantID: to.TenantID, UserID: to.UserID, NotificationID: to.NotificationID,
			Title: c.InApp.Title, Body: c.InApp.Body, ActionURL: c.InApp.ActionURL, Category: to.Category, AcceptedAt: to.AcceptedAt}}, nil
	case channel == herald.ChannelEmail && c.Email != nil:
		if to.Email == "" {
			return Delivery{}, ErrNoAddress
		}
		return Delivery{Provider: RedrivePayload{Email: &DeliverEmailInput{TenantID: to.TenantID, NotificationID: to.NotificationID,
			To: to.Email, Subject: c.Email.Subject, Text: c.Email.Text, HTML: c.Email.HTML, Headers: r.Headers, Category: to.Category}}}, nil
	case channel == herald.ChannelSMS && c.SMS != nil:
		if to.Phone == "" {
			return Delivery{}, ErrNoAddress
		}
		return Delivery{Provider: RedrivePayload{SMS: &DeliverSMSInput{TenantID: to.TenantID, NotificationID: to.NotificationID,
			To: to.Phone, Body: c.SMS.Text}}}, nil
	case channel == herald.ChannelPush && c.Push != nil:
		return Delivery{Provider: RedrivePayload{Push: &DeliverPushInput{TenantID: to.TenantID, NotificationID: to.NotificationID,
			UserID: to.UserID, Title: c.Push.Title, Body: c.Push.Body, Data: c.Push.Data}}}, nil
	}
	return Delivery{}, ErrNoContent
}
