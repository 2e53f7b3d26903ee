// Command herald-bench measures Herald against the PostgreSQL and Temporal it
// runs on; `herald-bench -h` lists its three modes and their flags. By default it
// measures the accept path against the bare Temporal start it is built on, in one
// run against the same PostgreSQL and Temporal:
//
//	(a)  bare ExecuteWorkflow of an empty workflow, new IDs
//	(a') the same bare start rejected as a duplicate (IDs already running)
//	(b)  POST /v1/notifications, new (unique idempotency keys, in_app)
//	(c)  POST /v1/notifications, duplicate (the keys accepted in (b))
//	(d)  accept → inbox-visible throughput and latency
//
// and prints (b)/(a) and (c)/(a') against the goal (≥ 0.9). By default it hosts
// Herald itself (API on 127.0.0.1:0 over real HTTP, worker on a unique task queue,
// wired by internal/app as cmd/herald is); -api-url/-api-key drive an already-running Herald
// instead. -campaign measures campaigns (campaign.go), -inbox-streams the inbox
// streams (inbox_streams.go). See docs/bench.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"
)

type options struct {
	n, concurrency, warmup int
	users                  int
	dN, dUsers             int
	pollRate, drainRate    float64
	dRate                  float64
	settleTimeout          time.Duration
	pollers                int
	apiURL, apiKey         string
	jsonOut                bool
	cpuProfile             string
	breakdown              bool
	dedupTTL               time.Duration
	phaseTimeout           time.Duration
	dTimeout               time.Duration
	readyTimeout           time.Duration
	budget                 time.Duration
	reqTimeout             time.Duration
	cleanup                bool
	cleanupTimeout         time.Duration
	goal, goalNew          float64
	failOnMiss             bool
	quiet                  bool
	workersAfterB          bool
	chunks                 int
	temporalGzip           bool
	signals                string
	// inboxStreams runs the inbox stream bench instead (inbox_streams.go);
	// inboxAPIChild is that bench's child process.
	inboxStreams, inboxAPIChild bool
	stream                      inboxStreamOptions
}

