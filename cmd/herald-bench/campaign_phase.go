package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
)

// benchUserID is the i-th user of a phase; personalData is that user's list
// data (the code is unique per user within the phase, so a recipient's message
// proves it carries their own data).
func benchUserID(prefix string, i int) string { return fmt.Sprintf("%s-%07d", prefix, i) }

func personalData(i int) (name, code string) {
	return "Name " + strconv.Itoa(i), fmt.Sprintf("K%07d", i)
}

// createUsers bulk-inserts n users of the phase (email and phone each; a device
// token each with push) and returns their ids.
func (b *campaignBench) createUsers(ctx context.Context, prefix string, n int, push bool) ([]string, error) {
	const chunk = 10_000
	users := make([]string, n)
	start := time.Now()
	for lo := 0; lo < n; lo += chunk {
		part := make([]store.User, 0, chunk)
		for i := lo; i < min(n, lo+chunk); i++ {
			id := benchUserID(prefix, i)
			email, phone := id+"@bench.example", fmt.Sprintf("+1555%07d", i)
			users[i] = id
			part = append(part, store.User{UserID: id, Email: &email, Phone: &phone})
		}
		if err := b.st.InsertUsers(ctx, b.tenant, part); err != nil {
			return nil, err
		}
		if push {
			if _, err := b.pool.Exec(ctx, `
				INSERT /* herald-bench */ INTO push_tokens (tenant_id, user_id, token, platform)
				SELECT $1, u, 'bench-device-' || u, 'android' FROM unnest($2::text[]) AS u
				ON CONFLICT DO NOTHING`, b.tenant, users[lo:min(n, lo+chunk)]); err != nil {
				return nil, err
			}
		}
	}
	b.logf("%s: %d users inserted in %.1f s (bulk%s)", prefix, n, time.Since(start).Seconds(), map[bool]string{true: ", with device tokens"}[push])
	return users, nil
}

// scenarioPhase runs one campaign phase: its users, its list, the campaign. It
// returns the list for the isolation phase.
func (b *campaignBench) scenarioPhase(ctx context.Context, sc scenario, n int) (CampaignPhase, string, error) {
	ph := CampaignPhase{Key: sc.key, Name: sc.name, Channels: sc.channels, Recipients: n, RatePerSecond: sc.rate, SettleSec: b.settle(ctx)}
	runtime.GC()
	b.rss.Store(readRSS())
	users, err := b.createUsers(ctx, sc.key, n, slices.Contains(sc.channels, herald.ChannelPush))
	if err != nil {
		return ph, "", err
	}
	line := func(i int) string { return users[i] }
	header := "user_id"
	if sc.personal {
		header = "user_id,name,code"
		line = func(i int) string {
			name, code := personalData(i)
			return users[i] + "," + name + "," + code
		}
	}
	listID, upload, err := b.uploadList(ctx, sc.key, n, header, line)
	if err != nil {
		return ph, "", err
	}
	ph.UploadSec = roundTo(upload.Seconds(), 2)
	ph.UploadPer10kSec = roundTo(upload.Seconds()*10_000/float64(n), 3)
	b.logf("%s: list of %d uploaded in %.2f s", sc.key, n, upload.Seconds())
	if b.o.analyze {
		if _, err := b.pool.Exec(ctx, `ANALYZE /* herald-bench */ users, recipient_list_members, push_tokens`); err != nil {
			return ph, "", err
		}
	}
	err = b.campaign(ctx, &ph, sc, listID, false)
	if err == nil && sc.personal {
		ph.ContentCheck, err = b.checkContent(ctx, &ph, users, sc.channels)
	}
	return ph, listID, err
}

// uploadList streams a CSV list of n lines to POST /v1/lists.
func (b *campaignBench) uploadList(ctx context.Context, name string, n int, header string, line func(int) string) (string, time.Duration, error) {
	start := time.Now()
	pr, pw := io.Pipe()
	go func() {
		w := bufio.NewWriter(pw)
		_, _ = w.WriteString(header + "\n")
		for i := range n {
			_, _ = w.WriteString(line(i) + "\n")
		}
		_ = w.Flush()
		_ = pw.Close()
	}()
	status, raw, err := b.post(ctx, http.MethodPost, "/v1/lists?name=bench-"+name, "text/csv", pr)
	_ = pr.CloseWithError(io.ErrClosedPipe) // the writer stops if the server answered early
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
	if err := json.Unmarshal(raw, &l); err != nil || l.Members != n {
		return "", 0, fmt.Errorf("POST /v1/lists: %s", truncate(raw, 300))
	}
	return l.ListID, time.Since(start), nil
}

