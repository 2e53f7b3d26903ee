package herald

import "time"

// Ordered delivery on provider channels (docs/ordering.md): notifications with
// the same (tenant, user, channel, ordering key) are handed to the provider in
// the order they became due.

// OrderClaim is one ordered channel of a notification taking (or finding,
// when the API took it at acceptance) its place in its lane (TenantID,
// UserID, Channel, OrderingKey): what the API and the ClaimOrder activity
// hand to the store (store.ClaimOrderHandoffs).
type OrderClaim struct {
	TenantID       string
	UserID         string
	Channel        Channel
	OrderingKey    string
	NotificationID string
	WorkflowID     string
	RunID          string
}

// DefaultOrderMaxHold is how long an ordered channel waits at most for an
// earlier notification of its lane (max_hold) when the tenant set none.
const DefaultOrderMaxHold = 5 * time.Minute

// MaxOrderingKeyLen bounds an ordering key (POST /v1/notifications
// ordering_key, a template's ordering).
const MaxOrderingKeyLen = 64

// OrderingPerUser is the template ordering that puts all of a user's
// notifications of a channel in one lane.
const OrderingPerUser = "user"

// IsOrderingKey reports whether k is a valid ordering key: 1 to
// MaxOrderingKeyLen letters, digits, '_', '-', '.', ':' or '/'.
func IsOrderingKey(k string) bool {
	if k == "" || len(k) > MaxOrderingKeyLen {
		return false
	}
	for _, r := range k {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case r == '_' || r == '-' || r == '.' || r == ':' || r == '/':
		default:
			return false
		}
	}
	return true
}
