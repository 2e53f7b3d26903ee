package main

// herald-bench -inbox-streams: accept → inbox stream event latency, measured at
// the client that holds the stream, and the cost of idle open streams.
//
// Herald (API + worker, wired by internal/app as cmd/herald is) runs in a child
// process of the bench (this binary with -inbox-api-child), so that the CPU and
// memory read from /proc are the API process's own, not the bench client's.
//
//  1. -streams users each hold one stream (user token, EventSource-style GET).
//  2. a closed loop (-inbox-concurrency submissions in flight) sends
//     -inbox-cal in_app notifications to those users; the rate at which their
//     events reach the streams is the burst rate. The maximum sustainable rate
//     is the highest paced rate, from the burst rate down by 3/4 steps, that
//     keeps up for -inbox-duration (no event lost, p50 under a second).
//  3. at the max and at half of it: open-loop, paced submissions for
//     -inbox-duration each; latency = event arrival at the client − the POST's
//     start (and − its 202). Each event's created_at (the database's clock when
//     the delivery was written, same machine) splits it into delivery (submit →
//     written: Temporal, worker) and fan-out (written → client: NOTIFY, the
//     listener, the stream), the floor the streams add to.
//  4. idle: the child's RSS and CPU with no stream, then with -idle-streams idle
//     streams open, over -idle-window each.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/herald-notify/herald/internal/app"
	"github.com/herald-notify/herald/internal/config"
	"github.com/herald-notify/herald/internal/secrets"
	"github.com/herald-notify/herald/worker"
)

type inboxStreamOptions struct {
	streams, idleStreams int
	cal, concurrency     int
	duration, idleWindow time.Duration
}

func addInboxStreamFlags(fs interface {
	IntVar(*int, string, int, string)
	DurationVar(*time.Duration, string, time.Duration, string)
}, o *inboxStreamOptions) {
	fs.IntVar(&o.streams, "streams", 100, "-inbox-streams: open streams (one user each) during the latency phases")
	fs.IntVar(&o.idleStreams, "idle-streams", 1000, "-inbox-streams: idle streams for the CPU and memory phase")
	fs.IntVar(&o.cal, "inbox-cal", 300, "-inbox-streams: notifications of the closed-loop max-rate phase")
	fs.IntVar(&o.concurrency, "inbox-concurrency", 32, "-inbox-streams: submissions in flight in the max-rate phase")
	fs.DurationVar(&o.duration, "inbox-duration", 20*time.Second, "-inbox-streams: length of each paced phase")
	fs.DurationVar(&o.idleWindow, "idle-window", 30*time.Second, "-inbox-streams: CPU window of the idle phase (the heartbeat is 15 s)")
}

// childInfo is what the child prints once Herald serves.
type childInfo struct {
	URL      string `json:"url"`
	Key      string `json:"key"`
	TenantID string `json:"tenant_id"`
}

// runInboxAPIChild serves Herald's API and worker until stdin closes or a signal.
func runInboxAPIChild(stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); stop() }()
	if err := inboxAPIChild(ctx, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "herald-bench child:", err)
		return 1
	}
	return 0
}

