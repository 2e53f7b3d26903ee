package preferences

import (
	"time"

	"github.com/herald-notify/herald/internal/herald"
)

// Action is what to do with one channel of a notification.
type Action string

const (
	// Deliver: render and send now.
	Deliver Action = "deliver"
	// Suppress: do not send; Reason says why (the channel's status becomes
	// "suppressed" with that reason).
	Suppress Action = "suppress"
	// Defer: wait until DeferUntil (a Temporal timer), then call Evaluate
	// again with the preferences as they are then — a change made during the
	// wait is honoured.
	Defer Action = "defer"
)

// Decision is the verdict for one channel. Reason is empty for Deliver;
// DeferUntil is set only for Defer (the end of the quiet window, in the
// window's time zone).
type Decision struct {
	Channel    herald.Channel `json:"channel"`
	Action     Action         `json:"action"`
	Reason     herald.Reason  `json:"reason,omitempty"`
	DeferUntil time.Time      `json:"defer_until,omitzero"`
}

// EvalInput is everything Evaluate needs; it is plain data so a workflow can
// build it from activity results.
type EvalInput struct {
	// Channels to decide on, in the order the decisions are wanted;
	// duplicates are decided once (first occurrence).
	Channels []herald.Channel
	// Category and Critical come from the template.
	Category string
	Critical bool
	// Prefs are the effective preferences: Merge(tenantDefaults, user).
	Prefs Preferences
	// Addresses tells, per channel, whether the user has an address for it
	// (an email address, a phone number, a push token). in_app needs none:
	// every user has an inbox, so it is always addressable.
	Addresses map[herald.Channel]bool
	// Suppressed tells, per channel, whether the user's address for it is on
	// the tenant's suppression list (store.SuppressedChannels).
	Suppressed map[herald.Channel]bool
	// Now is the evaluation instant (workflow.Now in a workflow).
	Now time.Time
	// UserTimezone is the user's IANA zone, used for quiet hours that name
	// none; UTC when empty or unknown.
	UserTimezone string
}

// Evaluate decides, for each channel of in.Channels in order, whether to
// deliver, suppress or defer. Rules, first match wins:
//
//  1. No address for the channel → Suppress no_address. Always, even for
//     critical notifications: there is nowhere to send.
//  2. The channel's address is on the tenant's suppression list (a hard
//     bounce, a spam report, an SMS STOP, …) → Suppress address_suppressed.
//     Critical notifications too: the recipient or their provider refused
//     the address, and ignoring an SMS STOP is unlawful in many countries.
//  3. The channel is turned off (Prefs.Channels[ch] == false) → Suppress
//     opted_out_channel. Critical notifications honour this too: Herald
//     lets critical bypass category opt-outs, caps and quiet hours only
//     (docs/design.md, "Templates, preferences, quiet hours, caps"), and
//     a whole-channel opt-out is the user's (for SMS often the legally
//     binding, STOP-style) "never contact me here" — so a password reset goes
//     out on the channels the user still accepts (in_app, typically) rather
//     than overriding it.
//  4. The category is disabled (Categories[cat].Enabled == false) or the
//     channel is off for the category (Categories[cat].Channels[ch] == false)
//     → Suppress opted_out_category, unless critical. A category switch
//     cannot turn back on a channel that is off globally (rule 3 comes
//     first), and Enabled false turns the whole category off whatever its
//     Channels say.
//  5. Non-critical push, SMS or email while now is inside quiet hours →
//     Defer quiet_hours until the window ends (QuietWindowEnd). In-app is
//     never deferred: it is silent and waits in the inbox anyway.
//  6. Otherwise Deliver.
//
// Quiet hours use Prefs.QuietHours.Timezone, else in.UserTimezone, else UTC
// (an unknown zone falls through to the next one). Caps are not evaluated
// here (see herald.ReasonCapExceeded). Evaluate is deterministic and reads no clock.
func Evaluate(in EvalInput) []Decision {
	cat, hasCat := in.Prefs.Categories[in.Category]
	if in.Category == "" {
		hasCat = false
	}
	quietEnd, inQuiet := time.Time{}, false
	if q := in.Prefs.QuietHours; q != nil && !in.Critical {
		inQuiet, quietEnd = quietWindowEnd(*q, quietLocation(q.Timezone, in.UserTimezone), in.Now)
	}

	seen := make(map[herald.Channel]bool, len(in.Channels))
	out := make([]Decision, 0, len(in.Channels))
	for _, ch := range in.Channels {
		if seen[ch] {
			continue
		}
		seen[ch] = true
		d := Decision{Channel: ch, Action: Deliver}
		switch {
		case ch != herald.ChannelInApp && !in.Addresses[ch]:
			d.Action, d.Reason = Suppress, herald.ReasonNoAddress
		case in.Suppressed[ch]:
			d.Action, d.Reason = Suppress, herald.ReasonAddressSuppressed
		case isOff(in.Prefs.Channels, ch):
			d.Action, d.Reason = Suppress, herald.ReasonOptedOutChannel
		case !in.Critical && hasCat && (isFalse(cat.Enabled) || isOff(cat.Channels, ch)):
			d.Action, d.Reason = Suppress, herald.ReasonOptedOutCategory
		case inQuiet && (ch == herald.ChannelPush || ch == herald.ChannelSMS || ch == herald.ChannelEmail):
			// in.Critical is false here: quiet hours are not computed for
			// critical notifications.
			d.Action, d.Reason, d.DeferUntil = Defer, herald.ReasonQuietHours, quietEnd
		}
		out = append(out, d)
	}
	return out
}

// quietLocation picks the quiet-hours zone: the window's own, else the
// user's, else UTC; an unknown or disallowed zone falls through.
func quietLocation(windowTZ, userTZ string) *time.Location {
	for _, name := range []string{windowTZ, userTZ} {
		if name == "" {
			continue
		}
		if loc, err := loadLocation(name); err == nil {
			return loc
		}
	}
	return time.UTC
}

func isOff(m map[herald.Channel]bool, ch herald.Channel) bool {
	v, ok := m[ch]
	return ok && !v
}

func isFalse(b *bool) bool { return b != nil && !*b }
