package main

// herald-bench -campaign: the cost of a recipient sent by a campaign against the
// same recipient sent as a single notification, in one run against the same
// PostgreSQL and Temporal (see docs/campaigns.md):
//
//	baseline   -baseline-n single notifications (in_app + sandbox email), POST
//	           /v1/notifications each, until every channel is sent
//	campaign   a campaign to the first -small recipients (a streamed list), then
//	           one to all -n recipients, until completed; while the large one
//	           drains, critical notifications are submitted at -critical-rate and
//	           their accept → inbox latency measured (bulk lane isolation)
//
// Per phase: recipients/s end to end, CPU ms per recipient of this process (API
// + worker + bench client), the Temporal server and PostgreSQL, Temporal
// actions per 1,000 recipients (the server's own `action` counter from its
// Prometheus endpoint, HERALD_TEMPORAL_METRICS_URL), and this process's peak RSS.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
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

type campaignOptions struct {
	n, small, baselineN int
	concurrency         int
	criticalRate        float64
	metricsURL          string
	timeout             time.Duration
	jsonOut, quiet      bool
}

// CampaignPhase is one measured phase of -campaign.
type CampaignPhase struct {
	Name          string    `json:"name"`
	Recipients    int       `json:"recipients"`
	Seconds       float64   `json:"seconds"`
	PerSec        float64   `json:"recipients_per_sec"`
	CPU           *CPUUsage `json:"cpu_ms_per_recipient"`
	OursMs        float64   `json:"ours_ms_per_recipient"`
	Actions       float64   `json:"temporal_actions"`
	ActionsPer1k  float64   `json:"temporal_actions_per_1000_recipients"`
	PeakRSSMB     float64   `json:"peak_rss_mb"`
	CriticalP50Ms float64   `json:"critical_p50_ms,omitempty"`
	CriticalP99Ms float64   `json:"critical_p99_ms,omitempty"`
	CriticalN     int       `json:"critical_n,omitempty"`
}

// CampaignReport is the whole -campaign run.
type CampaignReport struct {
	Command   string             `json:"command"`
	StartedAt time.Time          `json:"started_at"`
	CPUs      int                `json:"cpus"`
	Phases    []CampaignPhase    `json:"phases"`
	Ratios    map[string]float64 `json:"ratios"`
	Notes     []string           `json:"notes"`
	Error     string             `json:"error,omitempty"`
}

