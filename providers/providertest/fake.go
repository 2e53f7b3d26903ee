// Package providertest holds httptest fakes that speak SendGrid's, Twilio's and
// FCM's wire protocols, so tests drive the real SDKs against a local server. Each
// fake records every request, counts the requests it ACCEPTED (the ones the real
// provider would have turned into a message), and can be told to fail: 500, 429
// with Retry-After, slow, the provider's own permanent-error body, or hold a request
// until the test releases it (for crash tests). All methods are safe for concurrent
// use.
//
// ContractServer (contract.go) plays a provider from its own OpenAPI document in
// providers/testdata and rejects every request that document forbids.
package providertest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/herald-notify/herald/internal/egress"
)

// Request is one request a fake received.
type Request struct {
	Method string
	Path   string
	Query  url.Values
	Header http.Header
	Body   []byte
	// Form is the parsed form body (Twilio), nil otherwise.
	Form url.Values
	// Accepted is true when the fake accepted the message (answered 2xx, or accepted
	// before holding the response).
	Accepted bool
	// MessageID is the id the fake gave an accepted message.
	MessageID string
	// Status is the HTTP status the fake answered (0 while held).
	Status int
	At     time.Time
}

// Behavior is how a fake answers one request. The zero Behavior accepts.
type Behavior struct {
	// Delay is slept before answering (a slow provider). The sleep ends early if the
	// client goes away.
	Delay time.Duration
	// Status, when not 0, is answered instead of accepting: with Header and Body
	// (an empty Body means the provider's own error body for Status).
	Status int
	Header http.Header
	Body   string
	// Hold parks the request until the test calls Release or Reject on it.
	Hold *Hold
}

// Fail500 answers 500 with the provider's own error body for it.
func Fail500() Behavior { return Behavior{Status: http.StatusInternalServerError} }

// Fail503 answers 503 with an optional Retry-After ("" for none).
func Fail503(retryAfter string) Behavior {
	b := Behavior{Status: http.StatusServiceUnavailable}
	if retryAfter != "" {
		b.Header = http.Header{"Retry-After": {retryAfter}}
	}
	return b
}

// Fail429 answers 429 with the given Retry-After value (seconds or an HTTP-date).
func Fail429(retryAfter string) Behavior {
	b := Behavior{Status: http.StatusTooManyRequests}
	if retryAfter != "" {
		b.Header = http.Header{"Retry-After": {retryAfter}}
	}
	return b
}

// Slow accepts after d.
func Slow(d time.Duration) Behavior { return Behavior{Delay: d} }

// Hold is a request parked by a Behavior until the test decides its outcome.
type Hold struct {
	acceptFirst bool
	arrived     chan struct{}
	arriveOnce  sync.Once
	decided     chan Behavior
	decideOnce  sync.Once
}

// NewHold makes a Hold. With acceptFirst, the fake accepts the message (counts it,
// gives it an id) as soon as it arrives and only holds the response: the provider
// has the message but the client does not know yet. Without it, nothing is
// accepted until Release.
func NewHold(acceptFirst bool) *Hold {
	return &Hold{acceptFirst: acceptFirst, arrived: make(chan struct{}), decided: make(chan Behavior, 1)}
}

// Arrived is closed when the held request has arrived (and, with acceptFirst, was
// accepted).
func (h *Hold) Arrived() <-chan struct{} { return h.arrived }

// Release answers the held request with success (accepting it if it was not yet).
// The message counts as accepted even if the client has gone away meanwhile: the
// provider got the whole request.
func (h *Hold) Release() { h.decide(Behavior{}) }

// Reject answers the held request with b instead (only meaningful without
// acceptFirst; an accepted message stays accepted).
func (h *Hold) Reject(b Behavior) { h.decide(b) }

func (h *Hold) decide(b Behavior) { h.decideOnce.Do(func() { h.decided <- b }) }

// protocol is what differs between the providers' fakes.
type protocol interface {
	// route checks method, path and auth; it returns a non-nil error response when
	// the request is not one this fake serves.
	route(r *http.Request) *response
	// validate checks the body; non-nil means the provider would reject it (400).
	validate(req *Request) *response
	// accept answers an accepted message with id.
	accept(req *Request, id string) response
	// newID mints a provider message id.
	newID(seq int) string
	// errorBody is the provider's error body for an HTTP status.
	errorBody(status int) string
}

type response struct {
	status int
	header http.Header
	body   string
}

// Fake is the protocol-independent core of every provider fake.
type Fake struct {
	// URL is the fake's base URL (http://127.0.0.1:PORT); point the SDK here.
	URL    string
	server *httptest.Server
	proto  protocol

	// Script gives the fake Next, Always and Recover.
	Script[Behavior]

	mu       sync.Mutex
	rules    []rule
	requests []*Request
	accepted int
	seq      int
	holds    []*Hold
	changed  chan struct{}
}

func newFake(p protocol) *Fake {
	f := &Fake{proto: p, changed: make(chan struct{})}
	f.server = httptest.NewServer(http.HandlerFunc(f.serve))
	f.URL = f.server.URL
	return f
}

// Close releases every held request (as rejected with 503) and stops the server.
func (f *Fake) Close() {
	f.mu.Lock()
	holds := f.holds
	f.mu.Unlock()
	for _, h := range holds {
		h.Reject(Fail503(""))
	}
	f.server.CloseClientConnections()
	f.server.Close()
}