func inboxAPIChild(ctx context.Context, stdout, stderr io.Writer) error {
	cfg, err := config.FromEnv()
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	pool, tc, err := connect(ctx, cfg, logger.With("component", "temporal"))
	if err != nil {
		return err
	}
	defer pool.Close()
	defer tc.Close()
	key, err := secrets.GenerateKey()
	if err != nil {
		return err
	}
	cfg.TaskQueue = "herald-bench-inbox-" + randomHex(4)
	cfg.SandboxAPI = false
	// No tenant rate limit (the bench looks for the maximum rate); stream limits
	// above what the bench opens.
	cfg.TenantRatePerSecond, cfg.TenantBurst, cfg.TenantDailyQuota = 0, 0, 0
	cfg.InboxStreamsPerTenant, cfg.InboxStreamsPerProcess = 100_000, 100_000
	a, err := app.New(cfg, pool, tc, app.Options{Logger: logger, SecretsKey: key})
	if err != nil {
		return err
	}
	defer a.Close()
	t, apiKey, err := a.Store.CreateTenant(ctx, "bench-inbox-"+randomHex(4))
	if err != nil {
		return err
	}
	if _, err := a.Store.PutTemplate(ctx, t.ID, benchTemplateDef()); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := app.HTTPServer(cfg, a.Handler(), logger)
	srv.RegisterOnShutdown(a.CloseStreams)
	errc := make(chan error, 2)
	go func() { errc <- app.Serve(ctx, srv, ln, 5*time.Second) }()
	go func() { errc <- worker.Run(ctx, a.Workers(nil)) }()
	if err := json.NewEncoder(stdout).Encode(childInfo{URL: "http://" + ln.Addr().String(), Key: apiKey, TenantID: t.ID}); err != nil {
		return err
	}
	err = <-errc
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// InboxStreamReport is the -inbox-streams result.
type InboxStreamReport struct {
	Command   string    `json:"command"`
	StartedAt time.Time `json:"started_at"`
	Streams   int       `json:"streams"`
	// BurstPerSec is the closed loop's rate; MaxPerSec the highest paced rate
	// that kept up (the "max" phase).
	BurstPerSec    float64       `json:"burst_per_sec"`
	MaxPerSec      float64       `json:"max_per_sec"`
	Phases         []StreamPhase `json:"phases"`
	Idle           *IdleCost     `json:"idle,omitempty"`
	Notes          []string      `json:"notes,omitempty"`
	Error          string        `json:"error,omitempty"`
	CalibrationSec float64       `json:"calibration_sec"`
}

// StreamPhase is one latency phase.
type StreamPhase struct {
	Name       string  `json:"name"`
	TargetRate float64 `json:"target_per_sec"`
	Sent       int     `json:"sent"`
	Received   int     `json:"received"`
	Lost       int     `json:"lost"`
	Duplicates int64   `json:"duplicates"`
	Errors     int     `json:"errors"`
	// SubmitToEvent is POST start → event at the client; AcceptToEvent is the
	// 202 → event; Delivery is POST start → row written (created_at); FanOut is
	// row written → event at the client.
	SubmitToEvent Latency `json:"submit_to_event"`
	AcceptToEvent Latency `json:"accept_to_event"`
	Delivery      Latency `json:"delivery"`
	FanOut        Latency `json:"fan_out"`
}

// IdleCost is the API process's cost of idle open streams.
type IdleCost struct {
	Streams        int     `json:"streams"`
	BaseRSSMB      float64 `json:"base_rss_mb"`
	RSSMB          float64 `json:"rss_mb"`
	DeltaMB        float64 `json:"delta_mb"`
	PerStreamKB    float64 `json:"per_stream_kb"`
	BaseCPUPercent float64 `json:"base_cpu_percent"`
	CPUPercent     float64 `json:"cpu_percent"`
	WindowSec      float64 `json:"window_sec"`
	Threads        int     `json:"threads"`
}

func runInboxStreamBench(args []string, so inboxStreamOptions, reqTimeout time.Duration, jsonOut bool, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep := &InboxStreamReport{Command: "herald-bench " + strings.Join(args, " "), StartedAt: time.Now().UTC(), Streams: so.streams}
	err := inboxStreamBench(ctx, so, reqTimeout, rep, stderr)
	if err != nil {
		rep.Error = err.Error()
	}
	return writeReport(stdout, stderr, jsonOut, rep, func(w io.Writer) { printInboxStreamReport(w, rep) }, "herald-bench", err)
}

type streamBench struct {
	child    childInfo
	pid      int
	http     *http.Client
	tokens   []string
	users    []string
	progress io.Writer

	mu       sync.Mutex
	arrivals map[string]arrival // notification id → first arrival
	dups     atomic.Int64
	got      atomic.Int64
}

type arrival struct {
	at, written time.Time
}

func (b *streamBench) logf(format string, args ...any) {
	fmt.Fprintf(b.progress, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

func inboxStreamBench(ctx context.Context, so inboxStreamOptions, reqTimeout time.Duration, rep *InboxStreamReport, progress io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, "-inbox-api-child")
	cmd.Stderr = progress
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	b := &streamBench{pid: cmd.Process.Pid, progress: progress, arrivals: map[string]arrival{},
		http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 0}}}
	rd := bufio.NewReader(out)
	line, err := rd.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("the API child did not start: %w", err)
	}
	// Anything else the child prints must be read, or a full pipe stalls it.
	go func() { _, _ = io.Copy(progress, rd) }()
	if err := json.Unmarshal(line, &b.child); err != nil {
		return err
	}
	b.logf("Herald API + worker in child pid %d at %s", b.pid, b.child.URL)

	users := max(so.streams, so.idleStreams)
	if err := b.setupUsers(ctx, users, reqTimeout); err != nil {
		return err
	}

	// Latency phases with so.streams open streams.
	sctx, closeStreams := context.WithCancel(ctx)
	if err := b.openStreams(sctx, so.streams, true); err != nil {
		closeStreams()
		return err
	}
	b.logf("%d streams open; max-rate phase: %d notifications, %d in flight", so.streams, so.cal, so.concurrency)
	maxRate, calSec, err := b.calibrate(ctx, so, reqTimeout)
	if err != nil {
		closeStreams()
		return err
	}
	rep.BurstPerSec, rep.CalibrationSec = roundTo(maxRate, 1), roundTo(calSec, 1)
	// The closed loop's rate is a burst's; the maximum sustainable rate is the
	// highest paced rate the pipeline keeps up with for -inbox-duration (every
	// event in, no growing lag: p50 under a second). Each try that falls behind
	// goes on at 3/4 of the rate.
	var best *StreamPhase
	rate := maxRate
	for try := 0; try < 4 && best == nil; try++ {
		b.logf("phase \"max\" try %d: %.1f/s for %s", try+1, rate, so.duration)
		p, err := b.paced(ctx, "max", rate, so.duration, reqTimeout, so.streams)
		if err != nil {
			closeStreams()
			return err
		}
		if p.Lost == 0 && p.SubmitToEvent.P50Ms < 1000 {
			best = &p
			break
		}
		p.Name = "fell behind"
		rep.Phases = append(rep.Phases, p)
		rate *= 0.75
		time.Sleep(5 * time.Second) // let the backlog drain
	}
	if best == nil {
		closeStreams()
		return fmt.Errorf("no paced rate down to %.1f/s kept up", rate/0.75)
	}
	rep.MaxPerSec = best.TargetRate
	b.logf("phase \"half of max\": %.1f/s for %s", rate/2, so.duration)
	half, err := b.paced(ctx, "half of max", rate/2, so.duration, reqTimeout, so.streams)
	if err != nil {
		closeStreams()
		return err
	}
	rep.Phases = append(rep.Phases, half, *best)
	closeStreams()

	// Idle cost.
	time.Sleep(3 * time.Second)
	idle, err := b.idle(ctx, so)
	if err != nil {
		return err
	}
	rep.Idle = idle
	rep.Notes = append(rep.Notes,
		"latency is measured at the client holding the stream; the child process runs Herald's API and worker; PostgreSQL and Temporal are the bench's services",
		"the machine is shared: CPU other processes used is not subtracted")
	return nil
}

