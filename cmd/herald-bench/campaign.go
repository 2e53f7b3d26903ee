package main

// herald-bench -campaign: what a campaign recipient costs in the shapes campaign
// teams send, against the same recipient sent as a single notification, in one
// run against the same PostgreSQL and Temporal (see docs/campaigns.md and the
// campaign section of docs/bench.md):
//
//	baseline   -baseline-n single notifications (in_app + sandbox email), POST
//	           /v1/notifications each, until every channel is sent
//	(a)        identical content, in_app + email: the floor
//	(b)        personalized email: each list line's data (name, code) in the
//	           subject and the body
//	(c)        personalized SMS
//	(d)        personalized push (every user has a device token)
//	(e)        personalized email + SMS + push in one campaign
//	(f)        (a)'s content with rate_per_second -rate: achieved against asked
//	large      (a)'s content to -n recipients: cost flatness, large against (a)
//	isolation  the large list again while critical notifications are submitted
//	           at -critical-rate: their accept → inbox p50 / p99
//
// Every campaign phase has users of its own, bulk-inserted just before its list
// is uploaded (streamed CSV), as a campaign team imports an audience and sends to
// it. Per phase: recipients/s from POST /v1/campaigns to "completed", CPU ms per
// recipient of this process (API + worker + bench client), the Temporal server
// and PostgreSQL, Temporal actions per 1,000 recipients (the server's `action`
// counter, HERALD_TEMPORAL_METRICS_URL), database statements, rows and WAL per
// recipient (pg_stat_statements when the cluster preloads it, else transactions
// from pg_stat_database), this process's peak RSS, the list upload's seconds per
// 10,000 lines, and whether every channel was sent with each recipient's own
// content.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/herald-notify/herald/internal/app"
	"github.com/herald-notify/herald/internal/config"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/secrets"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/templates"
)

// Goals the report checks (docs/campaigns.md, docs/bench.md).
const (
	goalVsA         = 0.5  // a personalized phase's recipients/s against (a)'s
	goalRSSMB       = 256  // peak RSS of this process
	goalFlatness    = 1.2  // large/(a) CPU per recipient
	goalCriticalP99 = 1000 // ms, critical accept → inbox while a campaign drains
	goalBaseline    = 25   // baseline/campaign CPU per recipient
)

type campaignOptions struct {
	phaseN, n, baselineN int
	warmup               int
	analyze              bool
	settleTimeout        time.Duration
	phases               string
	rate                 float64
	concurrency          int
	criticalRate         float64
	metricsURL           string
	timeout              time.Duration
	jsonOut, quiet       bool
}

// addCampaignFlags defines -campaign's flags (also listed by herald-bench -h).
func addCampaignFlags(fs *flag.FlagSet, o *campaignOptions) {
	fs.IntVar(&o.phaseN, "phase-n", 10_000, "recipients of each phase (a)–(f); each phase has users and a list of its own")
	fs.IntVar(&o.phaseN, "small", 10_000, "the old name of -phase-n ((a) was the small campaign of the flatness measure)")
	fs.StringVar(&o.phases, "phases", "a,b,c,d,e,f", "the phases to run, comma-separated: a identical in_app+email, b personalized email, c personalized SMS, d personalized push, e personalized email+SMS+push, f (a) with -rate")
	fs.Float64Var(&o.rate, "rate", 2000, "rate_per_second of phase (f) (its measure needs a phase of many seconds: -phase-n well above the rate)")
	fs.IntVar(&o.n, "n", 100_000, "recipients of the large campaign ((a)'s content: cost flatness large/(a)) and of the isolation phase; 0: no large campaign (isolation reuses (a)'s list)")
	fs.IntVar(&o.warmup, "warmup", 1000, "recipients of an unmeasured campaign of (a)'s shape before the phases, so (a) does not carry the first campaign's cold start (0: none)")
	fs.BoolVar(&o.analyze, "analyze", false, "ANALYZE users, list members and push tokens after each list upload, before the campaign (what autovacuum does within a minute or so): separates the send's own cost from the plans PostgreSQL picks on statistics that predate the import")
	fs.DurationVar(&o.settleTimeout, "settle-timeout", 30*time.Second, "before each phase, wait up to this long for this process, Temporal and PostgreSQL to go idle (the previous phase's trailing work, autovacuum)")
	fs.IntVar(&o.baselineN, "baseline-n", 1000, "single notifications of the per-recipient baseline (0: none)")
	fs.IntVar(&o.concurrency, "concurrency", 32, "concurrent POST /v1/notifications in the baseline")
	fs.Float64Var(&o.criticalRate, "critical-rate", 5, "critical notifications per second while the isolation campaign drains (0: no isolation phase)")
	fs.StringVar(&o.metricsURL, "temporal-metrics-url", os.Getenv("HERALD_TEMPORAL_METRICS_URL"), "the Temporal server's Prometheus endpoint, for its action counter (default HERALD_TEMPORAL_METRICS_URL); empty: actions not reported")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Minute, "upper bound on the whole run")
	fs.BoolVar(&o.jsonOut, "json", false, "print JSON instead of the table")
	fs.BoolVar(&o.quiet, "q", false, "no progress lines")
}

