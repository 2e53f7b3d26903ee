package herald

import "slices"

// Channel is a channel name, as the API, templates, preferences, the workflow
// and the deliveries table spell it.
type Channel string

// The channels.
const (
	ChannelInApp Channel = "in_app"
	ChannelEmail Channel = "email"
	ChannelSMS   Channel = "sms"
	ChannelPush  Channel = "push"
)

// Channels lists every channel in its canonical order (the order a template's
// default channels and the status API use).
var Channels = []Channel{ChannelInApp, ChannelEmail, ChannelSMS, ChannelPush}

// ProviderChannels are the channels delivered through an external provider (the
// in-app inbox is Herald's own).
var ProviderChannels = []Channel{ChannelEmail, ChannelSMS, ChannelPush}

// IsChannel reports whether ch is a channel name.
func IsChannel(ch Channel) bool { return slices.Contains(Channels, ch) }

// IsProviderChannel reports whether ch is delivered through a provider.
func IsProviderChannel(ch Channel) bool { return slices.Contains(ProviderChannels, ch) }
