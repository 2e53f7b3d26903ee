package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestHelpListsEveryModeAndItsFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	if rc := realMain([]string{"-h"}, &out, &errOut); rc != 0 {
		t.Fatalf("herald-bench -h: exit %d", rc)
	}
	help := errOut.String()
	for _, want := range []string{
		"herald-bench -campaign", "herald-bench -inbox-streams", // the modes
		"Accept flags:", "-d-n int", "-workers-after-b", // accept
		"Campaign flags", "-phase-n int", "-phases string", "-rate float", "-baseline-n int", "-critical-rate float", "-warmup int", // campaign
		"Inbox stream flags", "-streams int", "-idle-streams int", "-inbox-duration duration", // inbox streams
	} {
		if !strings.Contains(help, want) {
			t.Errorf("herald-bench -h does not mention %q:\n%s", want, help)
		}
	}
	if strings.Contains(help, "inbox-api-child") {
		t.Errorf("herald-bench -h lists the internal -inbox-api-child flag")
	}
	// Each inbox stream flag is listed once, under its own heading.
	if i, j := strings.Index(help, "Inbox stream flags"), strings.Index(help, "-idle-streams"); j < i {
		t.Errorf("-idle-streams is listed before the inbox stream heading")
	}
	if strings.Count(help, "-idle-streams int") != 1 {
		t.Errorf("-idle-streams is listed %d times", strings.Count(help, "-idle-streams int"))
	}

	errOut.Reset()
	if rc := realMain([]string{"-campaign", "-h"}, &out, &errOut); rc != 0 || !strings.Contains(errOut.String(), "-phase-n") {
		t.Fatalf("herald-bench -campaign -h: exit %d, %s", rc, errOut.String())
	}
}

func TestParseCampaignFlags(t *testing.T) {
	o, err := parseCampaignFlags(nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if o.phaseN != 10_000 || o.n != 100_000 || o.rate != 2000 || o.phases != "a,b,c,d,e,f" || o.warmup != 1000 {
		t.Fatalf("defaults: %+v", o)
	}
	for _, c := range []struct {
		args []string
		ok   bool
	}{
		{[]string{"-phase-n", "5000", "-n", "50000", "-baseline-n", "200"}, true},
		{[]string{"-n", "0", "-baseline-n", "0", "-critical-rate", "0", "-warmup", "0"}, true},
		{[]string{"-phases", "a, c,e"}, true},
		{[]string{"-n", "100000", "-small", "10000", "-baseline-n", "1000", "-critical-rate", "10"}, true}, // docs/campaigns.md's command
		{[]string{"-phases", "b", "-rate", "0"}, true},                                                     // no (f): the rate is not used
		{[]string{"-phases", "f", "-rate", "0"}, false},
		{[]string{"-phases", "a,g"}, false},
		{[]string{"-phases", "a,a"}, false},
		{[]string{"-phases", "ab"}, false},
		{[]string{"-phase-n", "0"}, false},
		{[]string{"-n", "-1"}, false},
		{[]string{"-critical-rate", "-1"}, false},
		{[]string{"extra"}, false},
	} {
		_, err := parseCampaignFlags(c.args, &bytes.Buffer{})
		if (err == nil) != c.ok {
			t.Errorf("parseCampaignFlags(%q): err %v, want ok %v", c.args, err, c.ok)
		}
	}
	if keys, _ := campaignPhaseKeys("a, c,e"); strings.Join(keys, "") != "ace" {
		t.Errorf("campaignPhaseKeys = %q", keys)
	}
}

func TestScenariosPersonalizeEveryProviderChannel(t *testing.T) {
	sc := scenarios(2000)
	if len(sc) != 6 || sc[0].key != "a" || sc[5].key != "f" || sc[5].rate != 2000 || sc[0].rate != 0 {
		t.Fatalf("scenarios: %+v", sc)
	}
	tmpls := map[string]bool{}
	for _, tm := range benchCampaignTemplates() {
		tmpls[tm.ID] = true
		if tm.ID == tmplPersonal {
			if tm.Email == nil || tm.SMS == nil || tm.Push == nil ||
				!strings.Contains(tm.Email.Subject, "{{.name}}") || !strings.Contains(tm.SMS.Text, "{{.code}}") || !strings.Contains(tm.Push.Body, "{{.code}}") {
				t.Errorf("the personalized template does not print the list data on every channel: %+v", tm)
			}
		}
	}
	for _, s := range sc {
		if !tmpls[s.template] {
			t.Errorf("%s uses template %s the bench does not create", s.key, s.template)
		}
		if s.personal != (s.template == tmplPersonal) {
			t.Errorf("%s: personal %v with template %s", s.key, s.personal, s.template)
		}
	}
	// Codes are unique and none is a prefix of another (the content check looks
	// for them as substrings).
	if _, c1 := personalData(1); strings.Contains(func() string { _, c := personalData(10); return c }(), c1) {
		t.Errorf("code of 1 (%s) is contained in the code of 10", c1)
	}
}

func TestCampaignChecks(t *testing.T) {
	rep := &CampaignReport{Phases: []CampaignPhase{
		{Key: "baseline", Name: "baseline", PerSec: 15, OursMs: 45, ActionsPer1k: 7000, PeakRSSMB: 70},
		{Key: "a", Name: "(a)", PerSec: 2000, OursMs: 0.5, ActionsPer1k: 5, PeakRSSMB: 80},
		{Key: "b", Name: "(b)", PerSec: 1200, OursMs: 0.7, PeakRSSMB: 90},
		{Key: "c", Name: "(c)", PerSec: 400, OursMs: 2, PeakRSSMB: 300, Expected: 10, Sent: 9},
		{Key: "f", Name: "(f)", PerSec: 900, RatePerSecond: 1000, Seconds: 10, DrainPerSec: 950, SteadyPerSec: 990},
		{Key: "large", Name: "large", Recipients: 100_000, PerSec: 2500, OursMs: 0.55, ActionsPer1k: 4},
		{Key: "isolation", Name: "isolation", PerSec: 1500, CriticalN: 50, CriticalP99Ms: 1200},
	}}
	campaignChecks(rep)
	find := func(prefix string) (CampaignCheck, bool) {
		for _, c := range rep.Checks {
			if strings.HasPrefix(c.Name, prefix) {
				return c, true
			}
		}
		return CampaignCheck{}, false
	}
	for _, c := range []struct {
		prefix  string
		value   float64
		verdict string
	}{
		{"(b)", 0.6, "PASS"},
		{"(c)", 0.2, "MISS"},
		{"(f) achieved recipients/s over the drain", 0.95, ""},
		{"(f) achieved recipients/s steady", 0.99, ""},
		{"flatness:", 1.1, "PASS"},
		{"critical", 1200, "MISS"},
		{"peak", 300, "MISS"},
	} {
		if g, ok := find(c.prefix); !ok || g.Value != c.value || g.Verdict != c.verdict {
			t.Errorf("check %s = %+v (present %v), want %v %q", c.prefix, g, ok, c.value, c.verdict)
		}
	}
	if p := rep.phase("large"); p.VsA != 1.25 {
		t.Errorf("large vs (a) = %v, want 1.25", p.VsA)
	}
	if p := rep.phase("isolation"); p.VsA != 0 {
		t.Errorf("isolation has a ratio to (a) (%v); its criticals are in it", p.VsA)
	}
	if p := rep.phase("f"); p.VsA != 0 {
		t.Errorf("(f) has a ratio to (a) (%v); it is paced", p.VsA)
	}
	if g, ok := find("baseline / large ours CPU"); !ok || g.Value != 81.8 || g.Verdict != "PASS" {
		t.Errorf("baseline / large CPU check = %+v, want 81.8 PASS", g)
	}
	if !strings.Contains(strings.Join(rep.Notes, "\n"), "(c): 9 of 10 deliveries sent") {
		t.Errorf("the unsent deliveries are not noted: %q", rep.Notes)
	}
	var buf bytes.Buffer
	printCampaignTable(&buf, rep)
	for _, want := range []string{"950 (steady 990) of 1000", "critical accept", "goal >= 0.5: MISS"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, buf.String())
		}
	}
}