// campaign starts a campaign of sc to the list and waits for it to complete;
// with critical, critical notifications are sent meanwhile and their latency
// kept. It fills ph's measures, the deliveries sent and the server's drain.
func (b *campaignBench) campaign(ctx context.Context, ph *CampaignPhase, sc scenario, listID string, critical bool) error {
	id := "bench-" + ph.Key + "-" + randomHex(3)
	ph.CampaignID = id
	b.logf("%s: campaign %s to %d recipients (%v%s)", ph.Name, id, ph.Recipients, sc.channels,
		map[bool]string{true: fmt.Sprintf(", rate_per_second %g", sc.rate)}[sc.rate > 0])
	req := map[string]any{"campaign_id": id, "template_id": sc.template, "channels": sc.channels,
		"audience": map[string]any{"list_id": listID}}
	if !sc.personal {
		req["data"] = map[string]any{"title": "Spring sale", "body": "20% off"}
	}
	if sc.rate > 0 {
		req["rate_per_second"] = sc.rate
	}
	body, _ := json.Marshal(req)
	var lat []time.Duration
	err := b.measure(ctx, ph, func() error {
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
		return b.awaitCampaign(ctx, id, ph.Recipients)
	})
	if len(lat) > 0 {
		slices.Sort(lat)
		ph.CriticalN = len(lat)
		ph.CriticalP50Ms = roundTo(float64(lat[len(lat)/2])/float64(time.Millisecond), 1)
		ph.CriticalP99Ms = roundTo(float64(lat[min(len(lat)-1, int(math.Ceil(0.99*float64(len(lat))))-1)])/float64(time.Millisecond), 1)
	}
	if err != nil {
		return err
	}
	var started, finished *time.Time
	if err := b.pool.QueryRow(ctx, `SELECT /* herald-bench */ started_at, finished_at FROM campaigns WHERE tenant_id = $1 AND id = $2`,
		b.tenant, id).Scan(&started, &finished); err != nil {
		return err
	}
	if started != nil && finished != nil && finished.After(*started) {
		ph.DrainSec = roundTo(finished.Sub(*started).Seconds(), 2)
		ph.DrainPerSec = roundTo(float64(ph.Recipients)/finished.Sub(*started).Seconds(), 1)
	}
	if ph.SteadyPerSec, err = b.steadyRate(ctx, id); err != nil {
		return err
	}
	ph.Expected = int64(ph.Recipients * len(sc.channels))
	return b.pool.QueryRow(ctx, `
		SELECT /* herald-bench */ count(*) FROM notifications n JOIN deliveries d ON d.tenant_id = n.tenant_id AND d.notification_id = n.id
		WHERE n.tenant_id = $1 AND n.campaign_id = $2 AND d.status IN ('sent', 'delivered')`, b.tenant, id).Scan(&ph.Sent)
}

// steadyRate is the campaign's recipients written after its first batch over
// the time from the first batch to the last (a batch's notifications share
// their accepted_at): one row per batch, so it stays linear at any size.
func (b *campaignBench) steadyRate(ctx context.Context, id string) (float64, error) {
	rows, err := b.pool.Query(ctx, `
		SELECT /* herald-bench */ accepted_at, count(*) FROM notifications
		WHERE tenant_id = $1 AND campaign_id = $2 GROUP BY accepted_at ORDER BY accepted_at`, b.tenant, id)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var first, last time.Time
	var after int
	for rows.Next() {
		var at time.Time
		var n int
		if err := rows.Scan(&at, &n); err != nil {
			return 0, err
		}
		if first.IsZero() {
			first = at
		} else {
			after += n
		}
		last = at
	}
	if err := rows.Err(); err != nil || !last.After(first) {
		return 0, err
	}
	return roundTo(float64(after)/last.Sub(first).Seconds(), 1), nil
}

