package preferences

import (
	"testing"
	"time"
)

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	return loc
}

func utc(y int, m time.Month, d, hh, mm int) time.Time {
	return time.Date(y, m, d, hh, mm, 0, 0, time.UTC)
}

func TestQuietWindowEnd(t *testing.T) {
	night := func(tz string) QuietHours { return QuietHours{Start: "22:00", End: "07:00", Timezone: tz} }
	tests := []struct {
		name      string
		q         QuietHours
		now       time.Time
		wantQuiet bool
		wantEnd   time.Time // UTC instant
		wantWall  string    // end in the window's zone, "2006-01-02 15:04 MST"
	}{
		// Europe/Berlin, spring forward 2026-03-29 02:00 CET → 03:00 CEST (01:00Z).
		{"berlin before midnight, spring-forward night", night("Europe/Berlin"), utc(2026, 3, 28, 22, 30), true, utc(2026, 3, 29, 5, 0), "2026-03-29 07:00 CEST"},
		{"berlin 01:30 CET, before the jump", night("Europe/Berlin"), utc(2026, 3, 29, 0, 30), true, utc(2026, 3, 29, 5, 0), "2026-03-29 07:00 CEST"},
		{"berlin 03:30 CEST, after the jump", night("Europe/Berlin"), utc(2026, 3, 29, 1, 30), true, utc(2026, 3, 29, 5, 0), "2026-03-29 07:00 CEST"},
		{"berlin 06:59 CEST", night("Europe/Berlin"), utc(2026, 3, 29, 4, 59), true, utc(2026, 3, 29, 5, 0), "2026-03-29 07:00 CEST"},
		{"berlin 07:00 CEST is the end, exclusive", night("Europe/Berlin"), utc(2026, 3, 29, 5, 0), false, time.Time{}, ""},
		{"berlin 21:59 CEST", night("Europe/Berlin"), utc(2026, 3, 29, 19, 59), false, time.Time{}, ""},
		{"berlin 22:00 CEST is the start, inclusive", night("Europe/Berlin"), utc(2026, 3, 29, 20, 0), true, utc(2026, 3, 30, 5, 0), "2026-03-30 07:00 CEST"},
		// Europe/Berlin, fall back 2026-10-25 03:00 CEST → 02:00 CET (01:00Z).
		{"berlin before midnight, fall-back night", night("Europe/Berlin"), utc(2026, 10, 24, 21, 0), true, utc(2026, 10, 25, 6, 0), "2026-10-25 07:00 CET"},
		{"berlin 02:30 CEST, first pass", night("Europe/Berlin"), utc(2026, 10, 25, 0, 30), true, utc(2026, 10, 25, 6, 0), "2026-10-25 07:00 CET"},
		{"berlin 02:30 CET, second pass", night("Europe/Berlin"), utc(2026, 10, 25, 1, 30), true, utc(2026, 10, 25, 6, 0), "2026-10-25 07:00 CET"},
		{"berlin 06:59 CET", night("Europe/Berlin"), utc(2026, 10, 25, 5, 59), true, utc(2026, 10, 25, 6, 0), "2026-10-25 07:00 CET"},
		{"berlin 07:00 CET", night("Europe/Berlin"), utc(2026, 10, 25, 6, 0), false, time.Time{}, ""},
		// America/New_York, spring forward 2026-03-08 02:00 EST → 03:00 EDT (07:00Z).
		{"new york 01:00 EST, spring-forward night", night("America/New_York"), utc(2026, 3, 8, 6, 0), true, utc(2026, 3, 8, 11, 0), "2026-03-08 07:00 EDT"},
		{"new york 23:00 EST the evening before", night("America/New_York"), utc(2026, 3, 8, 4, 0), true, utc(2026, 3, 8, 11, 0), "2026-03-08 07:00 EDT"},
		// America/New_York, fall back 2026-11-01 02:00 EDT → 01:00 EST (06:00Z).
		{"new york 01:30 EDT, first pass", night("America/New_York"), utc(2026, 11, 1, 5, 30), true, utc(2026, 11, 1, 12, 0), "2026-11-01 07:00 EST"},
		{"new york 01:30 EST, second pass", night("America/New_York"), utc(2026, 11, 1, 6, 30), true, utc(2026, 11, 1, 12, 0), "2026-11-01 07:00 EST"},
		{"new york 07:00 EST", night("America/New_York"), utc(2026, 11, 1, 12, 0), false, time.Time{}, ""},

		// Window ends inside the spring-forward gap: ends at the jump (03:00 local).
		{"berlin end 02:30 in the gap", QuietHours{Start: "22:00", End: "02:30", Timezone: "Europe/Berlin"}, utc(2026, 3, 29, 0, 45), true, utc(2026, 3, 29, 1, 0), "2026-03-29 03:00 CEST"},
		{"berlin end 02:30, at the jump", QuietHours{Start: "22:00", End: "02:30", Timezone: "Europe/Berlin"}, utc(2026, 3, 29, 1, 0), false, time.Time{}, ""},
		{"new york end 02:30 in the gap", QuietHours{Start: "22:00", End: "02:30", Timezone: "America/New_York"}, utc(2026, 3, 8, 6, 45), true, utc(2026, 3, 8, 7, 0), "2026-03-08 03:00 EDT"},
		// Window starts inside the gap: starts at the jump.
		{"berlin start 02:30, 01:59 CET not yet", QuietHours{Start: "02:30", End: "06:00", Timezone: "Europe/Berlin"}, utc(2026, 3, 29, 0, 59), false, time.Time{}, ""},
		{"berlin start 02:30, 03:00 CEST quiet", QuietHours{Start: "02:30", End: "06:00", Timezone: "Europe/Berlin"}, utc(2026, 3, 29, 1, 0), true, utc(2026, 3, 29, 4, 0), "2026-03-29 06:00 CEST"},
		{"new york start 02:30, 01:59 EST not yet", QuietHours{Start: "02:30", End: "06:00", Timezone: "America/New_York"}, utc(2026, 3, 8, 6, 59), false, time.Time{}, ""},
		{"new york start 02:30, 03:00 EDT quiet", QuietHours{Start: "02:30", End: "06:00", Timezone: "America/New_York"}, utc(2026, 3, 8, 7, 0), true, utc(2026, 3, 8, 10, 0), "2026-03-08 06:00 EDT"},
		// A window lying wholly inside the gap is empty that night.
		{"window inside the gap, before", QuietHours{Start: "02:10", End: "02:50", Timezone: "Europe/Berlin"}, utc(2026, 3, 29, 0, 59), false, time.Time{}, ""},
		{"window inside the gap, after", QuietHours{Start: "02:10", End: "02:50", Timezone: "Europe/Berlin"}, utc(2026, 3, 29, 1, 0), false, time.Time{}, ""},
		{"window inside the gap, a normal night", QuietHours{Start: "02:10", End: "02:50", Timezone: "Europe/Berlin"}, utc(2026, 3, 30, 0, 30), true, utc(2026, 3, 30, 0, 50), "2026-03-30 02:50 CEST"},
		// Ambiguous start on the fall-back night: the first 01:30 starts it.
		{"berlin start 02:30, first pass", QuietHours{Start: "02:30", End: "05:00", Timezone: "Europe/Berlin"}, utc(2026, 10, 25, 0, 45), true, utc(2026, 10, 25, 4, 0), "2026-10-25 05:00 CET"},
		{"new york start 01:30, first pass", QuietHours{Start: "01:30", End: "05:00", Timezone: "America/New_York"}, utc(2026, 11, 1, 5, 45), true, utc(2026, 11, 1, 10, 0), "2026-11-01 05:00 EST"},

		// Same-day windows.
		{"same day inside", QuietHours{Start: "13:00", End: "14:00", Timezone: "Europe/Berlin"}, utc(2026, 7, 1, 11, 30), true, utc(2026, 7, 1, 12, 0), "2026-07-01 14:00 CEST"},
		{"same day before", QuietHours{Start: "13:00", End: "14:00", Timezone: "Europe/Berlin"}, utc(2026, 7, 1, 10, 59), false, time.Time{}, ""},
		{"same day at end", QuietHours{Start: "13:00", End: "14:00", Timezone: "Europe/Berlin"}, utc(2026, 7, 1, 12, 0), false, time.Time{}, ""},
		{"same day, an evening outside", QuietHours{Start: "13:00", End: "14:00", Timezone: "Europe/Berlin"}, utc(2026, 7, 1, 21, 0), false, time.Time{}, ""},

		// Calendar edges, UTC when no zone.
		{"new year's eve", night(""), utc(2026, 12, 31, 23, 0), true, utc(2027, 1, 1, 7, 0), "2027-01-01 07:00 UTC"},
		{"early on the 1st of march", night(""), utc(2026, 3, 1, 3, 0), true, utc(2026, 3, 1, 7, 0), "2026-03-01 07:00 UTC"},
		// The same instant is quiet in one zone and not in another.
		{"tokyo morning is not quiet", night("Asia/Tokyo"), utc(2026, 3, 1, 3, 0), false, time.Time{}, ""},

		// Never quiet.
		{"disabled", QuietHours{}, utc(2026, 3, 1, 3, 0), false, time.Time{}, ""},
		{"unknown zone", night("Mars/Olympus"), utc(2026, 3, 1, 3, 0), false, time.Time{}, ""},
		{"bad time", QuietHours{Start: "10pm", End: "07:00"}, utc(2026, 3, 1, 3, 0), false, time.Time{}, ""},
		{"start equals end", QuietHours{Start: "07:00", End: "07:00"}, utc(2026, 3, 1, 7, 0), false, time.Time{}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			quiet, end := QuietWindowEnd(tc.q, tc.now)
			if quiet != tc.wantQuiet {
				t.Fatalf("inQuiet = %v, want %v (end %v)", quiet, tc.wantQuiet, end)
			}
			if !end.Equal(tc.wantEnd) {
				t.Errorf("end = %v (%v), want %v", end, end.UTC(), tc.wantEnd)
			}
			if tc.wantWall != "" {
				if got := end.Format("2006-01-02 15:04 MST"); got != tc.wantWall {
					t.Errorf("end wall clock = %q, want %q", got, tc.wantWall)
				}
			}
		})
	}
}