func TestDBCostPerRecipient(t *testing.T) {
	d := &dbStats{pgss: true}
	a := dbSnap{ok: true, stmts: map[int64]stmtStat{
		1: {calls: 10, rows: 10, wal: 1000, execMs: 1, query: "SELECT 1"},
		2: {calls: 500, rows: 500, wal: 0, execMs: 50, query: "evicted"},
	}}
	b := dbSnap{ok: true, stmts: map[int64]stmtStat{
		1: {calls: 210, rows: 410, wal: 101_000, execMs: 21, query: "SELECT 1"},
		2: {calls: 100, rows: 100, wal: 0, execMs: 40, query: "evicted"}, // evicted and back
		3: {calls: 0, query: "idle"},
	}}
	c := d.cost(a, b, 100)
	if c.Source != dbSourceStatements || c.StatementsPerRcpt != 3 || c.RowsPerRcpt != 5 || c.WALBytesPerRcpt != 1000 || c.ExecMsPerRcpt != 0.6 {
		t.Fatalf("cost = %+v", c)
	}
	if len(c.Top) != 2 || c.Top[0].Query != "evicted" || c.Top[0].ExecMsPerRcpt != 0.4 || c.Top[1].CallsPerRcpt != 2 {
		t.Fatalf("top = %+v", c.Top)
	}
	if d.cost(dbSnap{}, b, 100) != nil || d.cost(a, b, 0) != nil {
		t.Fatal("a cost from a missing snapshot or no recipients")
	}
	x := (&dbStats{}).cost(dbSnap{ok: true, xacts: 100, tup: 1000}, dbSnap{ok: true, xacts: 300, tup: 1500}, 50)
	if x.Source != dbSourceDatabase || x.XactsPerRcpt != 4 || x.TupWrittenPerRcpt != 10 {
		t.Fatalf("pg_stat_database cost = %+v", x)
	}
}