func (b *streamBench) setupUsers(ctx context.Context, n int, reqTimeout time.Duration) error {
	b.users = make([]string, n)
	b.tokens = make([]string, n)
	for i := range n {
		b.users[i] = fmt.Sprintf("s%d", i)
	}
	res := closedLoop(ctx, n, 16, reqTimeout, func(ctx context.Context, i int) (outcome, error) {
		if st, body, err := b.do(ctx, http.MethodPut, "/v1/users/"+b.users[i], b.child.Key, []byte(`{}`)); err != nil || st/100 != 2 {
			return outcomeError, requestFailed("create user", st, body, err)
		}
		st, body, err := b.do(ctx, http.MethodPost, "/v1/users/"+b.users[i]+"/token", b.child.Key, []byte(`{"ttl_seconds":86400}`))
		if err != nil || st != http.StatusCreated {
			return outcomeError, requestFailed("mint token", st, body, err)
		}
		var tok struct{ Token string }
		if err := json.Unmarshal(body, &tok); err != nil {
			return outcomeError, err
		}
		b.tokens[i] = tok.Token
		return outcomeOK, nil
	})
	if res.errors > 0 || res.ok != n {
		return fmt.Errorf("setting up %d users: %d failed (%v)", n, n-res.ok, res.samples)
	}
	return nil
}

