package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/herald-notify/herald/client"
)

// Progress of an upload or a campaign: on a terminal a live bar drawn by
// progressbar (a well-kept library: widths, throttling, byte units and the
// upload's rate and ETA are its job), otherwise one plain line per interval, for
// logs and CI.

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

type progressKind int

const (
	progressUpload progressKind = iota
	progressCampaign
)

// progressState is one sample: bytes (upload) or recipients (campaign) done.
type progressState struct {
	done, total int64
	lines       int64
	campaign    *client.Campaign
}

type progress struct {
	kind     progressKind
	out      io.Writer
	terminal bool
	interval time.Duration
	total    int64
	started  time.Time
	bar      *progressbar.ProgressBar // terminal only

	mu      sync.Mutex
	last    progressState
	stopped chan struct{}
	ticker  sync.WaitGroup
	sample  func() progressState
}

func (r *remote) newProgress(kind progressKind, total int64, interval time.Duration) *progress {
	if interval <= 0 {
		interval = 5 * time.Second
		if r.terminal {
			interval = 200 * time.Millisecond
		}
	}
	p := &progress{kind: kind, out: r.out, terminal: r.terminal, interval: interval, total: total,
		started: time.Now(), stopped: make(chan struct{})}
	if !r.terminal {
		return p
	}
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(r.out),
		progressbar.OptionSetWidth(24),
		progressbar.OptionThrottle(100 * time.Millisecond),
		progressbar.OptionSetRenderBlankState(true),
		progressbar.OptionShowCount(),
		progressbar.OptionUseANSICodes(true),
		progressbar.OptionSetTheme(progressbar.Theme{Saucer: "█", SaucerPadding: "░", BarStart: "│", BarEnd: "│"}),
	}
	switch kind {
	case progressUpload:
		opts = append(opts, progressbar.OptionShowBytes(true), progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetDescription("uploading"), progressbar.OptionShowElapsedTimeOnFinish())
	case progressCampaign:
		// Herald's own rate and ETA (current_rate, eta_seconds) are shown, not the
		// bar's: a watch that starts half way would see a burst.
		opts = append(opts, progressbar.OptionSetPredictTime(false), progressbar.OptionSetItsString("recipients"),
			progressbar.OptionSetMaxDetailRow(1), progressbar.OptionShowDescriptionAtLineEnd())
	}
	p.bar = progressbar.NewOptions64(total, opts...)
	return p
}

// start samples and shows progress every interval until stop (uploads: the
// sample reads counters the upload moves).
func (p *progress) start(sample func() progressState) {
	p.sample = sample
	p.show(sample())
	p.ticker.Add(1)
	go func() {
		defer p.ticker.Done()
		t := time.NewTicker(p.interval)
		defer t.Stop()
		for {
			select {
			case <-p.stopped:
				return
			case <-t.C:
				p.show(sample())
			}
		}
	}()
}

// stop ends the display with a last sample; ok says the work finished (the bar is
// then filled).
func (p *progress) stop(ok bool) {
	close(p.stopped)
	p.ticker.Wait()
	final := p.sample()
	if ok && p.kind == progressUpload {
		final.total = final.done
	}
	p.show(final)
	p.finish(ok)
}

// finish ends the bar (filled when ok) and its line.
func (p *progress) finish(ok bool) {
	if p.bar != nil {
		if ok {
			_ = p.bar.Finish()
		}
		fmt.Fprintln(p.out)
	}
}

func (p *progress) show(s progressState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last = s
	if p.bar != nil {
		p.showBar(s)
		return
	}
	p.showLine(s)
}

func (p *progress) showBar(s progressState) {
	if s.total > 0 && s.total != p.bar.GetMax64() {
		p.bar.ChangeMax64(s.total)
	}
	switch p.kind {
	case progressUpload:
		p.bar.Describe(fmt.Sprintf("uploading %d lines", s.lines))
	case progressCampaign:
		if s.campaign != nil {
			p.bar.Describe(campaignRate(s.campaign))
			_ = p.bar.AddDetail(fmt.Sprintf("  %s: %s", s.campaign.Status, outcomes(s.campaign)))
		}
	}
	_ = p.bar.Set64(s.done)
}

