package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-notify/herald/client"
	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/store"
)

// The client commands tested as a person uses them: typed into a shell running
// under tmux (send-keys), the screen read back (capture-pane), and run with the
// output going to a file, against a real Herald (API + worker).

// tmuxBin finds tmux (scripts/ensure-tools.sh installs Debian's for make test);
// in CI its absence fails the test, elsewhere it skips it.
func tmuxBin(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("tmux")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("tmux is not installed (make test installs it: scripts/lib.sh ensure_tmux)")
		}
		t.Skip("tmux is not installed: apt-get install tmux (make test installs it)")
	}
	return p
}

// screen is a shell in a tmux session of its own (its own server socket).
type screen struct {
	t            *testing.T
	tmux, socket string
}

func newScreen(t *testing.T, env ...string) *screen {
	t.Helper()
	s := &screen{t: t, tmux: tmuxBin(t), socket: filepath.Join(t.TempDir(), "tmux.sock")}
	args := []string{"new-session", "-d", "-s", "cli", "-x", "150", "-y", "24"}
	for _, e := range env {
		args = append(args, "-e", e)
	}
	args = append(args, "env", "PS1=$ ", "TERM=xterm-256color", "bash", "--norc", "--noprofile")
	s.run(args...)
	t.Cleanup(func() { _ = exec.Command(s.tmux, "-S", s.socket, "kill-server").Run() })
	return s
}