// inboxPage is the inbox page the bench reads; it keeps every bench user's inbox
// within one page (see perUserMax).
const (
	inboxPage  = 100
	perUserMax = 90
)

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("herald-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.n, "n", 2000, "operations per measured phase (a), (a'), (b), (c)")
	fs.IntVar(&o.concurrency, "concurrency", 32, "concurrent operations in every phase")
	fs.IntVar(&o.chunks, "chunks", 4, "measure each pair — (a)+(b), (a')+(c) — interleaved in this many chunks per phase (ABBA order); 1 = one after the other")
	fs.IntVar(&o.warmup, "warmup", 100, "unmeasured operations before each phase")
	fs.IntVar(&o.users, "users", 64, "bench users for (a)/(b)/(c) (raised so no inbox exceeds one page)")
	fs.IntVar(&o.dN, "d-n", 300, "notifications in phase (d)")
	fs.IntVar(&o.dUsers, "d-users", 50, "bench users for (d) (raised so no inbox exceeds one page)")
	fs.Float64Var(&o.pollRate, "poll-rate", 50, "max inbox polls per second in (d)")
	fs.Float64Var(&o.drainRate, "ready-poll-rate", 25, "-api-url: max inbox polls per second while waiting for (b)'s originals before (c)")
	fs.Float64Var(&o.dRate, "d-rate", 0, "pace (d) submissions at this many per second (0: as fast as -concurrency allows)")
	fs.DurationVar(&o.settleTimeout, "settle-timeout", time.Minute, "upper bound on waiting for Temporal/PostgreSQL to go idle before each phase")
	fs.IntVar(&o.pollers, "pollers", 8, "max inbox polls in flight")
	fs.StringVar(&o.apiURL, "api-url", "", "drive an already-running Herald at this base URL (needs -api-key); default: host one in-process")
	fs.StringVar(&o.apiKey, "api-key", "", "API key for -api-url (or env HERALD_BENCH_API_KEY)")
	fs.BoolVar(&o.jsonOut, "json", false, "print a machine-readable JSON summary instead of the table")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of this process per phase to PREFIX.<phase>.pprof")
	fs.BoolVar(&o.breakdown, "breakdown", false, "self-host: time the API handler and its Temporal calls per phase")
	fs.DurationVar(&o.dedupTTL, "dedup-ttl", 0, "send dedup_ttl_sec with every POST (0: the server's default window)")
	fs.DurationVar(&o.phaseTimeout, "phase-timeout", 2*time.Minute, "upper bound on each phase")
	fs.DurationVar(&o.dTimeout, "d-timeout", 2*time.Minute, "upper bound on (d): submitting and waiting for inbox visibility")
	fs.DurationVar(&o.readyTimeout, "ready-timeout", 30*time.Second, "upper bound on waiting for (b)'s originals to be recorded (self-host) or in the inbox (-api-url) before (c)")
	fs.DurationVar(&o.budget, "budget", 3*time.Minute+30*time.Second, "upper bound on setup plus all phases; phases that do not fit are not run (cleanup comes on top)")
	fs.DurationVar(&o.reqTimeout, "req-timeout", 15*time.Second, "timeout of each request")
	fs.BoolVar(&o.cleanup, "cleanup", true, "terminate the workflows the bench started when done")
	fs.DurationVar(&o.cleanupTimeout, "cleanup-timeout", 90*time.Second, "upper bound on cleanup")
	fs.Float64Var(&o.goal, "goal", 0.9, "goal for (c)/(a')")
	fs.Float64Var(&o.goalNew, "goal-new", 0.95, "goal for (b)/(a)")
	fs.BoolVar(&o.failOnMiss, "fail-on-miss", false, "exit 3 when a ratio misses its goal")
	fs.BoolVar(&o.quiet, "q", false, "no progress lines on stderr")
	fs.BoolVar(&o.temporalGzip, "temporal-gzip", true, "what-if: false sends the Temporal client's gRPC requests uncompressed (the SDK, and so cmd/herald, gzips them by default)")
	fs.StringVar(&o.signals, "signals", "metrics", "self-host: off (no metrics, no tracing), metrics (what herald runs with by default: Prometheus metrics, SDK metrics, tracing off) or all (metrics + tracing with every span sampled and batched to a discarding exporter, or OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set)")
	fs.BoolVar(&o.workersAfterB, "workers-after-b", false, "self-host diagnostic: start the Herald worker and the empty workflow's worker only after (b), so (a) and (b) measure starts with no delivery work running beside them")
	fs.BoolVar(&o.inboxStreams, "inbox-streams", false, "run the inbox stream bench instead: accept → stream event latency at the client, at the max rate and half of it, and the cost of idle streams (see inbox_streams.go)")
	fs.BoolVar(&o.inboxAPIChild, "inbox-api-child", false, "internal: the -inbox-streams bench's Herald process")
	addInboxStreamFlags(fs, &o.stream)
	fs.Usage = func() { printUsage(fs.Output(), fs) }
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if o.apiKey == "" {
		o.apiKey = os.Getenv("HERALD_BENCH_API_KEY")
	}
	switch {
	case o.n < 1 || o.n > 1_000_000:
		return o, errors.New("-n must be between 1 and 1000000")
	case o.dN < 1 || o.dN > 1_000_000:
		return o, errors.New("-d-n must be between 1 and 1000000")
	case o.concurrency < 1 || o.concurrency > 4096:
		return o, errors.New("-concurrency must be between 1 and 4096")
	case o.chunks < 1 || o.chunks > 1000:
		return o, errors.New("-chunks must be between 1 and 1000")
	case o.warmup < 0 || o.warmup > 100_000:
		return o, errors.New("-warmup must be between 0 and 100000")
	case o.users < 1 || o.dUsers < 1 || o.users > 100_000 || o.dUsers > 100_000:
		return o, errors.New("-users and -d-users must be between 1 and 100000")
	case o.pollRate <= 0 || o.pollRate > 10_000 || o.drainRate <= 0 || o.drainRate > 10_000:
		return o, errors.New("-poll-rate and -ready-poll-rate must be in (0, 10000]")
	case o.dRate < 0 || o.dRate > 100_000:
		return o, errors.New("-d-rate must be in [0, 100000]")
	case o.pollers < 1 || o.pollers > 256:
		return o, errors.New("-pollers must be between 1 and 256")
	case o.apiURL != "" && o.apiKey == "":
		return o, errors.New("-api-url needs -api-key (or HERALD_BENCH_API_KEY)")
	case o.apiURL != "" && o.workersAfterB:
		return o, errors.New("-workers-after-b needs self-host mode (no -api-url)")
	case o.signals != "off" && o.signals != "metrics" && o.signals != "all":
		return o, errors.New("-signals must be off, metrics or all")
	case o.apiURL == "" && o.apiKey != "":
		return o, errors.New("-api-key is only used with -api-url")
	case o.dedupTTL != 0 && (o.dedupTTL < time.Second || o.dedupTTL > 7*24*time.Hour):
		return o, errors.New("-dedup-ttl must be between 1s and 168h")
	case o.phaseTimeout <= 0 || o.dTimeout <= 0 || o.reqTimeout <= 0 || o.cleanupTimeout <= 0 || o.settleTimeout <= 0 ||
		o.readyTimeout <= 0 || o.budget <= 0:
		return o, errors.New("timeouts must be positive")
	}
	o.apiURL = strings.TrimRight(o.apiURL, "/")
	// Keep every inbox within one page so a single GET sees all of a user's items.
	o.users = max(o.users, ceilDiv(o.n+max(o.warmup, o.users), perUserMax))
	o.dUsers = max(o.dUsers, ceilDiv(o.dN+o.dUsers, perUserMax))
	return o, nil
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// printUsage is herald-bench -h: the three modes and each one's flags (the
// accept and inbox stream flags are fs's, the campaign flags addCampaignFlags').
func printUsage(w io.Writer, fs *flag.FlagSet) {
	stream := flag.NewFlagSet("", flag.ContinueOnError)
	addInboxStreamFlags(stream, &inboxStreamOptions{})
	accept := flag.NewFlagSet("", flag.ContinueOnError)
	inbox := flag.NewFlagSet("", flag.ContinueOnError)
	fs.VisitAll(func(f *flag.Flag) {
		dst := accept
		switch {
		case f.Name == "inbox-api-child": // internal
			return
		case f.Name == "inbox-streams" || stream.Lookup(f.Name) != nil:
			dst = inbox
		}
		dst.Var(f.Value, f.Name, f.Usage)
		dst.Lookup(f.Name).DefValue = f.DefValue
	})
	camp := flag.NewFlagSet("", flag.ContinueOnError)
	addCampaignFlags(camp, &campaignOptions{})
	for _, fl := range []*flag.FlagSet{accept, inbox, camp} {
		fl.SetOutput(w)
	}
	fmt.Fprint(w, `herald-bench measures Herald against the PostgreSQL and Temporal named by
HERALD_DATABASE_URL and HERALD_TEMPORAL_ADDRESS (see docs/bench.md). Three modes:

  herald-bench [accept flags]
      the accept path: bare Temporal starts (a), (a') against POST /v1/notifications
      new (b) and duplicate (c), accept → inbox (d)
  herald-bench -campaign [campaign flags]      (-campaign must come first)
      campaigns as campaign teams send them: (a) identical in_app + email, (b)–(e)
      personalized email / SMS / push / all three, (f) with rate_per_second; the
      per-notification baseline, cost flatness and critical latency while one drains
  herald-bench -inbox-streams [inbox stream flags]
      accept → inbox stream event latency and the cost of idle streams

Accept flags:
`)
	accept.PrintDefaults()
	fmt.Fprint(w, "\nCampaign flags (herald-bench -campaign ...; HERALD_TEMPORAL_METRICS_URL: the Temporal server's Prometheus endpoint):\n")
	camp.PrintDefaults()
	fmt.Fprint(w, "\nInbox stream flags (herald-bench -inbox-streams ...):\n")
	inbox.PrintDefaults()
}

// Report is the whole run, as -json prints it.
type Report struct {
	Mode        string    `json:"mode"`
	Command     string    `json:"command"`
	StartedAt   time.Time `json:"started_at"`
	DurationSec float64   `json:"duration_sec"`
	GoVersion   string    `json:"go_version"`
	CPUs        int       `json:"cpus"`
	N           int       `json:"n"`
	DN          int       `json:"d_n"`
	Concurrency int       `json:"concurrency"`
	Warmup      int       `json:"warmup"`
	Users       int       `json:"users"`
	DUsers      int       `json:"d_users"`
	APIURL      string    `json:"api_url"`
	TaskQueue   string    `json:"task_queue,omitempty"`
	BenchQueue  string    `json:"bench_task_queue"`
	Phases      []Phase   `json:"phases"`
	Ratios      []Ratio   `json:"ratios"`
	Notes       []string  `json:"notes,omitempty"`
	Cleanup     string    `json:"cleanup,omitempty"`
	Error       string    `json:"error,omitempty"`
}

func (r *Report) phase(key string) *Phase {
	for i := range r.Phases {
		if r.Phases[i].Key == key {
			return &r.Phases[i]
		}
	}
	return nil
}

// computeRatios evaluates (b)/(a) and (c)/(a') from the phases present.
func computeRatios(r *Report, goal, goalNew float64) {
	per := func(k string) float64 {
		if p := r.phase(k); p != nil {
			return p.PerSec
		}
		return -1 // not run: the ratio is invalid
	}
	r.Ratios = []Ratio{
		evalRatio("(b)/(a) new accepts vs bare starts", per("b"), per("a"), goalNew),
		evalRatio("(c)/(a') duplicate submissions vs bare duplicate starts", per("c"), per("a-dup"), goal),
	}
	if r.Mode == "api-url" {
		// The Herald under test runs in another process: its CPU counts as "other".
		return
	}
	for i, pair := range [][2]string{{"b", "a"}, {"c", "a-dup"}} {
		var busy []string
		for _, k := range pair {
			if p := r.phase(k); p != nil {
				if share := p.otherShare(); share > noisyShare {
					busy = append(busy, fmt.Sprintf("%s %.0f%%", p.Title[:4], 100*share))
				}
			}
		}
		if len(busy) > 0 {
			r.Ratios[i].Note = "noisy: unrelated processes used " + strings.Join(busy, ", ") + " of the busy CPU"
		}
	}
}

// otherShare is the share of the machine's busy CPU that unrelated processes used
// during the phase (0 when unknown).
func (p *Phase) otherShare() float64 {
	if p.CPU == nil || p.CPU.PerOpMs["machine"] <= 0 {
		return 0
	}
	return p.CPU.PerOpMs["other"] / p.CPU.PerOpMs["machine"]
}

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

func realMain(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "-campaign" || args[0] == "--campaign") {
		return campaignMain(args[1:], stdout, stderr)
	}
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "herald-bench:", err)
		return 2
	}
	switch {
	case o.inboxAPIChild:
		return runInboxAPIChild(stdout, stderr)
	case o.inboxStreams:
		return runInboxStreamBench(args, o.stream, o.reqTimeout, o.jsonOut, stdout, stderr)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { // after the first signal the bench cleans up; a second one kills it
		<-ctx.Done()
		stop()
	}()

	rep := &Report{
		Command: "herald-bench " + strings.Join(args, " "), StartedAt: time.Now().UTC(),
		GoVersion: runtime.Version(), CPUs: runtime.NumCPU(),
		N: o.n, DN: o.dN, Concurrency: o.concurrency, Warmup: o.warmup, Users: o.users, DUsers: o.dUsers,
	}
	runErr := run(ctx, o, rep, stderr)
	rep.DurationSec = roundTo(time.Since(rep.StartedAt).Seconds(), 1)
	sortPhases(rep)
	computeRatios(rep, o.goal, o.goalNew)
	if runErr != nil {
		rep.Error = runErr.Error()
	}
	if rc := writeReport(stdout, stderr, o.jsonOut, rep, func(w io.Writer) { printTable(w, rep) }, "herald-bench", runErr); rc != 0 {
		return rc
	}
	if o.failOnMiss {
		for _, r := range rep.Ratios {
			if !r.Pass {
				return 3
			}
		}
	}
	return 0
}

// writeReport writes a mode's report as indented JSON (-json) or as its table,
// says err on stderr, and returns the exit status err makes (0 or 1).
func writeReport(stdout, stderr io.Writer, jsonOut bool, rep any, table func(io.Writer), mode string, err error) int {
	if jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		table(stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, mode+":", err)
		return 1
	}
	return 0
}

// newHTTPClient keeps a warm connection per concurrent request (loopback, keep-alive).
func newHTTPClient(o options) *http.Client {
	conns := o.concurrency + o.pollers + 8
	return &http.Client{Timeout: o.reqTimeout, Transport: &http.Transport{
		Proxy: nil, MaxIdleConns: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: 90 * time.Second,
	}}
}
