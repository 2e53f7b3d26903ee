// Package registry is the list of every provider Herald has. It is the one
// place that imports the provider packages: the API validates configs and
// receives webhooks, and the resolver builds senders, through the
// *providers.Registry it returns.
package registry

import (
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/fcm"
	"github.com/herald-notify/herald/providers/sandbox"
	"github.com/herald-notify/herald/providers/sendgrid"
	"github.com/herald-notify/herald/providers/smtp"
	"github.com/herald-notify/herald/providers/twilio"
)

// New returns the registry of Herald's providers. Within a channel the order is
// the API's display order (email: sendgrid, smtp, sandbox).
func New() *providers.Registry {
	return providers.NewRegistry(
		sendgrid.Definition(),
		smtp.Definition(),
		twilio.Definition(),
		fcm.Definition(),
		sandbox.Definition(),
	)
}