func (s *screen) run(args ...string) string {
	s.t.Helper()
	out, err := exec.Command(s.tmux, append([]string{"-S", s.socket}, args...)...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("tmux %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// typeLine types line and Enter.
func (s *screen) typeLine(line string) {
	s.t.Helper()
	s.run("send-keys", "-t", "cli", "-l", line)
	s.run("send-keys", "-t", "cli", "Enter")
}

// clear clears the screen and waits until it is clear, so the next await sees
// only what the next command prints.
func (s *screen) clear() {
	s.t.Helper()
	s.typeLine("clear")
	deadline := time.Now().Add(10 * time.Second)
	for exitOnScreen.MatchString(s.capture()) {
		if time.Now().After(deadline) {
			s.t.Fatalf("the screen did not clear:\n%s", s.capture())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// capture is what the pane shows now.
func (s *screen) capture() string {
	s.t.Helper()
	return s.run("capture-pane", "-p", "-t", "cli")
}

// await polls the screen until it matches re and returns it.
func (s *screen) await(re *regexp.Regexp, within time.Duration) string {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for {
		sc := s.capture()
		if re.MatchString(sc) {
			return sc
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the screen never showed %s; it shows:\n%s", re, sc)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cliBinary builds the herald binary once for the CLI tests (5 s a build), in a
// directory TestMain removes.
func cliBinary(t *testing.T) string {
	t.Helper()
	cliBuild.Lock()
	defer cliBuild.Unlock()
	if cliBuild.path != "" {
		return cliBuild.path
	}
	dir, err := os.MkdirTemp("", "herald-cli-test-")
	if err != nil {
		t.Fatal(err)
	}
	cliBuild.dir = dir
	bin := filepath.Join(dir, "herald")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build herald: %v\n%s", err, out)
	}
	cliBuild.path = bin
	return bin
}

var cliBuild struct {
	sync.Mutex
	dir, path string
}

func TestMain(m *testing.M) {
	code := m.Run()
	if cliBuild.dir != "" {
		_ = os.RemoveAll(cliBuild.dir)
	}
	os.Exit(code)
}

// cliSetup is a Herald with a tenant, a template and n users, the herald binary,
// and a CSV audience of those users and one unknown id.
type cliSetup struct {
	h                  *apitest.Harness
	key, bin, dir, csv string
	api                *client.Client
}

func newCLISetup(t *testing.T, n int) *cliSetup {
	t.Helper()
	h := apitest.Start(t, apitest.Options{})
	tenantID, key := h.TenantWith("cli", "welcome")
	users := make([]store.User, n)
	var csv strings.Builder
	csv.WriteString("user_id,name\n")
	for i := range users {
		users[i] = store.User{UserID: fmt.Sprintf("u%05d", i)}
		fmt.Fprintf(&csv, "u%05d,User %d\n", i, i)
	}
	csv.WriteString("ghost,Nobody\n")
	if err := h.Store.InsertUsers(context.Background(), tenantID, users); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "audience.csv")
	if err := os.WriteFile(path, []byte(csv.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	api, err := client.New(h.URL, key)
	if err != nil {
		t.Fatal(err)
	}
	return &cliSetup{h: h, key: key, bin: cliBinary(t), dir: dir, csv: path, api: api}
}

func (c *cliSetup) env() []string { return []string{"HERALD_URL=" + c.h.URL, "HERALD_KEY=" + c.key} }

// runToFile runs the herald binary with its output going to a file (not a
// terminal) and returns what it wrote and its exit status.
func (c *cliSetup) runToFile(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out := filepath.Join(c.dir, fmt.Sprintf("out-%d.txt", time.Now().UnixNano()))
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(c.bin, args...)
	cmd.Env = append(os.Environ(), c.env()...)
	cmd.Stdout, cmd.Stderr = f, f
	err = cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), code
}

var (
	listIDOnScreen = regexp.MustCompile(`list (lst_[0-9a-f]+) \(audience\.csv\): 302 lines, 301 members, 1 unknown users \(e\.g\. ghost\)`)
	exitOnScreen   = regexp.MustCompile(`exit=(\d+)`)
)

// TestCLIUnderTmux: a list upload, a user import and a campaign started with
// --watch, typed into a shell: the uploads' bars end full with their summaries, the watch's bar
// moves with the recipients processed, outcomes, Herald's rate and ETA, and ends
// with the summary and exit status 0; a second campaign cancelled from another
// command ends its watch with exit status 4.
func TestCLIUnderTmux(t *testing.T) {
	c := newCLISetup(t, 300)
	s := newScreen(t, c.env()...)

	s.typeLine(c.bin + " lists upload " + c.csv + `; echo "exit=$?"`)
	sc := s.await(exitOnScreen, 30*time.Second)
	m := listIDOnScreen.FindStringSubmatch(sc)
	if m == nil || !strings.Contains(sc, "exit=0") {
		t.Fatalf("the upload's screen:\n%s", sc)
	}
	listID := m[1]
	if !regexp.MustCompile(`uploading 302 lines\s+100% │█+│`).MatchString(sc) {
		t.Fatalf("no full upload bar on the screen:\n%s", sc)
	}

	// Users imported from NDJSON: one of the existing users changed, two new.
	people := filepath.Join(c.dir, "people.ndjson")
	if err := os.WriteFile(people, []byte(`{"user_id":"u00000","name":"Ada","email":"ada@example.com"}
{"user_id":"newcomer1","email":"n1@example.com","topics":["news"]}
{"user_id":"newcomer2","locale":"fr-FR"}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	s.clear()
	s.typeLine(c.bin + " users import " + people + `; echo "exit=$?"`)
	sc = s.await(exitOnScreen, 30*time.Second)
	if !strings.Contains(sc, "users imported: 3 users from 3 lines: 2 created, 1 updated, 0 unchanged") ||
		!regexp.MustCompile(`uploading 3 lines\s+100% │█+│`).MatchString(sc) || !strings.Contains(sc, "exit=0") {
		t.Fatalf("the import's screen:\n%s", sc)
	}

	s.clear()
	s.typeLine(c.bin + " campaign start --id spring --template welcome --channels in_app --list " + listID +
		` --data '{"title":"Spring"}' --rate 100 --watch --interval 200ms; echo "exit=$?"`)
	// Part way: the bar, how many of the 300, and outcomes with Herald's rate.
	mid := s.await(regexp.MustCompile(`\d+% │[█░]+│ \(\d+/300\) .* recipients/s, eta [0-9hms]+\n\s+running: delivered \d+.*, queued \d+`), 30*time.Second)
	if !regexp.MustCompile(`campaign spring: (scheduled|running) \(new\)`).MatchString(mid) {
		t.Fatalf("the watch part way:\n%s", mid)
	}
	end := s.await(exitOnScreen, 60*time.Second)
	if !strings.Contains(end, "exit=0") ||
		!regexp.MustCompile(`campaign spring completed: 300 recipients in [0-9.]+m?s; delivered 300; 1 audience ids named no user`).MatchString(end) {
		t.Fatalf("the watch's end:\n%s", end)
	}
	cp, err := c.api.GetCampaign(context.Background(), "spring")
	if err != nil || cp.Status != client.CampaignStatusCompleted || cp.Counts["in_app"].Delivered != 300 {
		t.Fatalf("campaign as the API reads it: %+v %v", cp, err)
	}

	// A slow campaign watched on the screen, cancelled by another command.
	s.clear()
	if out, code := c.runToFile(t, "campaign", "start", "--id", "slow", "--template", "welcome", "--channels", "in_app", "--list", listID, "--rate", "5"); code != 0 {
		t.Fatalf("campaign start: exit %d: %s", code, out)
	}
	s.typeLine(c.bin + ` campaign watch slow --interval 200ms; echo "exit=$?"`)
	s.await(regexp.MustCompile(`running: delivered \d+`), 30*time.Second)
	if out, code := c.runToFile(t, "campaign", "cancel", "slow"); code != 0 || !strings.Contains(out, "campaign slow:") {
		t.Fatalf("campaign cancel: exit %d: %s", code, out)
	}
	end = s.await(exitOnScreen, 30*time.Second)
	if !strings.Contains(end, "exit=4") || !strings.Contains(end, "campaign slow cancelled:") {
		t.Fatalf("the cancelled watch's end:\n%s", end)
	}
}

// TestCLIToAFile: with the output going to a file the upload and the watch print
// plain lines (no escape codes, no carriage returns) every --interval, the
// summaries, and the exit status says how the campaign ended; send --wait prints
// the outcome per channel, and a second send with its key is the duplicate.
func TestCLIToAFile(t *testing.T) {
	c := newCLISetup(t, 200)
	out, code := c.runToFile(t, "lists", "upload", "--interval", "50ms", c.csv)
	if code != 0 {
		t.Fatalf("upload: exit %d: %s", code, out)
	}
	m := regexp.MustCompile(`list (lst_[0-9a-f]+) \(audience\.csv\): 202 lines, 201 members, 1 unknown users`).FindStringSubmatch(out)
	if m == nil || !regexp.MustCompile(`(?m)^uploading: [0-9.]+ [kM]?B of [0-9.]+ [kM]?B \(100%\), 202 lines`).MatchString(out) {
		t.Fatalf("upload output:\n%s", out)
	}
	out, code = c.runToFile(t, "campaign", "start", "--id", "fall", "--template", "welcome", "--channels", "in_app", "--list", m[1],
		"--rate", "100", "--watch", "--interval", "200ms")
	if code != 0 {
		t.Fatalf("watch: exit %d: %s", code, out)
	}
	running := regexp.MustCompile(`(?m)^campaign fall running: \d+/200 recipients \(\d+%\); .*; \d+ recipients/s`).FindAllString(out, -1)
	if len(running) < 2 || !regexp.MustCompile(`(?m)^campaign fall completed: 200 recipients in .*; delivered 200; 1 audience ids named no user$`).MatchString(out) {
		t.Fatalf("watch output (want periodic lines then the summary):\n%s", out)
	}
	if strings.ContainsAny(out, "\x1b\r") {
		t.Fatalf("escape codes or carriage returns in a file:\n%q", out)
	}
	// Paused with `herald campaign pause`: the watch ends with exit status 5;
	// `herald campaign resume` sets it going again.
	if _, err := c.api.CreateCampaign(context.Background(), client.CreateCampaignRequest{CampaignID: client.Ptr("held"),
		TemplateID: "welcome", Channels: []client.ChannelName{"in_app"}, RatePerSecond: client.Ptr(float32(2)), Audience: client.CreateCampaignRequest_Audience{ListID: &m[1]}}); err != nil {
		t.Fatal(err)
	}
	c.h.Eventually(20*time.Second, "the campaign running", func() bool {
		cp, err := c.api.GetCampaign(context.Background(), "held")
		return err == nil && cp.Status == client.CampaignStatusRunning
	})
	if out, code := c.runToFile(t, "campaign", "pause", "held"); code != 0 || !regexp.MustCompile(`(?m)^campaign held: (pausing|paused)$`).MatchString(out) {
		t.Fatalf("campaign pause: exit %d: %s", code, out)
	}
	c.h.Eventually(20*time.Second, "the campaign paused", func() bool {
		cp, err := c.api.GetCampaign(context.Background(), "held")
		return err == nil && cp.Status == client.CampaignStatusPaused
	})
	out, code = c.runToFile(t, "campaign", "watch", "held")
	if code != exitCampaignPaused || !strings.Contains(out, "campaign held paused:") {
		t.Fatalf("watching a paused campaign: exit %d: %s", code, out)
	}
	if out, code := c.runToFile(t, "campaign", "resume", "held"); code != 0 || !strings.Contains(out, "campaign held: ") {
		t.Fatalf("campaign resume: exit %d: %s", code, out)
	}
	c.h.Eventually(20*time.Second, "the campaign resumed", func() bool {
		cp, err := c.api.GetCampaign(context.Background(), "held")
		return err == nil && (cp.Status == client.CampaignStatusRunning || cp.Status == client.CampaignStatusCompleted)
	})
	if out, code := c.runToFile(t, "campaign", "pause", "no-such-campaign"); code != 1 {
		t.Fatalf("pausing a missing campaign: exit %d: %s", code, out)
	}
	// One notification, waited for; the same key again is the same notification.
	out, code = c.runToFile(t, "send", "--user", "u00001", "--template", "welcome", "--channels", "in_app",
		"--data", `{"title":"Hello"}`, "--key", "hello-1", "--wait")
	sent := regexp.MustCompile(`(?m)^notification (n_[0-9a-f]+): queued \(new; idempotency key hello-1\)$`).FindStringSubmatch(out)
	if code != 0 || sent == nil || !strings.Contains(out, "  in_app: delivered\n") || !strings.Contains(out, "notification "+sent[1]+": delivered\n") {
		t.Fatalf("send --wait: exit %d:\n%s", code, out)
	}
	out, code = c.runToFile(t, "send", "--user", "u00001", "--template", "welcome", "--channels", "in_app",
		"--data", `{"title":"Hello"}`, "--key", "hello-1")
	if code != 0 || !strings.Contains(out, "notification "+sent[1]+": delivered (duplicate of one accepted ") {
		t.Fatalf("send again with the key: exit %d:\n%s", code, out)
	}
	// An import whose second user (line 3, after the header) is bad stores nothing and names the line.
	bad := filepath.Join(c.dir, "bad.csv")
	if err := os.WriteFile(bad, []byte("user_id,email\nnew1,n1@example.com\nnew2,not-an-address\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code = c.runToFile(t, "users", "import", bad)
	if code != 1 || !regexp.MustCompile(`400 invalid_line \(line 3\.email\)`).MatchString(out) {
		t.Fatalf("a bad import: exit %d: %s", code, out)
	}
	if _, err := c.api.GetUser(context.Background(), "new1"); err == nil {
		t.Fatal("a user of a refused import was stored")
	}
	// A refusal is exit status 1 with Herald's error.
	out, code = c.runToFile(t, "send", "--user", "nobody", "--template", "welcome")
	if code != 1 || !strings.Contains(out, "422 unknown_user (user_id)") {
		t.Fatalf("send to an unknown user: exit %d: %s", code, out)
	}
	out, code = c.runToFile(t, "campaign", "watch", "nope")
	if code != 1 || !strings.Contains(out, "404 not_found") {
		t.Fatalf("watching a missing campaign: exit %d: %s", code, out)
	}
}

// TestCLIUploadBarMovesOnASlowLink: an upload to a server that reads 4 MB a
// second shows, part way, the bar with the bytes and lines sent so far, the rate
// and the ETA, then ends full with the list's summary. (The server stands for a
// slow link to Herald; the real upload is TestCLIUnderTmux's.)
func TestCLIUploadBarMovesOnASlowLink(t *testing.T) {
	tmuxBin(t)
	var line strings.Builder
	for i := range 400_000 {
		fmt.Fprintf(&line, "user%07d,Somebody\n", i)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "big.csv")
	if err := os.WriteFile(path, []byte("user_id,name\n"+line.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		const rate = 4 << 20 // bytes a second
		buf := make([]byte, 64<<10)
		lines, total, start := 0, 0, time.Now()
		for {
			n, err := r.Body.Read(buf)
			lines += bytes.Count(buf[:n], []byte{'\n'})
			total += n
			if err != nil {
				break
			}
			time.Sleep(time.Until(start.Add(time.Duration(total) * time.Second / rate)))
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"list_id":"lst_0123456789abcdef01234567","name":"big.csv","lines":%d,"members":%d,"unknown_users":%d,"unknown_sample":[],"created_at":"2026-12-03T09:00:00Z"}`,
			lines, lines-1, lines-1)
	}))
	defer srv.Close()
	bin := cliBinary(t)
	s := newScreen(t, "HERALD_URL="+srv.URL, "HERALD_KEY=hk_test")
	s.typeLine(bin + " lists upload " + path + `; echo "exit=$?"`)
	mid := s.await(regexp.MustCompile(`uploading [1-9]\d* lines\s+[1-9]\d?% │█*░+│ \([0-9.]+/[0-9.]+ MB, [0-9.]+ MB/s\) \[\d+s:\d+s\]`), 30*time.Second)
	end := s.await(exitOnScreen, 60*time.Second)
	if !strings.Contains(end, "exit=0") || !strings.Contains(end, "list lst_0123456789abcdef01234567 (big.csv): 400001 lines") ||
		!regexp.MustCompile(`uploading 400001 lines\s+100% │█+│`).MatchString(end) {
		t.Fatalf("part way:\n%s\nat the end:\n%s", mid, end)
	}
}