// HoldNext parks the next request; see NewHold.
func (f *Fake) HoldNext(acceptFirst bool) *Hold {
	h := NewHold(acceptFirst)
	f.Next(Behavior{Hold: h})
	return h
}

// Requests returns a copy of every request received so far.
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Request, len(f.requests))
	for i, r := range f.requests {
		out[i] = *r
	}
	return out
}

// AcceptedRequests returns the accepted requests, in arrival order.
func (f *Fake) AcceptedRequests() []Request {
	var out []Request
	for _, r := range f.Requests() {
		if r.Accepted {
			out = append(out, r)
		}
	}
	return out
}

// Accepted returns how many messages the fake accepted.
func (f *Fake) Accepted() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.accepted
}

// Calls returns how many requests arrived.
func (f *Fake) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

// WaitCalls blocks until at least n requests arrived or d passed; it reports
// whether they did.
func (f *Fake) WaitCalls(n int, d time.Duration) bool {
	return WaitUntil(d, func() (bool, <-chan struct{}) {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.requests) >= n, f.changed
	})
}

// Reset forgets recorded requests, counts, queued behaviors and Always.
func (f *Fake) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests, f.accepted = nil, 0
	f.Script.clear()
}

func (f *Fake) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// sideRouter is implemented by protocols that serve requests that are not sends
// (FCM's OAuth token endpoint); those are answered but not recorded.
type sideRouter interface {
	side(r *http.Request, body []byte) *response
}

func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if sr, ok := f.proto.(sideRouter); ok {
		if resp := sr.side(r, body); resp != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(resp.status)
			_, _ = w.Write([]byte(resp.body))
			return
		}
	}
	req := &Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Header: r.Header.Clone(), Body: body, At: time.Now()}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		req.Form, _ = url.ParseQuery(string(body))
	}

	f.mu.Lock()
	f.requests = append(f.requests, req)
	b, matched := f.ruleFor(req)
	if !matched {
		b = Take(&f.Script)
	}
	if b.Hold != nil {
		f.holds = append(f.holds, b.Hold)
	}
	f.notifyLocked()
	f.mu.Unlock()

	if resp := f.proto.route(r); resp != nil {
		f.write(w, req, *resp)
		return
	}
	if resp := f.proto.validate(req); resp != nil {
		f.write(w, req, *resp)
		return
	}
	if b.Delay > 0 {
		select {
		case <-time.After(b.Delay):
		case <-r.Context().Done():
		}
	}
	if h := b.Hold; h != nil {
		var ok response
		if h.acceptFirst {
			ok = f.acceptMessage(req)
		}
		h.arriveOnce.Do(func() { close(h.arrived) })
		outcome := <-h.decided
		switch {
		case h.acceptFirst:
			f.write(w, req, ok)
		case outcome.Status != 0:
			f.write(w, req, response{outcome.Status, outcome.Header, outcome.Body})
		default:
			f.write(w, req, f.acceptMessage(req))
		}
		return
	}
	if b.Status != 0 {
		f.write(w, req, response{b.Status, b.Header, b.Body})
		return
	}
	f.write(w, req, f.acceptMessage(req))
}

// rule is a behaviour for the requests a predicate picks (When).
type rule struct {
	match func(*Request) bool
	b     Behavior
}

// When makes every later request match picks behave as b, before Next and
// Always (a provider failing one recipient's or one message's sends while it
// accepts the others); the latest matching rule wins. ClearWhen ends them.
// match must not call the fake's methods.
func (f *Fake) When(match func(*Request) bool, b Behavior) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = append(f.rules, rule{match: match, b: b})
}

// ClearWhen forgets every When rule.
func (f *Fake) ClearWhen() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = nil
}

// ruleFor is the behaviour of the latest When rule matching req (f.mu held).
func (f *Fake) ruleFor(req *Request) (Behavior, bool) {
	for i := len(f.rules) - 1; i >= 0; i-- {
		if f.rules[i].match(req) {
			return f.rules[i].b, true
		}
	}
	return Behavior{}, false
}

// acceptMessage counts req as accepted and builds the success answer.
func (f *Fake) acceptMessage(req *Request) response {
	f.mu.Lock()
	f.seq++
	f.accepted++
	id := f.proto.newID(f.seq)
	req.Accepted, req.MessageID = true, id
	f.notifyLocked()
	f.mu.Unlock()
	return f.proto.accept(req, id)
}

func (f *Fake) write(w http.ResponseWriter, req *Request, resp response) {
	for k, vs := range resp.header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if resp.status >= 400 && resp.body == "" {
		resp.body = f.proto.errorBody(resp.status)
	}
	if w.Header().Get("Content-Type") == "" && resp.body != "" {
		w.Header().Set("Content-Type", "application/json")
	}
	f.mu.Lock()
	req.Status = resp.status
	f.mu.Unlock()
	w.WriteHeader(resp.status)
	_, _ = io.Copy(w, bytes.NewBufferString(resp.body))
}

// Loopback is the egress policy for tests whose fakes listen on 127.0.0.1, an
// address the default policy refuses (one policy, so one connection pool).
func Loopback() *egress.Policy { return loopback }

var loopback = egress.MustParse("127.0.0.1")

// LoopbackClient is an HTTP client under Loopback with a timeout (0: none).
func LoopbackClient(timeout time.Duration) *http.Client { return Loopback().Client(timeout) }
