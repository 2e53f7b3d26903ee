// Package preferences holds a user's notification preferences (per-channel
// and per-category opt-outs, quiet hours), merges them over tenant defaults
// and decides, per channel, whether a notification is delivered now,
// suppressed (and why) or deferred until quiet hours end.
//
// The package is pure and deterministic: no database, no clock (callers pass
// now), no goroutines, and outputs never depend on map iteration order, so
// Evaluate and QuietWindowEnd can be called from Temporal workflow code.
// Time zones are loaded with time.LoadLocation, i.e. from the worker's tz
// database (or Go's embedded copy when built with time/tzdata).
//
// Evaluate runs before any template is rendered, so a suppressed channel
// costs no rendering work and its content never exists in logs.
package preferences

import (
	"fmt"
	"slices"
	"strings"

	"github.com/herald-notify/herald/internal/herald"
)

// Preferences is a preference document, for a user or as tenant-wide
// defaults:
//
//	{"channels": {"email": false},
//	 "categories": {"marketing": {"enabled": false},
//	                "shipping": {"channels": {"sms": false}}},
//	 "quiet_hours": {"start": "22:00", "end": "07:00", "timezone": "Europe/Berlin"}}
//
// Absent keys mean "no opinion": everything is on unless turned off, and a
// user document inherits every key it does not set from the tenant defaults
// (see Merge).
type Preferences struct {
	// Channels turns whole channels on (true) or off (false).
	Channels map[herald.Channel]bool `json:"channels,omitempty"`
	// Categories holds per-category choices, keyed by template category.
	Categories map[string]CategoryPref `json:"categories,omitempty"`
	// QuietHours, when set, is the user's quiet window; an empty window
	// ({"start":"","end":""}) explicitly means none.
	QuietHours *QuietHours `json:"quiet_hours,omitempty"`
}

// CategoryPref is the choice for one category: Enabled false turns the whole
// category off; Channels turns the category off (or back on) per channel.
type CategoryPref struct {
	Enabled  *bool                   `json:"enabled,omitempty"`
	Channels map[herald.Channel]bool `json:"channels,omitempty"`
}

// FieldError is one problem found by Validate; Field is a JSON path such as
// "channels.fax", "categories.marketing.channels.fax" or "quiet_hours.start".
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (e FieldError) Error() string { return e.Field + ": " + e.Message }

// MaxCategories caps the categories of one document.
const MaxCategories = 200

// Validate checks a preference document before it is saved and returns every
// problem, in a deterministic order (nil when valid): unknown channel names
// (anything but in_app, email, sms, push), empty or overlong category names,
// more than MaxCategories categories, and quiet hours that are not "HH:MM",
// have only one of start/end, have start == end (use an empty window to
// disable quiet hours), or name an unknown (or the machine-dependent "Local")
// time zone.
func (p Preferences) Validate() []FieldError {
	var errs []FieldError
	for _, ch := range sortedKeys(p.Channels) {
		if !herald.IsChannel(ch) {
			errs = append(errs, unknownChannel("channels."+string(ch), ch))
		}
	}
	if len(p.Categories) > MaxCategories {
		errs = append(errs, FieldError{Field: "categories", Message: fmt.Sprintf("at most %d categories", MaxCategories)})
	}
	for _, cat := range sortedKeys(p.Categories) {
		if strings.TrimSpace(cat) == "" || len(cat) > 64 {
			errs = append(errs, FieldError{Field: "categories." + cat, Message: "category names must be 1 to 64 characters"})
		}
		for _, ch := range sortedKeys(p.Categories[cat].Channels) {
			if !herald.IsChannel(ch) {
				errs = append(errs, unknownChannel("categories."+cat+".channels."+string(ch), ch))
			}
		}
	}
	if q := p.QuietHours; q != nil {
		switch {
		case q.Disabled():
			if q.Timezone != "" {
				errs = append(errs, FieldError{Field: "quiet_hours", Message: "a time zone without start and end; give both, or neither to disable quiet hours"})
			}
		case q.Start == "" || q.End == "":
			errs = append(errs, FieldError{Field: "quiet_hours", Message: "give both start and end, or neither to disable quiet hours"})
		default:
			s, err := parseHHMM(q.Start)
			if err != nil {
				errs = append(errs, FieldError{Field: "quiet_hours.start", Message: err.Error()})
			}
			e, err2 := parseHHMM(q.End)
			if err2 != nil {
				errs = append(errs, FieldError{Field: "quiet_hours.end", Message: err2.Error()})
			}
			if err == nil && err2 == nil && s == e {
				errs = append(errs, FieldError{Field: "quiet_hours.end", Message: "end equals start; give different times, or neither to disable quiet hours"})
			}
		}
		if q.Timezone != "" {
			if _, err := loadLocation(q.Timezone); err != nil {
				errs = append(errs, FieldError{Field: "quiet_hours.timezone", Message: err.Error()})
			}
		}
	}
	return errs
}

func unknownChannel(field string, ch herald.Channel) FieldError {
	return FieldError{Field: field, Message: fmt.Sprintf("unknown channel %q (channels are in_app, email, sms, push)", ch)}
}

// Merge returns the effective preferences of a user: user over tenant
// defaults, key by key. A channel or category-channel switch the user sets
// wins, others come from the tenant; a category's Enabled comes from the
// user when set; quiet hours are taken whole from the user when set
// (including the empty "none" window), else from the tenant — a window is
// never assembled from a user's start and a tenant's end. The result shares
// no maps or pointers with its inputs.
func Merge(tenantDefaults, user Preferences) Preferences {
	out := Preferences{
		Channels: mergeBools(tenantDefaults.Channels, user.Channels),
	}
	if len(tenantDefaults.Categories)+len(user.Categories) > 0 {
		out.Categories = make(map[string]CategoryPref, len(tenantDefaults.Categories)+len(user.Categories))
		for cat, t := range tenantDefaults.Categories {
			out.Categories[cat] = CategoryPref{Enabled: copyBool(t.Enabled), Channels: mergeBools(t.Channels, nil)}
		}
		for cat, u := range user.Categories {
			merged := out.Categories[cat]
			if u.Enabled != nil {
				merged.Enabled = copyBool(u.Enabled)
			}
			merged.Channels = mergeBools(merged.Channels, u.Channels)
			out.Categories[cat] = merged
		}
	}
	switch {
	case user.QuietHours != nil:
		q := *user.QuietHours
		out.QuietHours = &q
	case tenantDefaults.QuietHours != nil:
		q := *tenantDefaults.QuietHours
		out.QuietHours = &q
	}
	return out
}

func mergeBools(base, over map[herald.Channel]bool) map[herald.Channel]bool {
	if len(base)+len(over) == 0 {
		return nil
	}
	out := make(map[herald.Channel]bool, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

func copyBool(b *bool) *bool {
	if b == nil {
		return nil
	}
	v := *b
	return &v
}

func sortedKeys[K ~string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
