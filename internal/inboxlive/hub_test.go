package inboxlive_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/inboxlive"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/testenv"
)

func woken(s *inboxlive.Sub, within time.Duration) bool {
	select {
	case <-s.Wake():
		return true
	case <-time.After(within):
		return false
	}
}

// One LISTEN connection wakes exactly the subscriptions of the users a NOTIFY
// names (one tenant per line, its users tab-separated) and coalesces wake-ups.
func TestHubWakesTheNamedUsers(t *testing.T) {
	pool := testenv.Pool(t)
	h := inboxlive.New(pool.Config().ConnConfig, inboxlive.Limits{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(h.Close)
	tenant := testenv.UniqueName(t, "t")
	ada, err := h.Subscribe(tenant, "ada")
	if err != nil {
		t.Fatal(err)
	}
	bob, _ := h.Subscribe(tenant, "bob")
	deadline := time.Now().Add(10 * time.Second)
	for !h.Listening() {
		if time.Now().After(deadline) {
			t.Fatal("the hub never listened")
		}
		time.Sleep(20 * time.Millisecond)
	}
	woken(ada, 100*time.Millisecond) // the connect-time wake-up
	woken(bob, 100*time.Millisecond)

	notify := func(payload string) {
		if _, err := pool.Exec(context.Background(), `SELECT pg_notify($1, $2)`, store.InboxNotifyChannel, payload); err != nil {
			t.Fatal(err)
		}
	}
	notify(store.NotifyKey(tenant, "ada") + "\n" + store.NotifyKey("other", "bob"))
	if !woken(ada, 5*time.Second) {
		t.Fatal("ada was not woken")
	}
	if woken(bob, 300*time.Millisecond) {
		t.Fatal("bob was woken by another tenant's bob")
	}
	notify(store.NotifyKey(tenant, "ada"))
	notify(store.NotifyKey(tenant, "ada"))
	if !woken(ada, 5*time.Second) {
		t.Fatal("ada was not woken again")
	}
	woken(ada, 300*time.Millisecond) // the second may or may not have coalesced with the first
	notify("other\tada\tbob\n" + tenant + "\tcyd\tbob")
	if !woken(bob, 5*time.Second) {
		t.Fatal("bob, second of his tenant's line, was not woken")
	}
	if woken(ada, 300*time.Millisecond) {
		t.Fatal("ada was woken by another tenant's ada")
	}
	if got := h.Wakeups(); got < 3 {
		t.Fatalf("wake-ups counted = %d, want at least 3", got)
	}
	h.Unsubscribe(ada)
	h.Unsubscribe(ada) // twice is harmless
	if h.Open() != 1 {
		t.Fatalf("open = %d, want 1", h.Open())
	}
}

func TestHubLimits(t *testing.T) {
	pool := testenv.Pool(t)
	h := inboxlive.New(pool.Config().ConnConfig, inboxlive.Limits{PerUser: 2, PerTenant: 3, PerProcess: 4}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(h.Close)
	scope := func(err error) string {
		var e *inboxlive.ErrTooManyStreams
		if errors.As(err, &e) {
			return e.Scope
		}
		return ""
	}
	var subs []*inboxlive.Sub
	for _, u := range []string{"a", "a"} {
		s, err := h.Subscribe("t1", u)
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, s)
	}
	if _, err := h.Subscribe("t1", "a"); scope(err) != "user" {
		t.Fatalf("third stream of a user: %v", err)
	}
	s, _ := h.Subscribe("t1", "b")
	subs = append(subs, s)
	if _, err := h.Subscribe("t1", "c"); scope(err) != "tenant" {
		t.Fatalf("fourth stream of a tenant: %v", err)
	}
	s, _ = h.Subscribe("t2", "a")
	subs = append(subs, s)
	if _, err := h.Subscribe("t3", "a"); scope(err) != "server" {
		t.Fatalf("fifth stream of the process: %v", err)
	}
	h.Unsubscribe(subs[0])
	if _, err := h.Subscribe("t1", "a"); err != nil {
		t.Fatalf("after one closed: %v", err)
	}
}
