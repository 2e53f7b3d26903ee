package providers

import (
	"context"
	"encoding/json"
	"time"

	"github.com/herald-notify/herald/internal/herald"
)

// SandboxMessage is one message the sandbox provider recorded instead of
// sending it (package sandbox is the provider; the API lists these on the dev
// stack without depending on it).
type SandboxMessage struct {
	ID             int64          `json:"id"`
	TenantID       string         `json:"-"`
	NotificationID string         `json:"notification_id"`
	Channel        herald.Channel `json:"channel"`
	IdempotencyKey string         `json:"idempotency_key"`
	// Recipient is the email address, phone number or device token.
	Recipient string `json:"recipient"`
	// Subject is the email subject or push title ("" for SMS).
	Subject string `json:"subject,omitempty"`
	// Body is the email text (HTML when there is no text), SMS body or push body.
	Body string `json:"body"`
	// Payload is the whole message as the sender received it.
	Payload json.RawMessage `json:"payload"`
	// Calls is how many sends were answered with this message: the first, and
	// each repeat of its idempotency key to the same recipient (which a provider
	// without idempotency keys would have delivered again).
	Calls     int       `json:"calls"`
	CreatedAt time.Time `json:"created_at"`
}

// SandboxRecorder stores recorded messages.
type SandboxRecorder interface {
	// Record stores m and returns it with ID, CreatedAt and Calls set. It is
	// idempotent: when the tenant already has a message with m's IdempotencyKey
	// and Recipient, it stores nothing new, counts the call on that message and
	// returns m with that message's ID and CreatedAt.
	Record(ctx context.Context, m SandboxMessage) (SandboxMessage, error)
	// List returns a tenant's messages, newest first, at most limit (1..500; other
	// values mean SandboxDefaultLimit).
	List(ctx context.Context, tenantID string, limit int) ([]SandboxMessage, error)
}

// Sandbox message list limits.
const (
	SandboxDefaultLimit = 50
	SandboxMaxLimit     = 500
)

// ClampSandboxLimit maps a requested limit to 1..SandboxMaxLimit
// (SandboxDefaultLimit when out of range).
func ClampSandboxLimit(limit int) int {
	if limit <= 0 || limit > SandboxMaxLimit {
		return SandboxDefaultLimit
	}
	return limit
}
