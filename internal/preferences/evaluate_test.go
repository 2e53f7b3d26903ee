package preferences

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/herald"
)

func boolp(b bool) *bool { return &b }

var allAddresses = map[herald.Channel]bool{herald.ChannelEmail: true, herald.ChannelSMS: true, herald.ChannelPush: true}

// 2026-03-28 23:30 in Berlin (CET): inside a 22:00–07:00 window that ends at
// 07:00 CEST on the spring-forward morning.
var berlinNight = utc(2026, 3, 28, 22, 30)
var berlinMorning = utc(2026, 3, 29, 5, 0) // 07:00 CEST

func TestEvaluate(t *testing.T) {
	quiet := &QuietHours{Start: "22:00", End: "07:00", Timezone: "Europe/Berlin"}
	all := []herald.Channel{herald.ChannelInApp, herald.ChannelEmail, herald.ChannelSMS, herald.ChannelPush}
	deliver := func(ch herald.Channel) Decision { return Decision{Channel: ch, Action: Deliver} }
	suppress := func(ch herald.Channel, r herald.Reason) Decision {
		return Decision{Channel: ch, Action: Suppress, Reason: r}
	}
	deferTo := func(ch herald.Channel, until time.Time) Decision {
		return Decision{Channel: ch, Action: Defer, Reason: herald.ReasonQuietHours, DeferUntil: until}
	}
	daytime := utc(2026, 3, 28, 12, 0)

	tests := []struct {
		name string
		in   EvalInput
		want []Decision
	}{
		{
			name: "no preferences: everything delivers",
			in:   EvalInput{Channels: all, Category: "shipping", Addresses: allAddresses, Now: daytime},
			want: []Decision{deliver("in_app"), deliver("email"), deliver("sms"), deliver("push")},
		},
		{
			name: "no address suppresses, in_app needs none",
			in:   EvalInput{Channels: all, Category: "shipping", Addresses: map[herald.Channel]bool{herald.ChannelEmail: true, herald.ChannelSMS: false}, Now: daytime},
			want: []Decision{deliver("in_app"), deliver("email"), suppress("sms", herald.ReasonNoAddress), suppress("push", herald.ReasonNoAddress)},
		},
		{
			name: "no address suppresses even critical",
			in:   EvalInput{Channels: []herald.Channel{herald.ChannelSMS, herald.ChannelEmail}, Category: "security", Critical: true, Addresses: map[herald.Channel]bool{herald.ChannelEmail: true}, Now: daytime},
			want: []Decision{suppress("sms", herald.ReasonNoAddress), deliver("email")},
		},
		{
			name: "a suppressed address suppresses its channel, even critical and inside quiet hours, before an opt-out",
			in: EvalInput{Channels: all, Category: "security", Critical: true, Addresses: allAddresses, Now: berlinNight,
				Suppressed: map[herald.Channel]bool{herald.ChannelEmail: true, herald.ChannelSMS: true},
				Prefs:      Preferences{Channels: map[herald.Channel]bool{herald.ChannelSMS: false}, QuietHours: quiet}},
			want: []Decision{deliver("in_app"), suppress("email", herald.ReasonAddressSuppressed),
				suppress("sms", herald.ReasonAddressSuppressed), deliver("push")},
		},
		{
			name: "no address wins over an opt-out",
			in: EvalInput{Channels: []herald.Channel{herald.ChannelSMS}, Category: "shipping", Now: daytime,
				Prefs: Preferences{Channels: map[herald.Channel]bool{herald.ChannelSMS: false}}},
			want: []Decision{suppress("sms", herald.ReasonNoAddress)},
		},
		{
			name: "channel opt-out",
			in: EvalInput{Channels: all, Category: "shipping", Addresses: allAddresses, Now: daytime,
				Prefs: Preferences{Channels: map[herald.Channel]bool{herald.ChannelEmail: false, herald.ChannelSMS: true}}},
			want: []Decision{deliver("in_app"), suppress("email", herald.ReasonOptedOutChannel), deliver("sms"), deliver("push")},
		},
		{
			name: "channel opt-out holds for critical",
			in: EvalInput{Channels: all, Category: "security", Critical: true, Addresses: allAddresses, Now: daytime,
				Prefs: Preferences{Channels: map[herald.Channel]bool{herald.ChannelSMS: false, herald.ChannelInApp: false}}},
			want: []Decision{suppress("in_app", herald.ReasonOptedOutChannel), deliver("email"), suppress("sms", herald.ReasonOptedOutChannel), deliver("push")},
		},
		{
			name: "category disabled",
			in: EvalInput{Channels: all, Category: "marketing", Addresses: allAddresses, Now: daytime,
				Prefs: Preferences{Categories: map[string]CategoryPref{"marketing": {Enabled: boolp(false), Channels: map[herald.Channel]bool{herald.ChannelEmail: true}}}}},
			want: []Decision{suppress("in_app", herald.ReasonOptedOutCategory), suppress("email", herald.ReasonOptedOutCategory), suppress("sms", herald.ReasonOptedOutCategory), suppress("push", herald.ReasonOptedOutCategory)},
		},
		{
			name: "category channel off",
			in: EvalInput{Channels: all, Category: "shipping", Addresses: allAddresses, Now: daytime,
				Prefs: Preferences{Categories: map[string]CategoryPref{"shipping": {Channels: map[herald.Channel]bool{herald.ChannelSMS: false}}}}},
			want: []Decision{deliver("in_app"), deliver("email"), suppress("sms", herald.ReasonOptedOutCategory), deliver("push")},
		},
		{
			name: "another category's opt-out does not apply",
			in: EvalInput{Channels: []herald.Channel{herald.ChannelEmail}, Category: "shipping", Addresses: allAddresses, Now: daytime,
				Prefs: Preferences{Categories: map[string]CategoryPref{"marketing": {Enabled: boolp(false)}}}},
			want: []Decision{deliver("email")},
		},
		{
			name: "category cannot re-enable a channel that is off globally",
			in: EvalInput{Channels: []herald.Channel{herald.ChannelEmail}, Category: "shipping", Addresses: allAddresses, Now: daytime,
				Prefs: Preferences{Channels: map[herald.Channel]bool{herald.ChannelEmail: false}, Categories: map[string]CategoryPref{"shipping": {Channels: map[herald.Channel]bool{herald.ChannelEmail: true}}}}},
			want: []Decision{suppress("email", herald.ReasonOptedOutChannel)},
		},
		{
			name: "critical bypasses category opt-outs",
			in: EvalInput{Channels: all, Category: "security", Critical: true, Addresses: allAddresses, Now: daytime,
				Prefs: Preferences{Categories: map[string]CategoryPref{"security": {Enabled: boolp(false), Channels: map[herald.Channel]bool{herald.ChannelSMS: false}}}}},
			want: []Decision{deliver("in_app"), deliver("email"), deliver("sms"), deliver("push")},
		},
		{
			name: "quiet hours defer push, sms and email until 07:00 local; in_app delivers",
			in:   EvalInput{Channels: all, Category: "shipping", Addresses: allAddresses, Now: berlinNight, Prefs: Preferences{QuietHours: quiet}},
			want: []Decision{deliver("in_app"), deferTo("email", berlinMorning), deferTo("sms", berlinMorning), deferTo("push", berlinMorning)},
		},
		{
			name: "critical bypasses quiet hours",
			in:   EvalInput{Channels: all, Category: "security", Critical: true, Addresses: allAddresses, Now: berlinNight, Prefs: Preferences{QuietHours: quiet}},
			want: []Decision{deliver("in_app"), deliver("email"), deliver("sms"), deliver("push")},
		},
		{
			name: "outside quiet hours delivers",
			in:   EvalInput{Channels: []herald.Channel{herald.ChannelPush}, Category: "shipping", Addresses: allAddresses, Now: daytime, Prefs: Preferences{QuietHours: quiet}},
			want: []Decision{deliver("push")},
		},
		{
			name: "opt-outs win over quiet hours",
			in: EvalInput{Channels: []herald.Channel{herald.ChannelEmail, herald.ChannelSMS, herald.ChannelPush}, Category: "marketing", Addresses: map[herald.Channel]bool{herald.ChannelEmail: true, herald.ChannelSMS: true}, Now: berlinNight,
				Prefs: Preferences{QuietHours: quiet, Channels: map[herald.Channel]bool{herald.ChannelEmail: false}, Categories: map[string]CategoryPref{"marketing": {Channels: map[herald.Channel]bool{herald.ChannelSMS: false}}}}},
			want: []Decision{suppress("email", herald.ReasonOptedOutChannel), suppress("sms", herald.ReasonOptedOutCategory), suppress("push", herald.ReasonNoAddress)},
		},
		{
			name: "quiet hours without a zone use the user's zone",
			in: EvalInput{Channels: []herald.Channel{herald.ChannelSMS}, Category: "shipping", Addresses: allAddresses, Now: utc(2026, 3, 8, 6, 0), UserTimezone: "America/New_York",
				Prefs: Preferences{QuietHours: &QuietHours{Start: "22:00", End: "07:00"}}},
			want: []Decision{deferTo("sms", utc(2026, 3, 8, 11, 0))}, // 07:00 EDT
		},
		{
			name: "the window's own zone beats the user's",
			in: EvalInput{Channels: []herald.Channel{herald.ChannelSMS}, Category: "shipping", Addresses: allAddresses, Now: berlinNight, UserTimezone: "America/New_York",
				Prefs: Preferences{QuietHours: quiet}},
			want: []Decision{deferTo("sms", berlinMorning)},
		},
		{
			name: "no zone anywhere means UTC",
			in: EvalInput{Channels: []herald.Channel{herald.ChannelSMS}, Category: "shipping", Addresses: allAddresses, Now: utc(2026, 3, 8, 6, 0),
				Prefs: Preferences{QuietHours: &QuietHours{Start: "22:00", End: "07:00"}}},
			want: []Decision{deferTo("sms", utc(2026, 3, 8, 7, 0))},
		},
		{
			name: "unknown window zone falls back to the user's",
			in: EvalInput{Channels: []herald.Channel{herald.ChannelSMS}, Category: "shipping", Addresses: allAddresses, Now: utc(2026, 3, 8, 6, 0), UserTimezone: "America/New_York",
				Prefs: Preferences{QuietHours: &QuietHours{Start: "22:00", End: "07:00", Timezone: "Nowhere/Atlantis"}}},
			want: []Decision{deferTo("sms", utc(2026, 3, 8, 11, 0))},
		},
		{
			name: "disabled quiet hours never defer",
			in:   EvalInput{Channels: []herald.Channel{herald.ChannelSMS}, Category: "shipping", Addresses: allAddresses, Now: berlinNight, Prefs: Preferences{QuietHours: &QuietHours{}}},
			want: []Decision{deliver("sms")},
		},
		{
			name: "duplicates decided once, order kept",
			in:   EvalInput{Channels: []herald.Channel{herald.ChannelSMS, herald.ChannelEmail, herald.ChannelSMS}, Category: "shipping", Addresses: allAddresses, Now: daytime},
			want: []Decision{deliver("sms"), deliver("email")},
		},
		{
			name: "unknown channel has no address",
			in:   EvalInput{Channels: []herald.Channel{"fax"}, Category: "shipping", Addresses: allAddresses, Now: daytime},
			want: []Decision{suppress("fax", herald.ReasonNoAddress)},
		},
		{
			name: "no channels",
			in:   EvalInput{Category: "shipping", Now: daytime},
			want: []Decision{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Evaluate(tc.in)
			if len(got) != len(tc.want) {
				t.Fatalf("Evaluate = %+v, want %+v", got, tc.want)
			}
			for i := range got {
				g, w := got[i], tc.want[i]
				if g.Channel != w.Channel || g.Action != w.Action || g.Reason != w.Reason || !g.DeferUntil.Equal(w.DeferUntil) {
					t.Errorf("decision %d = %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

// A preference change made while a notification waits for quiet hours to end
// is honoured when the workflow re-evaluates at the timer.
func TestEvaluateAfterDeferralUsesCurrentPreferences(t *testing.T) {
	prefs := Preferences{QuietHours: &QuietHours{Start: "22:00", End: "07:00", Timezone: "Europe/Berlin"}}
	in := EvalInput{Channels: []herald.Channel{herald.ChannelEmail, herald.ChannelSMS}, Category: "marketing", Addresses: allAddresses, Now: berlinNight, Prefs: prefs}
	first := Evaluate(in)
	if first[0].Action != Defer || first[1].Action != Defer {
		t.Fatalf("first evaluation = %+v, want both deferred", first)
	}
	// The timer fires at DeferUntil; meanwhile the user opted out of marketing SMS.
	in.Now = first[0].DeferUntil
	in.Prefs.Categories = map[string]CategoryPref{"marketing": {Channels: map[herald.Channel]bool{herald.ChannelSMS: false}}}
	second := Evaluate(in)
	if second[0].Action != Deliver || second[1].Action != Suppress || second[1].Reason != herald.ReasonOptedOutCategory {
		t.Fatalf("re-evaluation at %v = %+v, want email delivered and sms opted out", in.Now, second)
	}
}

func TestDecisionJSON(t *testing.T) {
	b, err := json.Marshal([]Decision{
		{Channel: "email", Action: Deliver},
		{Channel: "sms", Action: Defer, Reason: herald.ReasonQuietHours, DeferUntil: utc(2026, 3, 29, 5, 0)},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"channel":"email","action":"deliver"},{"channel":"sms","action":"defer","reason":"quiet_hours","defer_until":"2026-03-29T05:00:00Z"}]`
	if string(b) != want {
		t.Errorf("json = %s\nwant   %s", b, want)
	}
}

func TestMerge(t *testing.T) {
	tenant := Preferences{
		Channels: map[herald.Channel]bool{herald.ChannelSMS: false, herald.ChannelPush: false},
		Categories: map[string]CategoryPref{
			"marketing": {Enabled: boolp(false)},
			"shipping":  {Channels: map[herald.Channel]bool{herald.ChannelSMS: false, herald.ChannelEmail: false}},
		},
		QuietHours: &QuietHours{Start: "21:00", End: "08:00", Timezone: "Europe/Berlin"},
	}
	user := Preferences{
		Channels: map[herald.Channel]bool{herald.ChannelSMS: true, herald.ChannelEmail: false},
		Categories: map[string]CategoryPref{
			"marketing": {Enabled: boolp(true)},
			"shipping":  {Channels: map[herald.Channel]bool{herald.ChannelEmail: true}},
			"digest":    {Enabled: boolp(false)},
		},
	}
	got := Merge(tenant, user)
	want := Preferences{
		Channels: map[herald.Channel]bool{herald.ChannelSMS: true, herald.ChannelPush: false, herald.ChannelEmail: false},
		Categories: map[string]CategoryPref{
			"marketing": {Enabled: boolp(true)},
			"shipping":  {Channels: map[herald.Channel]bool{herald.ChannelSMS: false, herald.ChannelEmail: true}},
			"digest":    {Enabled: boolp(false)},
		},
		QuietHours: &QuietHours{Start: "21:00", End: "08:00", Timezone: "Europe/Berlin"},
	}
	if !reflect.DeepEqual(got, want) {
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		t.Fatalf("Merge =\n%s\nwant\n%s", gj, wj)
	}

	// The user's window replaces the tenant's whole; an empty one disables it.
	user.QuietHours = &QuietHours{Start: "23:00", End: "06:00"}
	if q := Merge(tenant, user).QuietHours; *q != (QuietHours{Start: "23:00", End: "06:00"}) {
		t.Errorf("user window: %+v", q)
	}
	user.QuietHours = &QuietHours{}
	if q := Merge(tenant, user).QuietHours; q == nil || !q.Disabled() {
		t.Errorf("disabled user window: %+v", q)
	}
	if q := Merge(Preferences{}, Preferences{}); q.Channels != nil || q.Categories != nil || q.QuietHours != nil {
		t.Errorf("empty merge = %+v", q)
	}

	// The result shares nothing with its inputs.
	merged := Merge(tenant, user)
	merged.Channels[herald.ChannelPush] = true
	merged.Categories["shipping"].Channels[herald.ChannelSMS] = true
	*merged.Categories["marketing"].Enabled = false
	merged.QuietHours.Start = "00:00"
	if tenant.Channels[herald.ChannelPush] || tenant.Categories["shipping"].Channels[herald.ChannelSMS] ||
		!*user.Categories["marketing"].Enabled || user.QuietHours.Start != "" {
		t.Error("mutating the merge result changed an input")
	}
}

func TestMergeThenEvaluate(t *testing.T) {
	tenant := Preferences{Categories: map[string]CategoryPref{"marketing": {Enabled: boolp(false)}}}
	in := EvalInput{Channels: []herald.Channel{herald.ChannelEmail}, Category: "marketing", Addresses: allAddresses, Now: utc(2026, 5, 1, 12, 0)}

	in.Prefs = Merge(tenant, Preferences{})
	if d := Evaluate(in); d[0].Reason != herald.ReasonOptedOutCategory {
		t.Errorf("tenant default opt-out: %+v", d)
	}
	in.Prefs = Merge(tenant, Preferences{Categories: map[string]CategoryPref{"marketing": {Enabled: boolp(true)}}})
	if d := Evaluate(in); d[0].Action != Deliver {
		t.Errorf("user opt-in over tenant default: %+v", d)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name  string
		prefs Preferences
		want  []string // "field: message substring", in order
	}{
		{"empty is valid", Preferences{}, nil},
		{"full valid document", Preferences{
			Channels:   map[herald.Channel]bool{"email": false, "in_app": true},
			Categories: map[string]CategoryPref{"marketing": {Enabled: boolp(false)}, "shipping": {Channels: map[herald.Channel]bool{"sms": false}}},
			QuietHours: &QuietHours{Start: "22:00", End: "07:00", Timezone: "Europe/Berlin"},
		}, nil},
		{"disabled quiet hours are valid", Preferences{QuietHours: &QuietHours{}}, nil},
		{"unknown channels, sorted", Preferences{
			Channels:   map[herald.Channel]bool{"fax": true, "email": true, "carrier_pigeon": false},
			Categories: map[string]CategoryPref{"shipping": {Channels: map[herald.Channel]bool{"telex": false}}},
		}, []string{`channels.carrier_pigeon: unknown channel "carrier_pigeon"`, `channels.fax: unknown channel "fax"`, `categories.shipping.channels.telex: unknown channel "telex"`}},
		{"bad times", Preferences{QuietHours: &QuietHours{Start: "7:00", End: "24:00"}},
			[]string{`quiet_hours.start: "7:00" is not a HH:MM time`, `quiet_hours.end: "24:00" is not a time between 00:00 and 23:59`}},
		{"bad minutes", Preferences{QuietHours: &QuietHours{Start: "22:60", End: "07:00"}}, []string{"quiet_hours.start: "}},
		{"only start", Preferences{QuietHours: &QuietHours{Start: "22:00"}}, []string{"quiet_hours: give both start and end"}},
		{"start equals end", Preferences{QuietHours: &QuietHours{Start: "22:00", End: "22:00"}}, []string{"quiet_hours.end: end equals start"}},
		{"unknown time zone", Preferences{QuietHours: &QuietHours{Start: "22:00", End: "07:00", Timezone: "Europe/Atlantis"}}, []string{`quiet_hours.timezone: unknown time zone "Europe/Atlantis"`}},
		{"Local is not allowed", Preferences{QuietHours: &QuietHours{Start: "22:00", End: "07:00", Timezone: "Local"}}, []string{"quiet_hours.timezone: time zone \"Local\" is not allowed"}},
		{"zone without a window", Preferences{QuietHours: &QuietHours{Timezone: "UTC"}}, []string{"quiet_hours: a time zone without start and end"}},
		{"empty category name", Preferences{Categories: map[string]CategoryPref{"": {}}}, []string{"categories.: category names"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.prefs.Validate()
			if len(got) != len(tc.want) {
				t.Fatalf("Validate = %v, want %d errors %v", got, len(tc.want), tc.want)
			}
			for i, e := range got {
				if !strings.HasPrefix(e.Error(), tc.want[i]) && !strings.Contains(e.Error(), tc.want[i]) {
					t.Errorf("error %d = %q, want %q", i, e.Error(), tc.want[i])
				}
			}
		})
	}
}

func TestPreferencesJSONShape(t *testing.T) {
	doc := `{"channels":{"email":false},"categories":{"marketing":{"enabled":false},"shipping":{"channels":{"sms":false}}},"quiet_hours":{"start":"22:00","end":"07:00","timezone":"Europe/Berlin"}}`
	var p Preferences
	if err := json.Unmarshal([]byte(doc), &p); err != nil {
		t.Fatal(err)
	}
	if p.Channels["email"] || p.Categories["marketing"].Enabled == nil || *p.Categories["marketing"].Enabled ||
		p.Categories["shipping"].Channels["sms"] || p.QuietHours == nil || p.QuietHours.Timezone != "Europe/Berlin" {
		t.Fatalf("decoded = %+v", p)
	}
	if errs := p.Validate(); errs != nil {
		t.Fatalf("issue example invalid: %v", errs)
	}
	out, _ := json.Marshal(p)
	if string(out) != doc {
		t.Errorf("round trip = %s\nwant         %s", out, doc)
	}
}