func (b *streamBench) do(ctx context.Context, method, path, key string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, b.child.URL+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, raw, err
}

// openStreams opens n streams (users 0..n-1) and waits for each one's ready
// event; record makes their readers record item.created arrivals.
func (b *streamBench) openStreams(ctx context.Context, n int, record bool) error {
	ready := make(chan error, n)
	for i := range n {
		go b.stream(ctx, i, record, ready)
	}
	deadline := time.After(2 * time.Minute)
	for range n {
		select {
		case err := <-ready:
			if err != nil {
				return err
			}
		case <-deadline:
			return errors.New("streams did not all open within 2 minutes")
		}
	}
	return nil
}

func (b *streamBench) stream(ctx context.Context, i int, record bool, ready chan<- error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.child.URL+"/v1/users/"+b.users[i]+"/inbox/stream", nil)
	if err != nil {
		ready <- err
		return
	}
	req.Header.Set("Authorization", "Bearer "+b.tokens[i])
	resp, err := b.http.Do(req)
	if err != nil {
		ready <- err
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		ready <- fmt.Errorf("stream %d: %d %s", i, resp.StatusCode, truncate(raw, 200))
		return
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var event string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			at := time.Now()
			if event == "ready" {
				ready <- nil
			}
			if event != "item.created" || !record {
				continue
			}
			var ev struct {
				NotificationID string    `json:"notification_id"`
				CreatedAt      time.Time `json:"created_at"`
			}
			if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev) != nil {
				continue
			}
			b.mu.Lock()
			if _, dup := b.arrivals[ev.NotificationID]; dup {
				b.dups.Add(1)
			} else {
				b.arrivals[ev.NotificationID] = arrival{at: at, written: ev.CreatedAt}
			}
			b.mu.Unlock()
			b.got.Add(1)
		}
	}
}

type sent struct {
	id              string
	start, accepted time.Time
	err             error
	userIdx         int
}

func (b *streamBench) submit(ctx context.Context, user int, seq string, reqTimeout time.Duration) sent {
	s := sent{userIdx: user, start: time.Now()}
	body := fmt.Sprintf(`{"user_id":%q,"template_id":%q,"channels":["in_app"],"data":{"title":"t","body":"b"},"idempotency_key":%q}`,
		b.users[user], benchTemplate, "inbox-bench-"+seq)
	rctx, cancel := context.WithTimeout(ctx, reqTimeout)
	defer cancel()
	st, raw, err := b.do(rctx, http.MethodPost, "/v1/notifications", b.child.Key, []byte(body))
	s.accepted = time.Now()
	if err != nil || st != http.StatusAccepted {
		s.err = requestFailed("POST /v1/notifications", st, raw, err)
		return s
	}
	var a struct {
		NotificationID string `json:"notification_id"`
	}
	s.err = json.Unmarshal(raw, &a)
	s.id = a.NotificationID
	return s
}

var runSeq atomic.Int64

func (b *streamBench) seq() string {
	return strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + strconv.FormatInt(runSeq.Add(1), 10)
}

// calibrate runs the closed loop and returns the events-per-second the streams received.
func (b *streamBench) calibrate(ctx context.Context, so inboxStreamOptions, reqTimeout time.Duration) (float64, float64, error) {
	var mu sync.Mutex
	var list []sent
	t0 := time.Now()
	closedLoop(ctx, so.cal, so.concurrency, reqTimeout, func(ctx context.Context, i int) (outcome, error) {
		s := b.submit(ctx, i%so.streams, b.seq(), reqTimeout)
		mu.Lock()
		list = append(list, s)
		mu.Unlock()
		if s.err != nil {
			return outcomeError, s.err
		}
		return outcomeOK, nil
	})
	last, lost := b.await(ctx, list, 5*time.Minute)
	if lost > 0 {
		return 0, 0, fmt.Errorf("max-rate phase: %d of %d notifications never reached their stream", lost, len(list))
	}
	elapsed := last.Sub(t0).Seconds()
	return float64(len(list)) / elapsed, elapsed, nil
}