func (p *progress) showLine(s progressState) {
	switch p.kind {
	case progressUpload:
		elapsed := time.Since(p.started).Seconds()
		line := fmt.Sprintf("uploading: %s", humanBytes(s.done))
		if p.total > 0 {
			line += fmt.Sprintf(" of %s (%d%%)", humanBytes(p.total), percent(s.done, p.total))
		}
		line += fmt.Sprintf(", %d lines", s.lines)
		if elapsed > 0 && s.done > 0 {
			rate := float64(s.done) / elapsed
			line += fmt.Sprintf(", %s/s", humanBytes(int64(rate)))
			if p.total > s.done {
				line += fmt.Sprintf(", eta %s", (time.Duration(float64(p.total-s.done)/rate) * time.Second).Round(time.Second))
			}
		}
		fmt.Fprintln(p.out, line)
	case progressCampaign:
		cp := s.campaign
		line := fmt.Sprintf("campaign %s %s: %d", cp.CampaignID, cp.Status, cp.RecipientsProcessed)
		if s.total > 0 {
			line += fmt.Sprintf("/%d recipients (%d%%)", s.total, percent(s.done, s.total))
		} else {
			line += " recipients"
		}
		fmt.Fprintf(p.out, "%s; %s; %s\n", line, outcomes(cp), campaignRate(cp))
	}
}

// note shows a passing problem: under the bar on a terminal, as a line otherwise.
func (p *progress) note(msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		_ = p.bar.AddDetail("  " + msg)
		return
	}
	fmt.Fprintln(p.out, msg)
}

// campaignRate is Herald's rate and ETA for the campaign.
func campaignRate(cp *client.Campaign) string {
	s := fmt.Sprintf("%.0f recipients/s", cp.CurrentRate)
	if cp.EtaSeconds != nil {
		s += ", eta " + (time.Duration(*cp.EtaSeconds) * time.Second).String()
	}
	return s
}

// outcomes sums the campaign's deliveries by outcome over its channels, the
// outcomes with none left out ("delivered 1200, suppressed 12 (opted_out_channel
// 12), failed 3").
func outcomes(cp *client.Campaign) string {
	var sum client.CampaignChannelCounts
	suppressed := map[string]int{}
	for _, c := range cp.Counts {
		sum.Queued += c.Queued
		sum.Deferred += c.Deferred
		sum.Retrying += c.Retrying
		sum.Sent += c.Sent
		sum.Delivered += c.Delivered
		sum.Failed += c.Failed
		sum.DeadLettered += c.DeadLettered
		sum.Cancelled += c.Cancelled
		for reason, n := range c.Suppressed {
			suppressed[reason] += n
		}
	}
	var parts []string
	add := func(name string, n int) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", name, n))
		}
	}
	add("delivered", sum.Delivered)
	add("sent", sum.Sent)
	total, reasons := 0, make([]string, 0, len(suppressed))
	for reason, n := range suppressed {
		total += n
		reasons = append(reasons, fmt.Sprintf("%s %d", reason, n))
	}
	sort.Strings(reasons)
	if total > 0 {
		parts = append(parts, fmt.Sprintf("suppressed %d (%s)", total, strings.Join(reasons, ", ")))
	}
	add("failed", sum.Failed)
	add("dead-lettered", sum.DeadLettered)
	add("retrying", sum.Retrying)
	add("deferred", sum.Deferred)
	add("cancelled", sum.Cancelled)
	add("queued", sum.Queued)
	if len(parts) == 0 {
		return "no deliveries yet"
	}
	return strings.Join(parts, ", ")
}

// campaignSummary is the last line of a watch.
func campaignSummary(cp *client.Campaign) string {
	s := fmt.Sprintf("campaign %s %s: %d recipients", cp.CampaignID, cp.Status, cp.RecipientsProcessed)
	if cp.StartedAt != nil && cp.FinishedAt != nil {
		s += " in " + cp.FinishedAt.Sub(*cp.StartedAt).Round(100*time.Millisecond).String()
	}
	s += "; " + outcomes(cp)
	if cp.Audience.UnknownUsers > 0 {
		s += fmt.Sprintf("; %d audience ids named no user", cp.Audience.UnknownUsers)
	}
	return s
}

func percent(done, total int64) int64 {
	if total <= 0 {
		return 0
	}
	return done * 100 / total
}

func humanBytes(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}

// countingReader counts the bytes and lines read from f, and rewinds with it
// (so the client may resend the file after a 429 or 503).
type countingReader struct {
	f        *os.File
	mu       sync.Mutex
	n, lines int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.f.Read(b)
	lines := int64(bytes.Count(b[:n], newline))
	c.mu.Lock()
	c.n += int64(n)
	c.lines += lines
	c.mu.Unlock()
	return n, err
}

var newline = []byte{'\n'}

func (c *countingReader) Seek(offset int64, whence int) (int64, error) {
	pos, err := c.f.Seek(offset, whence)
	if err == nil {
		c.mu.Lock()
		c.n, c.lines = 0, 0
		c.mu.Unlock()
	}
	return pos, err
}

func (c *countingReader) counts() (n, lines int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n, c.lines
}