func parseCampaignFlags(args []string, stderr io.Writer) (campaignOptions, error) {
	var o campaignOptions
	fs := flag.NewFlagSet("herald-bench -campaign", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addCampaignFlags(fs, &o)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: herald-bench -campaign [flags]   (the campaign bench: docs/bench.md; herald-bench -h lists every mode)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	keys, err := campaignPhaseKeys(o.phases)
	switch {
	case err != nil:
		return o, err
	case o.phaseN < 1 || o.phaseN > 5_000_000:
		return o, errors.New("-phase-n must be between 1 and 5000000")
	case o.n < 0 || o.n > 5_000_000:
		return o, errors.New("-n must be between 0 and 5000000")
	case o.warmup < 0 || o.warmup > 1_000_000:
		return o, errors.New("-warmup must be between 0 and 1000000")
	case o.settleTimeout < 0:
		return o, errors.New("-settle-timeout must not be negative")
	case o.baselineN < 0 || o.baselineN > 100_000:
		return o, errors.New("-baseline-n must be between 0 and 100000")
	case slices.Contains(keys, "f") && (o.rate < 1 || o.rate > 100_000):
		return o, errors.New("-rate must be between 1 and 100000")
	case o.concurrency < 1 || o.concurrency > 4096:
		return o, errors.New("-concurrency must be between 1 and 4096")
	case o.criticalRate < 0 || o.criticalRate > 1000:
		return o, errors.New("-critical-rate must be between 0 and 1000")
	case o.timeout <= 0:
		return o, errors.New("-timeout must be positive")
	}
	return o, nil
}

// campaignPhaseKeys parses -phases.
func campaignPhaseKeys(s string) ([]string, error) {
	var keys []string
	for k := range strings.SplitSeq(s, ",") {
		k = strings.TrimSpace(k)
		if k == "" {
			continue
		}
		if len(k) != 1 || k[0] < 'a' || k[0] > 'f' {
			return nil, fmt.Errorf("-phases: %q is not one of a, b, c, d, e, f", k)
		}
		if slices.Contains(keys, k) {
			return nil, fmt.Errorf("-phases: %q given twice", k)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// scenario is one campaign phase's shape.
type scenario struct {
	key, name string
	template  string
	channels  []herald.Channel
	// personal: each list line carries the recipient's data (name, code) and the
	// template prints it.
	personal bool
	rate     float64
}

const (
	tmplIdentical = "bench_campaign"
	tmplPersonal  = "bench_personal"
)

// scenarios are the phases (a)–(f) in order.
func scenarios(rate float64) []scenario {
	email, sms, push := herald.ChannelEmail, herald.ChannelSMS, herald.ChannelPush
	floor := []herald.Channel{herald.ChannelInApp, email}
	return []scenario{
		{key: "a", name: "(a) identical, in_app + email", template: tmplIdentical, channels: floor},
		{key: "b", name: "(b) personalized email", template: tmplPersonal, channels: []herald.Channel{email}, personal: true},
		{key: "c", name: "(c) personalized SMS", template: tmplPersonal, channels: []herald.Channel{sms}, personal: true},
		{key: "d", name: "(d) personalized push", template: tmplPersonal, channels: []herald.Channel{push}, personal: true},
		{key: "e", name: "(e) personalized email + SMS + push", template: tmplPersonal, channels: []herald.Channel{email, sms, push}, personal: true},
		{key: "f", name: fmt.Sprintf("(f) (a) at rate_per_second %g", rate), template: tmplIdentical, channels: floor, rate: rate},
	}
}

// benchCampaignTemplates are the bench tenant's templates: the identical one of
// (a), the personalized one of (b)–(e) (plain variables only, so the email
// skeleton path can batch it) and the critical one of the isolation phase.
func benchCampaignTemplates() []templates.Template {
	return []templates.Template{
		{ID: tmplIdentical, Category: "marketing",
			InApp: &templates.InAppContent{Title: "{{.title}}", Body: "{{.body}}"},
			Email: &templates.EmailContent{Subject: "{{.title}}", Text: "{{.body}}", HTML: "<p>{{.body}}</p>"}},
		{ID: tmplPersonal, Category: "marketing",
			Email: &templates.EmailContent{Subject: "Hello {{.name}}", Text: "Hi {{.name}}, your code is {{.code}}.",
				HTML: "<p>Hi {{.name}}, your code is <b>{{.code}}</b>.</p>"},
			SMS:  &templates.SMSContent{Text: "Hi {{.name}}, your code is {{.code}}"},
			Push: &templates.PushContent{Title: "Hello {{.name}}", Body: "Your code is {{.code}}"}},
		{ID: "bench_critical", Category: "security", Critical: true, InApp: &templates.InAppContent{Title: "Code", Body: "{{.body}}"}},
	}
}

// CampaignPhase is one measured phase of -campaign.
type CampaignPhase struct {
	Key        string           `json:"key"`
	Name       string           `json:"name"`
	CampaignID string           `json:"campaign_id,omitempty"`
	Channels   []herald.Channel `json:"channels,omitempty"`
	Recipients int              `json:"recipients"`
	Seconds    float64          `json:"seconds"`
	PerSec     float64          `json:"recipients_per_sec"`
	// VsA is PerSec over phase (a)'s.
	VsA float64 `json:"recipients_per_sec_vs_a,omitempty"`
	// RatePerSecond is the campaign's rate_per_second; DrainSec the server's
	// started_at → finished_at and DrainPerSec the recipients over it.
	RatePerSecond float64 `json:"rate_per_second,omitempty"`
	DrainSec      float64 `json:"drain_sec,omitempty"`
	DrainPerSec   float64 `json:"drain_recipients_per_sec,omitempty"`
	// SteadyPerSec is the recipients written after the first batch over the
	// time from the first batch's notifications to the last's (accepted_at):
	// the rate without the campaign's start and end.
	SteadyPerSec float64   `json:"steady_recipients_per_sec,omitempty"`
	CPU          *CPUUsage `json:"cpu_ms_per_recipient"`
	OursMs       float64   `json:"ours_ms_per_recipient"`
	Actions      float64   `json:"temporal_actions"`
	ActionsPer1k float64   `json:"temporal_actions_per_1000_recipients"`
	DB           *DBCost   `json:"db,omitempty"`
	// SettleSec is how long the bench waited for the machine to go idle before
	// the phase (its users, list and campaign).
	SettleSec float64 `json:"settle_sec"`
	// PeakRSSMB covers the phase's user insert, list upload and drain.
	PeakRSSMB       float64 `json:"peak_rss_mb"`
	UploadSec       float64 `json:"list_upload_sec,omitempty"`
	UploadPer10kSec float64 `json:"list_upload_sec_per_10k_lines,omitempty"`
	// Sent counts the phase's deliveries sent or delivered, of Expected
	// (recipients × channels).
	Sent     int64 `json:"deliveries_sent"`
	Expected int64 `json:"deliveries_expected"`
	// ContentCheck: sampled recipients' sandbox messages carry their own data.
	ContentCheck  string  `json:"content_check,omitempty"`
	CriticalP50Ms float64 `json:"critical_p50_ms,omitempty"`
	CriticalP99Ms float64 `json:"critical_p99_ms,omitempty"`
	CriticalN     int     `json:"critical_n,omitempty"`
}

// CampaignCheck is one figure of the run against its goal (Verdict PASS or MISS;
// empty when it has no goal).
type CampaignCheck struct {
	Name    string  `json:"name"`
	Value   float64 `json:"value"`
	Goal    string  `json:"goal,omitempty"`
	Verdict string  `json:"verdict,omitempty"`
}

// CampaignReport is the whole -campaign run.
type CampaignReport struct {
	Command   string          `json:"command"`
	StartedAt time.Time       `json:"started_at"`
	CPUs      int             `json:"cpus"`
	PhaseN    int             `json:"phase_n"`
	N         int             `json:"n"`
	Phases    []CampaignPhase `json:"phases"`
	Checks    []CampaignCheck `json:"checks"`
	Notes     []string        `json:"notes"`
	Error     string          `json:"error,omitempty"`
}

func (r *CampaignReport) phase(key string) *CampaignPhase {
	for i := range r.Phases {
		if r.Phases[i].Key == key {
			return &r.Phases[i]
		}
	}
	return nil
}

func campaignMain(args []string, stdout, stderr io.Writer) int {
	o, err := parseCampaignFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "herald-bench -campaign:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	rep := &CampaignReport{Command: "herald-bench -campaign " + strings.Join(args, " "), StartedAt: time.Now().UTC(), CPUs: runtime.NumCPU(),
		PhaseN: o.phaseN, N: o.n}
	err = runCampaignBench(ctx, o, rep, stderr)
	campaignChecks(rep)
	if err != nil {
		rep.Error = err.Error()
	}
	return writeReport(stdout, stderr, o.jsonOut, rep, func(w io.Writer) { printCampaignTable(w, rep) }, "herald-bench -campaign", err)
}

type campaignBench struct {
	o      campaignOptions
	out    io.Writer
	cfg    config.Config
	st     *store.Store
	pool   *pgxpool.Pool
	http   *http.Client
	apiURL string
	key    string
	tenant string
	cpu    *cpuWatcher
	db     *dbStats
	rss    atomic.Int64 // peak RSS (bytes) since the last reset
}

// settle waits for this process, Temporal and PostgreSQL to go idle (see
// settleCPU) and returns the seconds it waited.
func (b *campaignBench) settle(ctx context.Context) float64 {
	took, idle := settleCPU(ctx, b.cpu, b.o.settleTimeout)
	if !idle {
		b.logf("still busy after %.1f s (-settle-timeout)", took.Seconds())
	}
	return roundTo(took.Seconds(), 1)
}

func (b *campaignBench) logf(format string, args ...any) {
	if !b.o.quiet {
		fmt.Fprintf(b.out, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
	}
}

func runCampaignBench(ctx context.Context, o campaignOptions, rep *CampaignReport, progress io.Writer) error {
	cfg, err := config.FromEnv()
	if err != nil {
		return err
	}
	b := &campaignBench{o: o, out: progress, cfg: cfg, cpu: newCPUWatcher(cfg.TemporalAddress, cfg.DatabaseURL),
		http: &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}}
	logger := slog.New(slog.NewTextHandler(progress, &slog.HandlerOptions{Level: slog.LevelError}))
	pool, tc, err := connect(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer tc.Close()
	defer pool.Close()
	b.st, b.pool = store.New(pool), pool
	b.db = newDBStats(ctx, pool)
	runID := time.Now().UTC().Format("0102T150405") + "-" + randomHex(3)
	t, key, err := b.st.CreateTenant(ctx, "campaign-bench-"+runID)
	if err != nil {
		return err
	}
	b.tenant, b.key = t.ID, key
	if err := b.st.PutTenantLimits(ctx, t.ID, store.TenantLimits{APIRatePerSecond: benchRate, APIBurst: benchBurst, AllowCritical: true}); err != nil {
		return err
	}
	for _, tm := range benchCampaignTemplates() {
		if _, err := b.st.PutTemplate(ctx, t.ID, tm); err != nil {
			return err
		}
	}
	secretsKey, err := secrets.GenerateKey()
	if err != nil {
		return err
	}
	acfg := cfg
	acfg.TaskQueue, acfg.SandboxFallback, acfg.DefaultDedupWindow = "herald-campaign-bench-"+runID, true, time.Minute
	a, err := app.New(acfg, pool, tc, app.Options{Logger: logger, SecretsKey: secretsKey})
	if err != nil {
		return err
	}
	for _, w := range a.Workers(nil) {
		if err := w.Start(); err != nil {
			return err
		}
		defer w.Stop()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	sctx, stopServe := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		_ = app.Serve(sctx, app.HTTPServer(acfg, a.Handler(), logger), ln, 5*time.Second)
		close(served)
	}()
	defer func() { stopServe(); <-served }()
	b.apiURL = "http://" + ln.Addr().String()
	go b.sampleRSS(ctx)

	crit := make([]store.User, 0, 8)
	for c := 1; c <= 8; c++ { // critical-lane users
		crit = append(crit, store.User{UserID: "crit" + strconv.Itoa(c)})
	}
	if err := b.st.InsertUsers(ctx, t.ID, crit); err != nil {
		return err
	}
	rep.Notes = append(rep.Notes,
		"CPU: bench = this process (the API and the worker, in-process as cmd/herald wires them, plus the bench client); temporal and postgres = the servers at HERALD_TEMPORAL_ADDRESS / HERALD_DATABASE_URL; ours = bench + temporal + postgres; machine includes everything else on the machine",
		"email, SMS and push go to the sandbox provider (the tenant has no credentials, the process falls back to it): one sandbox_messages row per recipient and channel",
		"each campaign phase's users are bulk-inserted (with email, phone and, for push, a device token) just before its list is uploaded and the campaign starts right after the upload"+
			map[bool]string{true: " (after ANALYZE of users, list members and push tokens: -analyze)", false: " (no ANALYZE: the statistics may predate the import, as after a team's real import)"}[o.analyze]+
			"; peak RSS is this whole process over the phase's insert, upload and drain",
		b.db.note())

	if o.baselineN > 0 {
		settle := b.settle(ctx)
		users, err := b.createUsers(ctx, "base", o.baselineN, false)
		if err != nil {
			return err
		}
		ph, err := b.baseline(ctx, users)
		ph.SettleSec = settle
		rep.Phases = append(rep.Phases, ph)
		if err != nil {
			return err
		}
	}
	if o.warmup > 0 {
		sc := scenarios(0)[0]
		sc.key, sc.name = "warmup", "warm-up (not reported)"
		if _, _, err := b.scenarioPhase(ctx, sc, o.warmup); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	keys, _ := campaignPhaseKeys(o.phases)
	lists := map[string]string{}
	for _, sc := range scenarios(o.rate) {
		if !slices.Contains(keys, sc.key) {
			continue
		}
		ph, listID, err := b.scenarioPhase(ctx, sc, o.phaseN)
		rep.Phases = append(rep.Phases, ph)
		if err != nil {
			return err
		}
		lists[sc.key] = listID
	}
	isoList, isoN := lists["a"], o.phaseN
	if o.n > 0 {
		sc := scenarios(0)[0]
		sc.key, sc.name = "large", fmt.Sprintf("large: (a) to %d", o.n)
		ph, listID, err := b.scenarioPhase(ctx, sc, o.n)
		rep.Phases = append(rep.Phases, ph)
		if err != nil {
			return err
		}
		isoList, isoN = listID, o.n
	}
	if o.criticalRate > 0 && isoList != "" {
		// Bulk lane isolation: critical notifications while a campaign drains (its
		// own phase, so the criticals' cost stays out of the campaign's).
		ph := CampaignPhase{Key: "isolation", Name: fmt.Sprintf("isolation: (a) to %d + critical at %g/s", isoN, o.criticalRate),
			Channels: scenarios(0)[0].channels, Recipients: isoN, SettleSec: b.settle(ctx)}
		runtime.GC()
		b.rss.Store(readRSS())
		err := b.campaign(ctx, &ph, scenarios(0)[0], isoList, true)
		rep.Phases = append(rep.Phases, ph)
		if err != nil {
			return err
		}
	}
	return nil
}

// campaignChecks computes the ratios to (a) and checks every goal of the phases run.
func campaignChecks(r *CampaignReport) {
	check := func(name string, v float64, goal string, pass bool) {
		c := CampaignCheck{Name: name, Value: v, Goal: goal}
		if goal != "" {
			c.Verdict = map[bool]string{true: "PASS", false: "MISS"}[pass]
		}
		r.Checks = append(r.Checks, c)
	}
	a := r.phase("a")
	for i := range r.Phases {
		p := &r.Phases[i]
		if a != nil && a.PerSec > 0 && p.Key != "baseline" && p.Key != "f" && p.Key != "a" && p.Key != "isolation" {
			p.VsA = roundTo(p.PerSec/a.PerSec, 2)
			if strings.Contains("bcde", p.Key) {
				check(p.Name+": recipients/s vs (a)", p.VsA, fmt.Sprintf(">= %g", goalVsA), p.VsA >= goalVsA)
			}
		}
	}
	if f := r.phase("f"); f != nil && f.RatePerSecond > 0 && f.Seconds > 0 {
		check(fmt.Sprintf("(f) achieved recipients/s over the drain (started → finished) / rate_per_second %g", f.RatePerSecond),
			roundTo(f.DrainPerSec/f.RatePerSecond, 2), "", false)
		if f.SteadyPerSec > 0 {
			check(fmt.Sprintf("(f) achieved recipients/s steady (first → last batch written) / rate_per_second %g", f.RatePerSecond),
				roundTo(f.SteadyPerSec/f.RatePerSecond, 2), "", false)
		}
	}
	if l := r.phase("large"); l != nil && a != nil && a.OursMs > 0 && l.OursMs > 0 {
		v := roundTo(l.OursMs/a.OursMs, 2)
		check(fmt.Sprintf("flatness: large (%d) / (a) (%d) ours CPU per recipient", l.Recipients, a.Recipients), v,
			fmt.Sprintf("<= %g", goalFlatness), v <= goalFlatness)
	}
	if base := r.phase("baseline"); base != nil {
		ref := r.phase("large")
		if ref == nil {
			ref = a
		}
		if ref != nil && ref.OursMs > 0 {
			v := roundTo(base.OursMs/ref.OursMs, 1)
			check(fmt.Sprintf("baseline / %s ours CPU per recipient", ref.Key), v, fmt.Sprintf(">= %d", goalBaseline), v >= goalBaseline)
		}
		if ref != nil && ref.ActionsPer1k > 0 {
			check(fmt.Sprintf("baseline / %s Temporal actions per recipient", ref.Key), roundTo(base.ActionsPer1k/ref.ActionsPer1k, 1), "", false)
		}
	}
	if iso := r.phase("isolation"); iso != nil && iso.CriticalN > 0 {
		check(fmt.Sprintf("critical accept → inbox p99 while a campaign drains, ms (n=%d)", iso.CriticalN), iso.CriticalP99Ms,
			fmt.Sprintf("< %d", goalCriticalP99), iso.CriticalP99Ms < goalCriticalP99)
	}
	var peak float64
	for _, p := range r.Phases {
		peak = max(peak, p.PeakRSSMB)
	}
	if peak > 0 {
		check("peak RSS of the bench process (API + worker + client), MB", peak, fmt.Sprintf("< %d", goalRSSMB), peak < goalRSSMB)
	}
	for _, p := range r.Phases {
		if p.Expected > 0 && p.Sent != p.Expected {
			r.Notes = append(r.Notes, fmt.Sprintf("%s: %d of %d deliveries sent", p.Name, p.Sent, p.Expected))
		}
		if strings.HasPrefix(p.ContentCheck, "MISMATCH") {
			r.Notes = append(r.Notes, fmt.Sprintf("%s: content check %s", p.Name, p.ContentCheck))
		}
	}
}

func printCampaignTable(w io.Writer, r *CampaignReport) {
	fmt.Fprintf(w, "herald-bench -campaign (%d CPUs) %s\n%s\n\n", r.CPUs, r.StartedAt.Format(time.RFC3339), r.Command)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\trecipients\tseconds\trecipients/s\tvs (a)\tours ms/rcpt\tbench\ttemporal\tpostgres\tstmts/rcpt\trows/rcpt\tWAL KB/rcpt\tactions/1k\tpeak RSS MB\tupload s/10k\tsent\tcritical p50/p99 ms\t")
	for _, p := range r.Phases {
		cpu := func(k string) string {
			if p.CPU == nil {
				return "-"
			}
			return strconv.FormatFloat(p.CPU.PerOpMs[k], 'f', 3, 64)
		}
		num := func(v float64, prec int) string {
			if v <= 0 {
				return "-"
			}
			return strconv.FormatFloat(v, 'f', prec, 64)
		}
		vs := num(p.VsA, 2)
		if p.RatePerSecond > 0 {
			vs = fmt.Sprintf("%.0f (steady %s) of %g", p.DrainPerSec, num(p.SteadyPerSec, 0), p.RatePerSecond)
		}
		stmts, rows, wal := "-", "-", "-"
		if d := p.DB; d != nil {
			if d.Source == dbSourceStatements {
				stmts, rows, wal = num(d.StatementsPerRcpt, 2), num(d.RowsPerRcpt, 2), num(d.WALBytesPerRcpt/1024, 2)
			} else {
				stmts = "~" + num(d.XactsPerRcpt, 2) + " xacts"
				rows = "~" + num(d.TupWrittenPerRcpt, 2)
			}
		}
		sent := "-"
		if p.Expected > 0 {
			sent = fmt.Sprintf("%.0f%%", 100*float64(p.Sent)/float64(p.Expected))
			switch {
			case strings.HasPrefix(p.ContentCheck, "ok"):
				sent += ", own data"
			case p.ContentCheck != "":
				sent += ", content MISMATCH"
			}
		}
		crit := "-"
		if p.CriticalN > 0 {
			crit = fmt.Sprintf("%.0f / %.0f (n=%d)", p.CriticalP50Ms, p.CriticalP99Ms, p.CriticalN)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%s\t%.3f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f\t%s\t%s\t%s\t\n", p.Name, p.Recipients, p.Seconds, p.PerSec, vs,
			p.OursMs, cpu("bench"), cpu("temporal"), cpu("postgres"), stmts, rows, wal, num(p.ActionsPer1k, 1), p.PeakRSSMB, num(p.UploadPer10kSec, 2), sent, crit)
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, c := range r.Checks {
		if c.Goal == "" {
			fmt.Fprintf(w, "%-80s %v\n", c.Name, c.Value)
		} else {
			fmt.Fprintf(w, "%-80s %v  (goal %s: %s)\n", c.Name, c.Value, c.Goal, c.Verdict)
		}
	}
	var top bool
	for _, p := range r.Phases {
		if p.DB == nil || len(p.DB.Top) == 0 {
			continue
		}
		if !top {
			fmt.Fprintln(w, "\nstatements that took the most time, per recipient (pg_stat_statements; exec = all statements' execution time):")
			top = true
		}
		fmt.Fprintf(w, "  %s (exec %.3f ms):\n", p.Name, p.DB.ExecMsPerRcpt)
		for _, s := range p.DB.Top[:min(3, len(p.DB.Top))] {
			fmt.Fprintf(w, "    %7.4f ms %6.3f calls %7.2f rows  %s\n", s.ExecMsPerRcpt, s.CallsPerRcpt, s.RowsPerRcpt, s.Query)
		}
	}
	if len(r.Notes) > 0 {
		fmt.Fprintln(w)
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	if r.Error != "" {
		fmt.Fprintln(w, "ERROR:", r.Error)
	}
}
