package herald

import "slices"

// Channel names, as the API, templates, preferences, the workflow and the
// deliveries table spell them.
const (
	ChannelInApp = "in_app"
	ChannelEmail = "email"
	ChannelSMS   = "sms"
	ChannelPush  = "push"
)

// Channels lists every channel in its canonical order (the order a template's
// default channels and the status API use).
var Channels = []string{ChannelInApp, ChannelEmail, ChannelSMS, ChannelPush}

// ProviderChannels are the channels delivered through an external provider (the
// in-app inbox is Herald's own).
var ProviderChannels = []string{ChannelEmail, ChannelSMS, ChannelPush}

// IsChannel reports whether ch is a channel name.
func IsChannel(ch string) bool { return slices.Contains(Channels, ch) }

// IsProviderChannel reports whether ch is delivered through a provider.
func IsProviderChannel(ch string) bool { return slices.Contains(ProviderChannels, ch) }
