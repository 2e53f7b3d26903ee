package herald

// Per-channel delivery statuses (the deliveries table, the status API and the
// workflow's query).
const (
	DeliveryPending    = "pending"
	DeliveryScheduled  = "scheduled"
	DeliverySending    = "sending"
	DeliverySent       = "sent"      // the provider accepted
	DeliveryDelivered  = "delivered" // receipt confirmed, or stored in the inbox
	DeliveryFailed     = "failed"
	DeliverySuppressed = "suppressed"
	DeliveryCancelled  = "cancelled"
)

// Overall notification statuses.
const (
	NotificationQueued          = "queued"
	NotificationScheduled       = "scheduled"
	NotificationSending         = "sending"
	NotificationSent            = "sent"
	NotificationDelivered       = "delivered"
	NotificationPartiallyFailed = "partially_failed"
	NotificationFailed          = "failed"
	NotificationSuppressed      = "suppressed"
	NotificationCancelled       = "cancelled"
)

// DeliveryRank orders delivery statuses so that an update never moves a channel
// backwards: a late "sent" never overwrites "delivered", and a bounce receipt may
// turn "sent" into "failed". "failed" is final for the workflow, but a receipt
// proving the provider accepted after all still moves it to "delivered"; the
// other final outcomes share the top rank. The store turns this into SQL.
var DeliveryRank = map[string]int{
	DeliveryPending:    0,
	DeliveryScheduled:  1,
	DeliverySending:    2,
	DeliverySent:       3,
	DeliveryFailed:     4,
	DeliveryDelivered:  5,
	DeliverySuppressed: 5,
	DeliveryCancelled:  5,
}

// OverallStatus sums a notification's channel statuses into its status: all
// delivered → delivered; all at least sent → sent; all failed → failed; some
// failed → partially_failed; all cancelled → cancelled; only suppressed or
// cancelled → suppressed; anything still in flight → sending, or scheduled when
// everything in flight waits for a scheduled time. The workflow and the store
// (receipts arriving after the workflow finished) both use it.
func OverallStatus(channelStatuses []string) string {
	var delivered, sent, failed, suppressed, cancelled, scheduled, inFlight int
	for _, s := range channelStatuses {
		switch s {
		case DeliveryDelivered:
			delivered++
		case DeliverySent:
			sent++
		case DeliveryFailed:
			failed++
		case DeliverySuppressed:
			suppressed++
		case DeliveryCancelled:
			cancelled++
		case DeliveryScheduled:
			scheduled++
			inFlight++
		default:
			inFlight++
		}
	}
	n := len(channelStatuses)
	switch {
	case scheduled > 0 && scheduled == inFlight:
		return NotificationScheduled
	case inFlight > 0:
		return NotificationSending
	case failed == n:
		return NotificationFailed
	case failed > 0:
		return NotificationPartiallyFailed
	case cancelled == n:
		return NotificationCancelled
	case suppressed+cancelled == n:
		return NotificationSuppressed
	case sent == 0:
		return NotificationDelivered
	default:
		return NotificationSent
	}
}
