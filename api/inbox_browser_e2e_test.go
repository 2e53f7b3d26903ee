package api_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/herald-notify/herald/internal/apitest"
)

// chromiumPath finds Debian's chromium (HERALD_CHROMIUM overrides). Without it
// the browser test skips, except in CI, where scripts/test.sh installs it and
// the test must run.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("HERALD_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed, and in CI the browser test must run (scripts/test.sh installs Debian's chromium)")
	}
	t.Skip("chromium is not installed (make test installs it; or apt-get install chromium)")
	return ""
}

// The component in a real headless Chromium: open the demo page with a user
// token, send a notification through the API, see it appear and the badge go
// to 1, click "Mark read", see the badge drop to 0 (and the server agree).
func TestInboxComponentInChromium(t *testing.T) {
	bin := chromiumPath(t)
	h := apitest.Start(t, apitest.Options{})
	tenantID, key, token := inboxUser(t, h, "ada")

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(900, 700),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	defer cancelTimeout()

	const root = `document.querySelector('herald-inbox').shadowRoot`
	text := func(sel string) string {
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(() => { const e = %s.querySelector(%q); return e ? e.textContent : ""; })()`, root, sel)))
		if err != nil {
			t.Fatalf("read %s: %v", sel, err)
		}
		return s
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s (badge %q, status %q, list %q)", what, text(".badge"), text(".status"), text("ul"))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	if err := chromedp.Do(ctx, chromedp.Navigate(h.URL+"/inbox/demo#user=ada&token="+token),
		chromedp.WaitReady(chromedp.CSS("herald-inbox"))); err != nil {
		t.Fatal(err)
	}
	waitFor("the stream to be live", func() bool { return text(".status") == "live" })
	if b := text(".badge"); b != "0" {
		t.Fatalf("badge before = %q", b)
	}

	sendInApp(t, h, key, "ada", "Your order shipped")
	waitFor("the item and badge 1", func() bool {
		return text(".badge") == "1" && strings.Contains(text("ul"), "Your order shipped")
	})

	shot := os.Getenv("HERALD_INBOX_SCREENSHOT") // e.g. docs/inbox-component.png
	if shot != "" {
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(shot, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// A real click (mouse events at the button's position) on "Mark read".
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.JSPath(root+`.querySelector('button[data-action="read"]')`))); err != nil {
		t.Fatal(err)
	}
	waitFor("badge 0", func() bool { return text(".badge") == "0" })
	c, recount := inboxCounts(t, h, tenantID, "ada")
	if c.Unread != 0 || c != recount {
		t.Fatalf("server counts after the click: %+v (recount %+v)", c, recount)
	}
	// And an item read elsewhere (another device) drops in live too.
	id := sendInApp(t, h, key, "ada", "Second")
	waitFor("badge 1 again", func() bool { return text(".badge") == "1" })
	h.MustDo(http.StatusOK, http.MethodPost, "/v1/users/ada/inbox/"+id+"/archive", token, nil)
	waitFor("the archived item to leave", func() bool { return text(".badge") == "0" && !strings.Contains(text("ul"), "Second") })
}

// The component places each new item where its sequence says: "scheduled"
// is accepted first with send_at 8 s ahead; "flaky early" next, but its inbox
// write fails until "later" is in the inbox (retried), so it arrives late and
// goes below "later"; "scheduled" becomes due and lands on top (numbered last,
// though accepted first and older by created_at than both).
func TestInboxComponentPlacesLateItemsInChromium(t *testing.T) {
	bin := chromiumPath(t)
	h := apitest.Start(t, apitest.Options{})
	tenantID, key, token := inboxUser(t, h, "ada")
	refused := h.FailInboxWrites(tenantID, "flaky")

	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(bin), chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true), chromedp.UserDataDir(t.TempDir()))
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	defer cancelTimeout()

	const root = `document.querySelector('herald-inbox').shadowRoot`
	titles := func() string {
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](root+`.querySelector('.status') ? [...`+root+`.querySelectorAll('li .title')].map((e) => e.textContent).join("|") + "#" + `+root+`.querySelector('.status').textContent : ""`))
		if err != nil {
			t.Fatalf("read the list: %v", err)
		}
		return s
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(h.URL+"/inbox/demo#user=ada&token="+token),
		chromedp.WaitReady(chromedp.CSS("herald-inbox"))); err != nil {
		t.Fatal(err)
	}
	h.Eventually(30*time.Second, "the stream to be live", func() bool { return strings.HasSuffix(titles(), "#live") })

	h.Accept(key, map[string]any{"user_id": "ada", "template_id": "hi", "channels": []string{"in_app"}, "idempotency_key": freshKey("sched"),
		"data": map[string]any{"title": "scheduled", "body": "b"}, "send_at": time.Now().Add(8 * time.Second).UTC().Format(time.RFC3339Nano)})
	early := sendInApp(t, h, key, "ada", "flaky early")
	// "later" is sent once the early item's write has been refused: sent at
	// once, its run could write before the early one first tries.
	h.Eventually(30*time.Second, "the early item's write refused", func() bool { return refused() >= 1 })
	sendInApp(t, h, key, "ada", "later")
	waitDelivered(h, key, early)
	h.Eventually(30*time.Second, "scheduled on top, early at the bottom", func() bool { return titles() == "scheduled|later|flaky early#live" })
	if refused() < 1 {
		t.Fatal("the early item's write was never refused")
	}
}