func campaignMain(args []string, stdout, stderr io.Writer) int {
	var o campaignOptions
	fs := flag.NewFlagSet("herald-bench -campaign", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.n, "n", 100_000, "recipients of the large campaign")
	fs.IntVar(&o.small, "small", 10_000, "recipients of the small campaign (cost flatness: small vs large)")
	fs.IntVar(&o.baselineN, "baseline-n", 1000, "single notifications of the per-recipient baseline")
	fs.IntVar(&o.concurrency, "concurrency", 32, "concurrent POST /v1/notifications in the baseline")
	fs.Float64Var(&o.criticalRate, "critical-rate", 5, "critical notifications per second while the large campaign drains (0: none)")
	fs.StringVar(&o.metricsURL, "temporal-metrics-url", os.Getenv("HERALD_TEMPORAL_METRICS_URL"), "the Temporal server's Prometheus endpoint (its `action` counter); empty: actions not reported")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Minute, "upper bound on the whole run")
	fs.BoolVar(&o.jsonOut, "json", false, "print JSON instead of the table")
	fs.BoolVar(&o.quiet, "q", false, "no progress lines")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if o.n < 1 || o.small < 1 || o.small > o.n || o.baselineN < 1 || o.n > 5_000_000 {
		fmt.Fprintln(stderr, "herald-bench -campaign: need 1 <= -small <= -n <= 5000000 and -baseline-n >= 1")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	rep := &CampaignReport{Command: "herald-bench -campaign " + strings.Join(args, " "), StartedAt: time.Now().UTC(), CPUs: runtime.NumCPU(),
		Ratios: map[string]float64{}}
	err := runCampaignBench(ctx, o, rep, stderr)
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
	rss    atomic.Int64 // peak RSS (bytes) since the last reset
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
	runID := time.Now().UTC().Format("0102T150405") + "-" + randomHex(3)
	t, key, err := b.st.CreateTenant(ctx, "campaign-bench-"+runID)
	if err != nil {
		return err
	}
	b.tenant, b.key = t.ID, key
	if err := b.st.PutTenantLimits(ctx, t.ID, store.TenantLimits{APIRatePerSecond: benchRate, APIBurst: benchBurst, AllowCritical: true}); err != nil {
		return err
	}
	for _, tm := range []templates.Template{
		{ID: "bench_campaign", Category: "marketing",
			InApp: &templates.InAppContent{Title: "{{.title}}", Body: "{{.body}}"},
			Email: &templates.EmailContent{Subject: "{{.title}}", Text: "{{.body}}", HTML: "<p>{{.body}}</p>"}},
		{ID: "bench_critical", Category: "security", Critical: true, InApp: &templates.InAppContent{Title: "Code", Body: "{{.body}}"}},
	} {
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

	b.logf("creating %d users (bulk insert)", o.n)
	users := make([]string, o.n)
	for lo := 0; lo < o.n; lo += 10_000 {
		chunk := make([]store.User, 0, 10_000)
		for i := lo; i < min(o.n, lo+10_000); i++ {
			id := fmt.Sprintf("r%07d", i)
			email := id + "@bench.example"
			users[i] = id
			chunk = append(chunk, store.User{UserID: id, Email: &email})
		}
		if err := b.st.InsertUsers(ctx, t.ID, chunk); err != nil {
			return err
		}
	}
	for _, c := range []int{1, 2, 3, 4, 5, 6, 7, 8} { // critical-lane users
		id := "crit" + strconv.Itoa(c)
		if err := b.st.InsertUsers(ctx, t.ID, []store.User{{UserID: id}}); err != nil {
			return err
		}
	}
	rep.Notes = append(rep.Notes,
		"CPU: bench = this process (the API and the worker, in-process as cmd/herald wires them, plus the bench client); temporal and postgres = the servers at HERALD_TEMPORAL_ADDRESS / HERALD_DATABASE_URL; ours = bench + temporal + postgres; machine includes other users of this shared 2-core VM",
		"email goes to the sandbox provider (the tenant has no credentials): one row per recipient in sandbox_messages, the batch path records a page in one statement",
		"peak RSS is this whole process (API + worker + bench client)")

	// Baseline: one notification (one workflow) per recipient.
	ph, err := b.baseline(ctx, users[:o.baselineN])
	if err != nil {
		return err
	}
	rep.Phases = append(rep.Phases, ph)

	lists := map[int]string{}
	for _, size := range []int{o.small, o.n} {
		listID, upload, err := b.uploadList(ctx, users[:size])
		if err != nil {
			return err
		}
		lists[size] = listID
		rep.Notes = append(rep.Notes, fmt.Sprintf("list of %d uploaded (streamed CSV → COPY) in %.1f s, peak RSS %.0f MB", size, upload.Seconds(),
			float64(b.rss.Load())/(1<<20)))
	}
	for _, size := range []int{o.small, o.n} {
		ph, err := b.campaign(ctx, fmt.Sprintf("campaign %d", size), lists[size], size, false)
		if err != nil {
			return err
		}
		rep.Phases = append(rep.Phases, ph)
	}
	if o.criticalRate > 0 {
		// Bulk lane isolation: critical notifications while a campaign drains (its
		// own phase, so the criticals' cost stays out of the campaign's).
		ph, err := b.campaign(ctx, fmt.Sprintf("isolation: campaign %d + critical", o.n), lists[o.n], o.n, true)
		if err != nil {
			return err
		}
		rep.Phases = append(rep.Phases, ph)
	}
	base, small, large := rep.Phases[0], rep.Phases[1], rep.Phases[2]
	if large.OursMs > 0 {
		rep.Ratios["baseline/campaign ours CPU per recipient (goal >= 25)"] = roundTo(base.OursMs/large.OursMs, 1)
	}
	if base.PerSec > 0 {
		rep.Ratios["campaign/baseline recipients per second (goal >= 25)"] = roundTo(large.PerSec/base.PerSec, 1)
	}
	if small.OursMs > 0 {
		rep.Ratios["large/small ours CPU per recipient (goal <= 1.2)"] = roundTo(large.OursMs/small.OursMs, 2)
	}
	if large.ActionsPer1k > 0 {
		rep.Ratios["baseline/campaign Temporal actions per recipient"] = roundTo(base.ActionsPer1k/large.ActionsPer1k, 1)
	}
	return nil
}

// sampleRSS keeps the peak resident set size of this process.
func (b *campaignBench) sampleRSS(ctx context.Context) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		if v := readRSS(); v > b.rss.Load() {
			b.rss.Store(v)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func readRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// temporalActions sums the server's `action` counter for the namespace (-1:
// unknown).
func (b *campaignBench) temporalActions(ctx context.Context) float64 {
	if b.o.metricsURL == "" {
		return -1
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.o.metricsURL, nil)
	resp, err := b.http.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	want := `namespace="` + b.cfg.TemporalNamespace + `"`
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "action{") || !strings.Contains(line, want) {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			v, err := strconv.ParseFloat(line[i+1:], 64)
			if err == nil {
				sum += v
			}
		}
	}
	return sum
}

