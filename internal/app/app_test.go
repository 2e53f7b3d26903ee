package app

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/config"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// TestServeDrainsInFlightRequests: cancelling the context lets a request in flight
// finish, then Serve returns nil and the port is closed.
func TestServeDrainsInFlightRequests(t *testing.T) {
	entered := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		time.Sleep(300 * time.Millisecond)
		_, _ = io.WriteString(w, "done")
	})
	ln := listen(t)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, HTTPServer(config.Config{}, h, quiet), ln, 5*time.Second) }()

	type result struct {
		status int
		body   string
		err    error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String() + "/slow")
		if err != nil {
			got <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		got <- result{resp.StatusCode, string(b), err}
	}()
	<-entered
	cancel()
	r := <-got
	if r.err != nil || r.status != http.StatusOK || r.body != "done" {
		t.Fatalf("the in-flight request got %d %q %v, want 200 done", r.status, r.body, r.err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after the context ended")
	}
	if c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		c.Close()
		t.Fatal("the API still accepts connections after shutdown")
	}
}

// TestHTTPServerTimeouts: the config's timeouts are the server's, and a client that
// never finishes its headers is cut off after ReadHeaderTimeout.
func TestHTTPServerTimeouts(t *testing.T) {
	cfg := config.Config{HTTPReadHeaderTimeout: 200 * time.Millisecond, HTTPReadTimeout: 2 * time.Second,
		HTTPWriteTimeout: 3 * time.Second, HTTPIdleTimeout: 4 * time.Second}
	srv := HTTPServer(cfg, http.NotFoundHandler(), quiet)
	if srv.ReadHeaderTimeout != cfg.HTTPReadHeaderTimeout || srv.ReadTimeout != cfg.HTTPReadTimeout ||
		srv.WriteTimeout != cfg.HTTPWriteTimeout || srv.IdleTimeout != cfg.HTTPIdleTimeout {
		t.Fatalf("server timeouts %s %s %s %s", srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout)
	}
	ln := listen(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = Serve(ctx, srv, ln, time.Second) }()

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: herald\r\n"); err != nil { // no final CRLF
		t.Fatal(err)
	}
	start := time.Now()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.ReadAll(c) // returns when the server closes the connection
	if took := time.Since(start); took < cfg.HTTPReadHeaderTimeout/2 || took > 2*time.Second {
		t.Fatalf("a client stuck in its headers was held %s, want about ReadHeaderTimeout (%s)", took, cfg.HTTPReadHeaderTimeout)
	}
}