// await waits until every accepted notification of list has arrived (or
// within), returning the last arrival and how many did not arrive.
func (b *streamBench) await(ctx context.Context, list []sent, within time.Duration) (time.Time, int) {
	deadline := time.Now().Add(within)
	for {
		var last time.Time
		missing := 0
		b.mu.Lock()
		for _, s := range list {
			if s.err != nil {
				continue
			}
			a, ok := b.arrivals[s.id]
			if !ok {
				missing++
				continue
			}
			if a.at.After(last) {
				last = a.at
			}
		}
		b.mu.Unlock()
		if missing == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return last, missing
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// paced submits at rate for d (open loop: a submission starts on schedule
// whatever the earlier ones do) and measures their stream latency.
func (b *streamBench) paced(ctx context.Context, name string, rate float64, d time.Duration, reqTimeout time.Duration, streams int) (StreamPhase, error) {
	n := max(1, int(rate*d.Seconds()))
	interval := time.Duration(float64(time.Second) / rate)
	list := make([]sent, n)
	var wg sync.WaitGroup
	start := time.Now()
	dups0 := b.dups.Load()
	for i := range n {
		at := start.Add(time.Duration(i) * interval)
		if w := time.Until(at); w > 0 {
			select {
			case <-time.After(w):
			case <-ctx.Done():
				return StreamPhase{}, ctx.Err()
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			list[i] = b.submit(ctx, i%streams, b.seq(), reqTimeout)
		}()
	}
	wg.Wait()
	_, lost := b.await(ctx, list, 3*time.Minute)
	p := StreamPhase{Name: name, TargetRate: roundTo(rate, 1), Sent: n, Lost: lost, Duplicates: b.dups.Load() - dups0}
	var total, accept, delivery, fan []time.Duration
	b.mu.Lock()
	for _, s := range list {
		if s.err != nil {
			p.Errors++
			continue
		}
		a, ok := b.arrivals[s.id]
		if !ok {
			continue
		}
		p.Received++
		total = append(total, a.at.Sub(s.start))
		accept = append(accept, max(0, a.at.Sub(s.accepted)))
		delivery = append(delivery, a.written.Sub(s.start))
		fan = append(fan, a.at.Sub(a.written))
	}
	b.mu.Unlock()
	p.SubmitToEvent, p.AcceptToEvent, p.Delivery, p.FanOut = summarize(total), summarize(accept), summarize(delivery), summarize(fan)
	if p.Errors > 0 {
		return p, fmt.Errorf("phase %s: %d submissions failed", name, p.Errors)
	}
	return p, nil
}

// idle measures the child's RSS and CPU without streams, then with so.idleStreams idle ones.
func (b *streamBench) idle(ctx context.Context, so inboxStreamOptions) (*IdleCost, error) {
	c := &IdleCost{Streams: so.idleStreams, WindowSec: so.idleWindow.Seconds()}
	b.logf("idle: baseline CPU over %s", so.idleWindow)
	baseRSS, _, err := procRSS(b.pid)
	if err != nil {
		return nil, err
	}
	if c.BaseCPUPercent, err = procCPUPercent(ctx, b.pid, so.idleWindow); err != nil {
		return nil, err
	}
	b.logf("idle: opening %d streams", so.idleStreams)
	sctx, closeStreams := context.WithCancel(ctx)
	defer closeStreams()
	if err := b.openStreams(sctx, so.idleStreams, false); err != nil {
		return nil, err
	}
	time.Sleep(3 * time.Second)
	b.logf("idle: %d streams open; CPU over %s", so.idleStreams, so.idleWindow)
	if c.CPUPercent, err = procCPUPercent(ctx, b.pid, so.idleWindow); err != nil {
		return nil, err
	}
	rss, threads, err := procRSS(b.pid)
	if err != nil {
		return nil, err
	}
	c.BaseRSSMB, c.RSSMB = roundTo(float64(baseRSS)/(1<<20), 1), roundTo(float64(rss)/(1<<20), 1)
	c.DeltaMB = roundTo(float64(rss-baseRSS)/(1<<20), 1)
	c.PerStreamKB = roundTo(float64(rss-baseRSS)/1024/float64(so.idleStreams), 1)
	c.Threads = threads
	return c, nil
}

// procRSS reads VmRSS (bytes) and Threads of a process.
func procRSS(pid int) (int64, int, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	var rss int64
	threads := 0
	for _, l := range strings.Split(string(raw), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) >= 2 && f[0] == "VmRSS:":
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			rss = kb * 1024
		case len(f) >= 2 && f[0] == "Threads:":
			threads, _ = strconv.Atoi(f[1])
		}
	}
	return rss, threads, nil
}

// procCPUPercent is the process's CPU (user + system) over window, in percent of one core.
func procCPUPercent(ctx context.Context, pid int, window time.Duration) (float64, error) {
	read := func() (uint64, error) {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, err
		}
		st, ok := parseProcStat(raw)
		if !ok {
			return 0, errors.New("cannot parse /proc/pid/stat")
		}
		return st.jiffies, nil
	}
	a, err := read()
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	select {
	case <-time.After(window):
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	bj, err := read()
	if err != nil {
		return 0, err
	}
	const hz = 100 // USER_HZ
	return roundTo(float64(bj-a)/hz/time.Since(t0).Seconds()*100, 2), nil
}

func printInboxStreamReport(w io.Writer, r *InboxStreamReport) {
	fmt.Fprintf(w, "herald-bench -inbox-streams (%s)\n", r.Command)
	fmt.Fprintf(w, "%d streams; closed-loop burst: %.1f notifications/s reached the streams (%.1f s); max sustainable (paced, kept up): %.1f/s\n",
		r.Streams, r.BurstPerSec, r.CalibrationSec, r.MaxPerSec)
	fmt.Fprintf(w, "%-12s %8s %6s %6s %5s %4s | %-30s | %-30s | %-30s | %-30s\n", "phase", "rate/s", "sent", "recv", "lost", "dup",
		"submit→event p50/p90/p99/max ms", "202→event p50/p99 ms", "delivery (→row) p50/p99 ms", "fan-out (row→client) p50/p99 ms")
	for _, p := range r.Phases {
		fmt.Fprintf(w, "%-12s %8.1f %6d %6d %5d %4d | %7.1f %7.1f %7.1f %7.1f | %7.1f %7.1f              | %7.1f %7.1f              | %7.1f %7.1f\n",
			p.Name, p.TargetRate, p.Sent, p.Received, p.Lost, p.Duplicates,
			p.SubmitToEvent.P50Ms, p.SubmitToEvent.P90Ms, p.SubmitToEvent.P99Ms, p.SubmitToEvent.MaxMs,
			p.AcceptToEvent.P50Ms, p.AcceptToEvent.P99Ms, p.Delivery.P50Ms, p.Delivery.P99Ms, p.FanOut.P50Ms, p.FanOut.P99Ms)
	}
	if i := r.Idle; i != nil {
		fmt.Fprintf(w, "idle: %d open streams: API process RSS %.1f MB → %.1f MB (+%.1f MB, %.1f KB/stream), CPU %.2f%% → %.2f%% of a core over %.0f s, %d threads\n",
			i.Streams, i.BaseRSSMB, i.RSSMB, i.DeltaMB, i.PerStreamKB, i.BaseCPUPercent, i.CPUPercent, i.WindowSec, i.Threads)
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	if r.Error != "" {
		fmt.Fprintln(w, "error:", r.Error)
	}
}

// requestFailed says why a bench request did not get the status it wanted: the
// transport error (wrapped), or the status and the start of the body.
func requestFailed(what string, status int, body []byte, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%s: %d %s", what, status, truncate(body, 200))
}