// measure runs fn and fills the phase's time, CPU, actions and RSS.
func (b *campaignBench) measure(ctx context.Context, ph *CampaignPhase, fn func() error) error {
	runtime.GC()
	b.rss.Store(readRSS())
	actions0 := b.temporalActions(ctx)
	snap0 := b.cpu.snap()
	start := time.Now()
	err := fn()
	ph.Seconds = roundTo(time.Since(start).Seconds(), 2)
	snap1 := b.cpu.snap()
	if actions1 := b.temporalActions(ctx); actions0 >= 0 && actions1 >= 0 {
		ph.Actions = actions1 - actions0
		ph.ActionsPer1k = roundTo(ph.Actions*1000/float64(ph.Recipients), 1)
	}
	if d, ok := delta(snap0, snap1); ok {
		ph.CPU = d.usage(ph.Recipients)
		if ph.CPU != nil {
			ph.OursMs = roundTo(ph.CPU.PerOpMs["bench"]+ph.CPU.PerOpMs["temporal"]+ph.CPU.PerOpMs["postgres"], 3)
		}
	}
	if ph.Seconds > 0 {
		ph.PerSec = roundTo(float64(ph.Recipients)/ph.Seconds, 1)
	}
	ph.PeakRSSMB = roundTo(float64(b.rss.Load())/(1<<20), 1)
	return err
}

func (b *campaignBench) post(ctx context.Context, method, path, contentType string, body io.Reader) (int, []byte, error) {
	return apiCall(ctx, b.http, method, b.apiURL+path, b.key, contentType, body)
}

// baseline sends one notification per user (in_app + email) and waits until
// every channel is sent.
func (b *campaignBench) baseline(ctx context.Context, users []string) (CampaignPhase, error) {
	ph := CampaignPhase{Name: "baseline: one notification each", Recipients: len(users)}
	b.logf("baseline: %d single notifications (in_app + email)", len(users))
	err := b.measure(ctx, &ph, func() error {
		r := closedLoop(ctx, len(users), b.o.concurrency, 30*time.Second, func(ctx context.Context, i int) (outcome, error) {
			body, _ := json.Marshal(map[string]any{"user_id": users[i], "template_id": "bench_campaign", "channels": []herald.Channel{herald.ChannelInApp, herald.ChannelEmail},
				"data": map[string]any{"title": "Spring sale", "body": "20% off"}, "idempotency_key": "baseline-" + users[i], "dedup_ttl_sec": 1})
			status, raw, err := b.post(ctx, http.MethodPost, "/v1/notifications", "application/json", strings.NewReader(string(body)))
			if err != nil {
				return outcomeError, err
			}
			if status != http.StatusAccepted {
				return outcomeError, fmt.Errorf("POST /v1/notifications: %d %s", status, truncate(raw, 200))
			}
			return outcomeOK, nil
		})
		if r.ok != len(users) {
			return fmt.Errorf("baseline: %d of %d submissions failed (%v)", len(users)-r.ok, len(users), r.samples)
		}
		return b.awaitSent(ctx, "n.campaign_id IS NULL AND n.template_id = 'bench_campaign'", 2*len(users))
	})
	return ph, err
}

