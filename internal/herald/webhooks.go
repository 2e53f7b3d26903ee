package herald

// Tenant status webhook event types: one per delivery state change a tenant
// can subscribe to (an endpoint's events filter names these).
const (
	EventDeliverySent         = "delivery.sent"
	EventDeliveryDelivered    = "delivery.delivered"
	EventDeliveryFailed       = "delivery.failed"
	EventDeliverySuppressed   = "delivery.suppressed"
	EventDeliveryDeadLettered = "delivery.dead_lettered"
	// EventCampaignCompleted: a campaign finished sending to its whole audience.
	EventCampaignCompleted = "campaign.completed"
)

// EventTypes lists every webhook event type.
var EventTypes = []string{EventDeliverySent, EventDeliveryDelivered, EventDeliveryFailed, EventDeliverySuppressed, EventDeliveryDeadLettered,
	EventCampaignCompleted}

// DeliveryEvent is the event type of a delivery status ("" for a status that
// is not an event: pending, scheduled, sending, cancelled).
func DeliveryEvent(status DeliveryStatus) string {
	switch status {
	case DeliverySent:
		return EventDeliverySent
	case DeliveryDelivered:
		return EventDeliveryDelivered
	case DeliveryFailed:
		return EventDeliveryFailed
	case DeliverySuppressed:
		return EventDeliverySuppressed
	}
	return ""
}
