package herald

import "slices"

// DeliveryStatus is a channel's delivery status (the deliveries table, the
// status API and the workflow's query).
type DeliveryStatus string

// The delivery statuses.
const (
	DeliveryPending    DeliveryStatus = "pending"
	DeliveryScheduled  DeliveryStatus = "scheduled"
	DeliverySending    DeliveryStatus = "sending"
	DeliverySent       DeliveryStatus = "sent"      // the provider accepted
	DeliveryDelivered  DeliveryStatus = "delivered" // receipt confirmed, or stored in the inbox
	DeliveryFailed     DeliveryStatus = "failed"
	DeliverySuppressed DeliveryStatus = "suppressed"
	DeliveryCancelled  DeliveryStatus = "cancelled"
)

// NotificationStatus is a notification's overall status (the notifications
// table, the status API and the HeraldStatus search attribute), summed from its
// channels' statuses by OverallStatus.
type NotificationStatus string

// The overall notification statuses.
const (
	NotificationQueued          NotificationStatus = "queued"
	NotificationScheduled       NotificationStatus = "scheduled"
	NotificationSending         NotificationStatus = "sending"
	NotificationSent            NotificationStatus = "sent"
	NotificationDelivered       NotificationStatus = "delivered"
	NotificationPartiallyFailed NotificationStatus = "partially_failed"
	NotificationFailed          NotificationStatus = "failed"
	NotificationSuppressed      NotificationStatus = "suppressed"
	NotificationCancelled       NotificationStatus = "cancelled"
)

// OpenNotificationStatuses are the statuses of a notification that has not
// ended; every other status is Ended.
var OpenNotificationStatuses = []NotificationStatus{NotificationQueued, NotificationScheduled, NotificationSending}

// Ended reports whether a notification with this status has ended: every
// channel reached an outcome (or the run stopped at a flow step), so the run
// will not deliver it again by itself (a receipt or a redrive may still move it).
func (s NotificationStatus) Ended() bool { return !slices.Contains(OpenNotificationStatuses, s) }

// DeliveryRank orders delivery statuses so that an update never moves a channel
// backwards: a late "sent" never overwrites "delivered", and a bounce receipt may
// turn "sent" into "failed". "failed" is final for the workflow, but a receipt
// proving the provider accepted after all still moves it to "delivered"; the
// other final outcomes share the top rank. The store turns this into SQL.
var DeliveryRank = map[DeliveryStatus]int{
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
func OverallStatus(channelStatuses []DeliveryStatus) NotificationStatus {
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