// awaitSent polls until want deliveries of the tenant's notifications matching
// where are sent or delivered.
func (b *campaignBench) awaitSent(ctx context.Context, where string, want int) error {
	for {
		var n int
		if err := b.pool.QueryRow(ctx, `
			SELECT count(*) FROM notifications n JOIN deliveries d ON d.tenant_id = n.tenant_id AND d.notification_id = n.id
			WHERE n.tenant_id = $1 AND `+where+` AND d.status IN ('sent', 'delivered')`, b.tenant).Scan(&n); err != nil {
			return err
		}
		if n >= want {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d sent deliveries (have %d): %w", want, n, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// uploadList streams a CSV list of users to POST /v1/lists.
func (b *campaignBench) uploadList(ctx context.Context, users []string) (string, time.Duration, error) {
	start := time.Now()
	pr, pw := io.Pipe()
	go func() {
		w := bufio.NewWriter(pw)
		_, _ = w.WriteString("user_id\n")
		for _, u := range users {
			_, _ = w.WriteString(u + "\n")
		}
		_ = w.Flush()
		_ = pw.Close()
	}()
	status, raw, err := b.post(ctx, http.MethodPost, "/v1/lists?name=bench-"+strconv.Itoa(len(users)), "text/csv", pr)
	if err != nil {
		return "", 0, err
	}
	if status != http.StatusCreated {
		return "", 0, fmt.Errorf("POST /v1/lists: %d %s", status, truncate(raw, 300))
	}
	var l struct {
		ListID  string `json:"list_id"`
		Members int    `json:"members"`
	}
	if err := json.Unmarshal(raw, &l); err != nil || l.Members != len(users) {
		return "", 0, fmt.Errorf("POST /v1/lists: %s", truncate(raw, 300))
	}
	return l.ListID, time.Since(start), nil
}

// campaign starts a campaign to the list and waits for it to complete; with
// critical, critical notifications are sent meanwhile and their latency kept.
func (b *campaignBench) campaign(ctx context.Context, name, listID string, size int, critical bool) (CampaignPhase, error) {
	ph := CampaignPhase{Name: name, Recipients: size}
	id := "bench-" + strconv.Itoa(size) + "-" + randomHex(3)
	b.logf("%s: campaign %s to %d recipients (in_app + email)", name, id, size)
	var lat []time.Duration
	err := b.measure(ctx, &ph, func() error {
		body, _ := json.Marshal(map[string]any{"campaign_id": id, "template_id": "bench_campaign", "channels": []herald.Channel{herald.ChannelInApp, herald.ChannelEmail},
			"data": map[string]any{"title": "Spring sale", "body": "20% off"}, "audience": map[string]any{"list_id": listID}})
		status, raw, err := b.post(ctx, http.MethodPost, "/v1/campaigns", "application/json", strings.NewReader(string(body)))
		if err != nil {
			return err
		}
		if status != http.StatusAccepted {
			return fmt.Errorf("POST /v1/campaigns: %d %s", status, truncate(raw, 300))
		}
		done := make(chan struct{})
		var wg sync.WaitGroup
		if critical {
			wg.Add(1)
			go func() { defer wg.Done(); lat = b.criticalWhile(ctx, done) }()
		}
		defer func() { close(done); wg.Wait() }()
		last := time.Now()
		for {
			var v struct {
				Status    string `json:"status"`
				Processed int    `json:"recipients_processed"`
			}
			status, raw, err := b.post(ctx, http.MethodGet, "/v1/campaigns/"+id, "", nil)
			if err != nil {
				return err
			}
			if status != http.StatusOK || json.Unmarshal(raw, &v) != nil {
				return fmt.Errorf("GET /v1/campaigns/%s: %d %s", id, status, truncate(raw, 300))
			}
			if v.Status == "completed" {
				return nil
			}
			if v.Status == "failed" || v.Status == "cancelled" {
				return fmt.Errorf("campaign %s ended %s: %s", id, v.Status, truncate(raw, 300))
			}
			if time.Since(last) > 5*time.Second {
				b.logf("  %s: %d of %d processed", id, v.Processed, size)
				last = time.Now()
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
		}
	})
	if len(lat) > 0 {
		slices.Sort(lat)
		ph.CriticalN = len(lat)
		ph.CriticalP50Ms = roundTo(float64(lat[len(lat)/2])/float64(time.Millisecond), 1)
		ph.CriticalP99Ms = roundTo(float64(lat[min(len(lat)-1, int(math.Ceil(0.99*float64(len(lat))))-1)])/float64(time.Millisecond), 1)
	}
	return ph, err
}

// criticalWhile submits critical notifications at -critical-rate until done and
// returns each one's accept → inbox latency (the server's accepted_at to the
// in-app delivery's delivered_at).
func (b *campaignBench) criticalWhile(ctx context.Context, done <-chan struct{}) []time.Duration {
	var ids []string
	tick := time.NewTicker(time.Duration(float64(time.Second) / b.o.criticalRate))
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-done:
			return b.criticalLatencies(ctx, ids)
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		body, _ := json.Marshal(map[string]any{"user_id": "crit" + strconv.Itoa(i%8+1), "template_id": "bench_critical",
			"data": map[string]any{"body": "code " + strconv.Itoa(i)}, "idempotency_key": "crit-" + randomHex(8), "dedup_ttl_sec": 1})
		status, raw, err := b.post(ctx, http.MethodPost, "/v1/notifications", "application/json", strings.NewReader(string(body)))
		if err != nil || status != http.StatusAccepted {
			b.logf("critical submit: %d %v %s", status, err, truncate(raw, 200))
			continue
		}
		var a accepted
		if json.Unmarshal(raw, &a) == nil {
			ids = append(ids, a.NotificationID)
		}
	}
}

func (b *campaignBench) criticalLatencies(ctx context.Context, ids []string) []time.Duration {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var out []time.Duration
		rows, err := b.pool.Query(ctx, `
			SELECT extract(epoch FROM d.delivered_at - n.accepted_at) FROM notifications n
			JOIN deliveries d ON d.tenant_id = n.tenant_id AND d.notification_id = n.id AND d.channel = 'in_app'
			WHERE n.tenant_id = $1 AND n.id = ANY($2) AND d.delivered_at IS NOT NULL`, b.tenant, ids)
		if err != nil {
			return nil
		}
		for rows.Next() {
			var s float64
			if rows.Scan(&s) == nil {
				out = append(out, time.Duration(s*float64(time.Second)))
			}
		}
		rows.Close()
		if len(out) == len(ids) || time.Now().After(deadline) {
			return out
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func printCampaignTable(w io.Writer, r *CampaignReport) {
	fmt.Fprintf(w, "herald-bench -campaign (%d CPUs) %s\n\n", r.CPUs, r.StartedAt.Format(time.RFC3339))
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\trecipients\tseconds\trecipients/s\tours ms/rcpt\tbench\ttemporal\tpostgres\tmachine\tactions/1k\tpeak RSS MB\tcritical p50/p99 ms\t")
	for _, p := range r.Phases {
		cpu := func(k string) string {
			if p.CPU == nil {
				return "-"
			}
			return strconv.FormatFloat(p.CPU.PerOpMs[k], 'f', 3, 64)
		}
		crit := "-"
		if p.CriticalN > 0 {
			crit = fmt.Sprintf("%.0f / %.0f (n=%d)", p.CriticalP50Ms, p.CriticalP99Ms, p.CriticalN)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.3f\t%s\t%s\t%s\t%s\t%.1f\t%.1f\t%s\t\n", p.Name, p.Recipients, p.Seconds, p.PerSec, p.OursMs,
			cpu("bench"), cpu("temporal"), cpu("postgres"), cpu("machine"), p.ActionsPer1k, p.PeakRSSMB, crit)
	}
	tw.Flush()
	fmt.Fprintln(w)
	keys := make([]string, 0, len(r.Ratios))
	for k := range r.Ratios {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "%-60s %v\n", k, r.Ratios[k])
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	if r.Error != "" {
		fmt.Fprintln(w, "ERROR:", r.Error)
	}
}
