package providertest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// Trap is an HTTP server a test means never to be reached: an internal host, the
// host a redirect points at, an attacker's token endpoint. It counts the requests
// that reach it and answers each with the status and body it was made with (a
// marker the test then looks for in what the sender reports). It is closed when
// the test ends.
type Trap struct {
	// URL is the trap's base URL (http://127.0.0.1:PORT).
	URL  string
	hits atomic.Int32
}

// NewTrap starts a Trap answering status and body.
func NewTrap(t testing.TB, status int, body string) *Trap {
	tr := &Trap{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		tr.hits.Add(1)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	tr.URL = srv.URL
	return tr
}

// Hits returns how many requests reached the trap.
func (tr *Trap) Hits() int { return int(tr.hits.Load()) }

// NewRedirector starts an HTTP server that answers every request with a 307 to
// the same path under to (a base URL, such as a Trap's): an API host that sends
// its client elsewhere. It returns the server's base URL; the server is closed
// when the test ends.
func NewRedirector(t testing.TB, to string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, to+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