// TestQuietWindowEndSweepsDSTNights checks every few minutes across DST
// nights that QuietWindowEnd agrees with the local wall clock: quiet exactly
// when the local time is in [22:00, 07:00), and the end then reads 07:00
// local on the right day, after now.
func TestQuietWindowEndSweepsDSTNights(t *testing.T) {
	nights := []struct {
		tz   string
		from time.Time
	}{
		{"Europe/Berlin", utc(2026, 3, 28, 12, 0)},
		{"Europe/Berlin", utc(2026, 10, 24, 12, 0)},
		{"America/New_York", utc(2026, 3, 7, 12, 0)},
		{"America/New_York", utc(2026, 10, 31, 12, 0)},
		{"Australia/Lord_Howe", utc(2026, 4, 4, 0, 0)}, // a 30-minute DST shift
	}
	for _, n := range nights {
		loc := mustLoc(t, n.tz)
		q := QuietHours{Start: "22:00", End: "07:00", Timezone: n.tz}
		for now := n.from; now.Before(n.from.Add(48 * time.Hour)); now = now.Add(7 * time.Minute) {
			local := now.In(loc)
			mins := local.Hour()*60 + local.Minute()
			want := mins >= 22*60 || mins < 7*60
			quiet, end := QuietWindowEnd(q, now)
			if quiet != want {
				t.Fatalf("%s %v (local %v): inQuiet = %v, want %v", n.tz, now, local, quiet, want)
			}
			if !quiet {
				continue
			}
			le := end.In(loc)
			wantDay := local
			if mins >= 22*60 {
				wantDay = local.AddDate(0, 0, 1)
			}
			if le.Hour() != 7 || le.Minute() != 0 || le.Day() != wantDay.Day() || !end.After(now) {
				t.Fatalf("%s %v (local %v): end = %v, want 07:00 local on day %d", n.tz, now, local, le, wantDay.Day())
			}
			if end.Sub(now) > 11*time.Hour {
				t.Fatalf("%s %v: wait %v is longer than any night", n.tz, now, end.Sub(now))
			}
		}
	}
}
