package providers

import (
	"time"

	"github.com/herald-notify/herald/internal/herald"
)

// ReceiptStatus is a provider-neutral delivery status carried by a receipt.
type ReceiptStatus string

// Receipt statuses, from least to most final.
const (
	// ReceiptAccepted: the provider took the message (SendGrid processed, Twilio
	// accepted/queued/scheduled).
	ReceiptAccepted ReceiptStatus = "accepted"
	// ReceiptSent: handed to the carrier or receiving server (Twilio sending/sent).
	ReceiptSent ReceiptStatus = "sent"
	// ReceiptDeferred: a temporary failure the provider is retrying itself.
	ReceiptDeferred ReceiptStatus = "deferred"
	// ReceiptDelivered: the recipient's server or handset confirmed delivery
	// (Twilio delivered/read).
	ReceiptDelivered ReceiptStatus = "delivered"
	// ReceiptFailed: the provider gave up (SendGrid bounce/dropped, Twilio
	// failed/undelivered/canceled).
	ReceiptFailed ReceiptStatus = "failed"
)

// Receipt is one delivery event from a provider webhook, named by the tags Herald
// attached to the message when it sent it.
type Receipt struct {
	Provider string
	// TenantID, NotificationID and Channel come from the tags Herald sent with the
	// message (SendGrid custom_args, Twilio StatusCallback query). They are empty for
	// a message Herald did not tag: such a receipt can only be matched by
	// ProviderMessageID.
	TenantID       string
	NotificationID string
	Channel        herald.Channel
	// ProviderMessageID is in the form the send returned it (SendGrid's X-Message-Id,
	// Twilio's MessageSid).
	ProviderMessageID string
	Status            ReceiptStatus
	// ProviderStatus is the provider's own event or status name ("bounce", "undelivered").
	ProviderStatus string
	// Reason explains a failure or deferral (bounce reason, Twilio error code).
	Reason string
	// EventID is the provider's id for this event when it has one (SendGrid
	// sg_event_id), for de-duplication.
	EventID    string
	OccurredAt time.Time
}

// Named reports whether the receipt names a notification and channel.
func (r Receipt) Named() bool {
	return r.TenantID != "" && r.NotificationID != "" && r.Channel != ""
}

// DeliveryStatus maps the receipt to the deliveries table's status: "delivered",
// "failed", or "sent" for everything that proves the provider has the message
// (accepted, sent, deferred). Any receipt at all proves the provider accepted the
// message, so a retry that finds one must not call the provider again.
func (r Receipt) DeliveryStatus() herald.DeliveryStatus {
	switch r.Status {
	case ReceiptDelivered:
		return herald.DeliveryDelivered
	case ReceiptFailed:
		return herald.DeliveryFailed
	default:
		return herald.DeliverySent
	}
}

// FilterTenant keeps the receipts whose tags name tenantID. Use it when a webhook
// was authenticated with one tenant's key: receipts naming another tenant are
// forged or misrouted and must not touch that tenant's deliveries.
func FilterTenant(receipts []Receipt, tenantID string) []Receipt {
	out := receipts[:0:0]
	for _, r := range receipts {
		if r.TenantID == tenantID {
			out = append(out, r)
		}
	}
	return out
}

// AddressEvent is a provider telling that an address must no longer be sent to
// (a hard bounce, a spam complaint, an SMS STOP) or, for an opt-out the
// recipient themselves withdrew (an SMS START), may be again. The API applies
// it to the tenant's suppression list (docs/suppressions.md).
type AddressEvent struct {
	Provider string
	// TenantID is the tenant the event's tags name, "" for an untagged event
	// (one a verified request of the tenant carries: it is the tenant's).
	TenantID string
	Channel  herald.Channel
	// Address is the email address or phone number as the provider wrote it.
	Address string
	// Suppress lists the address; false takes it off the list, only when it
	// was listed for a reason the recipient can withdraw (a STOP, by a START).
	Suppress bool
	Reason   herald.SuppressionReason
	// Detail is the provider's words (a bounce reason), kept with the entry.
	Detail string
}

// FilterAddressTenant keeps the address events of tenantID and the untagged
// ones (see FilterTenant).
func FilterAddressTenant(events []AddressEvent, tenantID string) []AddressEvent {
	out := events[:0:0]
	for _, e := range events {
		if e.TenantID == "" || e.TenantID == tenantID {
			out = append(out, e)
		}
	}
	return out
}
