package preferences

import (
	"fmt"
	"strings"
	"time"
)

// QuietHours is a daily window, in wall-clock time of Timezone, during which
// non-critical push, SMS and email wait. Start and End are "HH:MM" (24-hour,
// 00:00–23:59). A window with End before Start crosses midnight (22:00–07:00);
// otherwise it lies within one day (13:00–14:00). The window includes Start
// and excludes End.
//
// Timezone is an IANA zone ("Europe/Berlin"); when empty, Evaluate uses the
// user's time zone and then UTC.
//
// An empty window ({"start": "", "end": ""}) means "no quiet hours": in a
// user's preferences it overrides the tenant default window (a null or absent
// quiet_hours inherits it).
type QuietHours struct {
	Start    string `json:"start"`
	End      string `json:"end"`
	Timezone string `json:"timezone,omitempty"`
}

// Disabled reports whether q is the explicit "no quiet hours" value.
func (q QuietHours) Disabled() bool { return q.Start == "" && q.End == "" }

// parseHHMM parses "HH:MM" strictly (two digits each) into minutes after
// midnight.
func parseHHMM(s string) (int, error) {
	if len(s) != 5 || s[2] != ':' || !isDigits(s[:2]) || !isDigits(s[3:]) {
		return 0, fmt.Errorf("%q is not a HH:MM time", s)
	}
	h := int(s[0]-'0')*10 + int(s[1]-'0')
	m := int(s[3]-'0')*10 + int(s[4]-'0')
	if h > 23 || m > 59 {
		return 0, fmt.Errorf("%q is not a time between 00:00 and 23:59", s)
	}
	return h*60 + m, nil
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// loadLocation loads an IANA zone, refusing "Local" (machine-dependent, so
// not deterministic across workers).
func loadLocation(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	if strings.EqualFold(name, "Local") {
		return nil, fmt.Errorf("time zone %q is not allowed; use an IANA name such as Europe/Berlin", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q", name)
	}
	return loc, nil
}

// QuietWindowEnd reports whether now lies inside q's quiet window and, if
// so, when that window ends: the instant at which the wall clock in q's time
// zone reaches End (returned in that zone). A Temporal timer for
// end.Sub(now) wakes the notification exactly at the end of the window.
//
// The zone is q.Timezone, UTC when empty. A q that does not parse (see
// Preferences.Validate), an unknown zone or a disabled window is never quiet:
// (false, time.Time{}).
//
// Times are wall-clock times, so the window stays "22:00–07:00 local" across
// DST changes: on a spring-forward night it is an hour shorter in absolute
// time and on a fall-back night an hour longer. Wall times that do not exist
// or exist twice are resolved as "the first instant at which the wall clock
// reads at least that time":
//
//   - in a DST gap (02:30 on the spring-forward night in Europe/Berlin or
//     America/New_York) the time resolves to the transition instant, when
//     the clock jumps to 03:00 — so a window ending at 02:30 ends at 03:00
//     local, and a window lying entirely inside the gap is empty that night;
//   - in a DST overlap (01:30 on the fall-back night in New York, 02:30 in
//     Berlin) the time resolves to its first occurrence (the summer-time
//     one).
//
// (time.Date leaves both cases unspecified — it normalises a gap time forward
// in Berlin but backward in New York — hence the explicit rule.)
func QuietWindowEnd(q QuietHours, now time.Time) (inQuiet bool, end time.Time) {
	loc, err := loadLocation(q.Timezone)
	if err != nil {
		return false, time.Time{}
	}
	return quietWindowEnd(q, loc, now)
}

func quietWindowEnd(q QuietHours, loc *time.Location, now time.Time) (bool, time.Time) {
	if q.Disabled() {
		return false, time.Time{}
	}
	start, err1 := parseHHMM(q.Start)
	stop, err2 := parseHHMM(q.End)
	if err1 != nil || err2 != nil || start == stop {
		return false, time.Time{}
	}
	crosses := stop < start
	local := now.In(loc)
	y, m, d := local.Date()
	// The window that could contain now started today or, if it crosses
	// midnight, yesterday.
	for _, dayOffset := range []int{-1, 0} {
		if dayOffset == -1 && !crosses {
			continue
		}
		sy, sm, sd := civilDate(y, m, d+dayOffset)
		ws := wallInstant(sy, sm, sd, start/60, start%60, loc)
		ey, em, ed := sy, sm, sd
		if crosses {
			ey, em, ed = civilDate(sy, sm, sd+1)
		}
		we := wallInstant(ey, em, ed, stop/60, stop%60, loc)
		if !now.Before(ws) && now.Before(we) {
			return true, we
		}
	}
	return false, time.Time{}
}

// civilDate normalises a calendar date (d may be 0 or past the month's end).
func civilDate(y int, m time.Month, d int) (int, time.Month, int) {
	return time.Date(y, m, d, 12, 0, 0, 0, time.UTC).Date()
}

// wallInstant is the first instant at which the wall clock in loc reads at
// least y-m-d hh:mm (see QuietWindowEnd for why this is spelled out).
func wallInstant(y int, m time.Month, d, hh, mm int, loc *time.Location) time.Time {
	t0 := time.Date(y, m, d, hh, mm, 0, 0, loc)
	wall := time.Date(y, m, d, hh, mm, 0, 0, time.UTC) // the wall time as if it were UTC
	// Candidate UTC offsets: those in effect around the date. A wall time maps
	// to the instant wall-offset for every offset that is actually in effect
	// at that instant.
	var offsets []int
	for _, probe := range []time.Time{t0.Add(-24 * time.Hour), t0, t0.Add(24 * time.Hour)} {
		_, off := probe.Zone()
		if !containsInt(offsets, off) {
			offsets = append(offsets, off)
		}
	}
	var best time.Time
	found := false
	for _, off := range offsets {
		inst := wall.Add(-time.Duration(off) * time.Second)
		if _, actual := inst.In(loc).Zone(); actual == off {
			if !found || inst.Before(best) {
				best, found = inst, true
			}
		}
	}
	if found {
		return best.In(loc)
	}
	// A gap: no offset gives this wall time. Under the smallest offset (the
	// one before the clocks jumped) the instant lies after the jump; the zone
	// period it falls in started at the transition.
	minOff := offsets[0]
	for _, off := range offsets[1:] {
		if off < minOff {
			minOff = off
		}
	}
	after := wall.Add(-time.Duration(minOff) * time.Second).In(loc)
	transition, _ := after.ZoneBounds()
	if transition.IsZero() {
		return t0
	}
	return transition.In(loc)
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