// awaitCampaign polls the campaign's status (one primary-key read every 50 ms,
// so the phase's time is not rounded up to a slow poll) until it completed.
func (b *campaignBench) awaitCampaign(ctx context.Context, id string, size int) error {
	last := time.Now()
	for {
		var status string
		if err := b.pool.QueryRow(ctx, `SELECT /* herald-bench */ status FROM campaigns WHERE tenant_id = $1 AND id = $2`,
			b.tenant, id).Scan(&status); err != nil {
			return fmt.Errorf("campaign %s: %w", id, err)
		}
		switch status {
		case string(herald.CampaignCompleted):
			return nil
		case string(herald.CampaignFailed), string(herald.CampaignCancelled):
			_, raw, _ := b.post(ctx, http.MethodGet, "/v1/campaigns/"+id, "", nil)
			return fmt.Errorf("campaign %s ended %s: %s", id, status, truncate(raw, 300))
		}
		if time.Since(last) > 5*time.Second {
			var processed int
			_ = b.pool.QueryRow(ctx, `SELECT /* herald-bench */ count(*) FROM notifications WHERE tenant_id = $1 AND campaign_id = $2`,
				b.tenant, id).Scan(&processed)
			b.logf("  %s: %s, %d of %d recipients written", id, status, processed, size)
			last = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// checkContent reads the sandbox messages of up to 20 recipients spread over the
// list and checks that each channel's message carries the recipient's own name
// and code: "ok (n of n)" or "MISMATCH ...".
func (b *campaignBench) checkContent(ctx context.Context, ph *CampaignPhase, users []string, channels []herald.Channel) (string, error) {
	const sample = 20
	want := map[string]int{} // user id → index
	var ids []string
	for k := range min(sample, len(users)) {
		i := k * len(users) / min(sample, len(users))
		want[users[i]] = i
		ids = append(ids, users[i])
	}
	rows, err := b.pool.Query(ctx, `
		SELECT /* herald-bench */ n.user_id, s.channel, coalesce(s.subject, '') || ' ' || s.body
		FROM notifications n JOIN sandbox_messages s ON s.tenant_id = n.tenant_id AND s.notification_id = n.id
		WHERE n.tenant_id = $1 AND n.campaign_id = $2 AND n.user_id = ANY($3)`, b.tenant, ph.CampaignID, ids)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	got := map[string]bool{}
	var bad []string
	for rows.Next() {
		var user, channel, content string
		if err := rows.Scan(&user, &channel, &content); err != nil {
			return "", err
		}
		name, code := personalData(want[user])
		if !strings.Contains(content, code) || (channel != string(herald.ChannelSMS) && !strings.Contains(content, name)) {
			bad = append(bad, fmt.Sprintf("%s/%s: %q", user, channel, truncate([]byte(content), 80)))
			continue
		}
		got[user+"/"+channel] = true
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	total := len(ids) * len(channels)
	if len(bad) > 0 || len(got) != total {
		return fmt.Sprintf("MISMATCH (%d of %d sampled messages carry the recipient's own data; %s)", len(got), total, strings.Join(bad[:min(2, len(bad))], "; ")), nil
	}
	return fmt.Sprintf("ok (%d of %d)", len(got), total), nil
}

// sampleRSS keeps the peak resident set size of this process.
func (b *campaignBench) sampleRSS(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
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

// measure runs fn and fills the phase's time, CPU, actions, database cost and
// peak RSS (kept from the phase's start, see scenarioPhase).
func (b *campaignBench) measure(ctx context.Context, ph *CampaignPhase, fn func() error) error {
	actions0 := b.temporalActions(ctx)
	db0 := b.db.snap(ctx)
	snap0 := b.cpu.snap()
	start := time.Now()
	err := fn()
	ph.Seconds = roundTo(time.Since(start).Seconds(), 2)
	snap1 := b.cpu.snap()
	ph.DB = b.db.cost(db0, b.db.snap(ctx), ph.Recipients)
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
	ph := CampaignPhase{Key: "baseline", Name: "baseline: one notification each", Recipients: len(users),
		Channels: []herald.Channel{herald.ChannelInApp, herald.ChannelEmail}}
	b.logf("baseline: %d single notifications (in_app + email)", len(users))
	runtime.GC()
	b.rss.Store(readRSS())
	err := b.measure(ctx, &ph, func() error {
		r := closedLoop(ctx, len(users), b.o.concurrency, 30*time.Second, func(ctx context.Context, i int) (outcome, error) {
			body, _ := json.Marshal(map[string]any{"user_id": users[i], "template_id": tmplIdentical, "channels": ph.Channels,
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
		return b.awaitSent(ctx, "n.campaign_id IS NULL AND n.template_id = '"+tmplIdentical+"'", 2*len(users))
	})
	ph.Expected = int64(2 * len(users))
	if err == nil {
		ph.Sent = ph.Expected
	}
	return ph, err
}

// awaitSent polls until want deliveries of the tenant's notifications matching
// where are sent or delivered.
func (b *campaignBench) awaitSent(ctx context.Context, where string, want int) error {
	for {
		var n int
		if err := b.pool.QueryRow(ctx, `
			SELECT /* herald-bench */ count(*) FROM notifications n JOIN deliveries d ON d.tenant_id = n.tenant_id AND d.notification_id = n.id
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
			SELECT /* herald-bench */ extract(epoch FROM d.delivered_at - n.accepted_at) FROM notifications n
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
