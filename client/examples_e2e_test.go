package client_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/client"
	"github.com/herald-notify/herald/internal/apitest"
)

// TestDocExamplesRun builds the example programs of docs/client.md
// (docs/examples/...) and runs them against a real Herald as a reader would,
// with HERALD_URL and HERALD_KEY: the webhook receiver and the inbox stream
// print what the send example causes, and the campaign example follows its
// campaign to the end.
func TestDocExamplesRun(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	_, key := h.TenantWith("examples", "welcome")
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+string(os.PathSeparator),
		"../docs/examples/send", "../docs/examples/campaign", "../docs/examples/inbox-stream", "../docs/examples/webhook-receiver")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the examples: %v\n%s", err, out)
	}
	env := append(os.Environ(), "HERALD_URL="+h.URL, "HERALD_KEY="+key)
	ctx := context.Background()
	hc, err := client.New(h.URL, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hc.PutUser(ctx, "ada", client.PutUserRequest{}); err != nil {
		t.Fatal(err)
	}

	// The webhook receiver, subscribed to delivery events.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ep, err := hc.CreateWebhookEndpoint(ctx, client.WebhookEndpointRequest{URL: client.Ptr("http://" + addr + "/hooks"),
		Events: []client.WebhookEventType{"delivery.delivered"}})
	if err != nil {
		t.Fatal(err)
	}
	receiver := startLines(t, exec.Command(filepath.Join(bin, "webhook-receiver"), "-addr", addr), append(env, "HERALD_WEBHOOK_SECRET="+ep.Secret))
	// The inbox stream, until one item event.
	stream := startLines(t, exec.Command(filepath.Join(bin, "inbox-stream"), "-user", "ada", "-n", "1"), env)
	stream.await(t, regexp.MustCompile(`^ready: 0 unread$`))

	send := exec.Command(filepath.Join(bin, "send"))
	send.Env = env
	out, err := send.CombinedOutput()
	if err != nil {
		t.Fatalf("send: %v\n%s", err, out)
	}
	for _, want := range []string{`(?m)^sent (n_[0-9a-f]+) \(duplicate: false\); again: (n_[0-9a-f]+) \(duplicate: true\)$`,
		`(?m)^refused: 422 unknown_user \(field user_id\)$`, `(?m)^  in_app: delivered$`, `(?m)^status: (delivered|sent)$`} {
		if !regexp.MustCompile(want).Match(out) {
			t.Fatalf("send printed no line like %s:\n%s", want, out)
		}
	}
	ids := regexp.MustCompile(`sent (n_[0-9a-f]+) .* again: (n_[0-9a-f]+)`).FindSubmatch(out)
	if string(ids[1]) != string(ids[2]) {
		t.Fatalf("the retry named another notification: %s", out)
	}
	id := string(ids[1])
	stream.await(t, regexp.MustCompile(`^item\.created: "Notification" \(1 unread\)$`))
	if err := stream.wait(); err != nil {
		t.Fatalf("inbox-stream -n 1 did not end well: %v", err)
	}
	receiver.await(t, regexp.MustCompile(`^msg_[0-9a-f]+ delivery\.delivered: `+id+` in_app delivered$`))

	csv := filepath.Join(t.TempDir(), "audience.csv")
	if err := os.WriteFile(csv, []byte("user_id,title\nada,Spring\nghost,Nobody\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	campaign := exec.Command(filepath.Join(bin, "campaign"), csv)
	campaign.Env = env
	out, err = campaign.CombinedOutput()
	if err != nil {
		t.Fatalf("campaign: %v\n%s", err, out)
	}
	for _, want := range []string{`(?m)^list lst_[0-9a-f]+: 2 members, 1 unknown$`,
		`(?m)^campaign \S+: completed, 1 recipients, 1 delivered in the inbox$`, `(?m)^1 campaigns in all$`} {
		if !regexp.MustCompile(want).Match(out) {
			t.Fatalf("campaign printed no line like %s:\n%s", want, out)
		}
	}
}

// lines is a running program whose output is read line by line.
type lines struct {
	cmd  *exec.Cmd
	out  chan string
	done chan error
}

func startLines(t *testing.T, cmd *exec.Cmd, env []string) *lines {
	t.Helper()
	cmd.Env = env
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	l := &lines{cmd: cmd, out: make(chan string, 100), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			l.out <- sc.Text()
		}
	}()
	go func() { err := cmd.Wait(); pw.Close(); l.done <- err }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return l
}

// await reads lines until one matches re.
func (l *lines) await(t *testing.T, re *regexp.Regexp) {
	t.Helper()
	var seen []string
	deadline := time.After(30 * time.Second)
	for {
		select {
		case line := <-l.out:
			if re.MatchString(line) {
				return
			}
			seen = append(seen, line)
		case <-deadline:
			t.Fatalf("no line like %s; the program printed:\n%s", re, strings.Join(seen, "\n"))
		}
	}
}

func (l *lines) wait() error {
	select {
	case err := <-l.done:
		return err
	case <-time.After(30 * time.Second):
		return fmt.Errorf("still running")
	}
}
