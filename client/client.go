package client

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client calls one Herald with one credential. It is safe for concurrent use.
type Client struct {
	base      *url.URL
	key       string
	http      *http.Client
	retry     Retries
	timeout   time.Duration
	userAgent string
	sleep     func(ctx context.Context, d time.Duration) error // replaced by tests
}

// Retries says how often and how long a call is retried (see the package doc
// for which calls are).
type Retries struct {
	// MaxAttempts counts the first try: 1 never retries.
	MaxAttempts int
	// InitialBackoff is the first wait; each retry doubles it, up to MaxBackoff,
	// and waits a random part of it (full jitter).
	InitialBackoff, MaxBackoff time.Duration
	// MaxRetryAfter is the longest Retry-After honoured; a longer one ends the call
	// with the *Error (its RetryAfter says when to come back).
	MaxRetryAfter time.Duration
}

// DefaultRetries are the retries of a Client made without WithRetry.
var DefaultRetries = Retries{MaxAttempts: 5, InitialBackoff: 200 * time.Millisecond, MaxBackoff: 5 * time.Second, MaxRetryAfter: time.Minute}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sends through hc (its Transport, proxy, TLS settings). Leave its
// Timeout zero: it would also cut the inbox stream; WithTimeout bounds each attempt.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithRetry replaces DefaultRetries.
func WithRetry(p Retries) Option { return func(c *Client) { c.retry = p } }

// WithTimeout bounds each attempt of a call (default 30 s; the inbox stream and
// uploads are bounded by their context only).
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// New returns a client of the Herald at baseURL (scheme and host, e.g.
// "https://herald.example.com") authenticating with key: a tenant API key
// (hk_...), a user token (inbox operations only) or the operator key (the
// operator operations).
func New(baseURL, key string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("herald client: base URL %q: want http(s)://host[:port]", baseURL)
	}
	c := &Client{base: u, key: key, http: &http.Client{}, retry: DefaultRetries, timeout: 30 * time.Second,
		userAgent: "herald-go-client", sleep: sleepCtx}
	for _, o := range opts {
		o(c)
	}
	if c.retry.MaxAttempts < 1 {
		c.retry.MaxAttempts = 1
	}
	return c, nil
}

// Ptr returns a pointer to v, for the optional fields of requests.
func Ptr[T any](v T) *T { return &v }

// NewIdempotencyKey returns a fresh random key, as the client generates for a send
// without one.
func NewIdempotencyKey() string { return "hc_" + crand.Text() }

// call is one operation as sent.
type call struct {
	method, path string
	query        url.Values
	header       http.Header
	// body is the JSON request (marshalled once, so every attempt sends the same
	// bytes); stream is a body read as it is sent (uploads), resent on a retry
	// only if it is an io.Seeker.
	body        any
	stream      io.Reader
	contentType string
	// idempotent: repeating the call cannot do anything twice, so a network error
	// may be retried (429 and 503 always are: Herald answers them before acting).
	idempotent bool
	// noTimeout: the call lasts as long as its context (streams, uploads).
	noTimeout bool
}

// do runs c with retries and decodes a 2xx JSON answer into out (nil: discard).
// It returns the final answer's status.
func (c *Client) do(ctx context.Context, cl call, out any) (int, error) {
	resp, err := c.send(ctx, cl)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if out == nil || resp.StatusCode == http.StatusNoContent {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return resp.StatusCode, fmt.Errorf("herald client: %s %s: decoding the %d answer: %w", cl.method, cl.path, resp.StatusCode, err)
	}
	return resp.StatusCode, nil
}

// send runs c with retries and returns the successful response, whose body the
// caller closes, or the error of the last attempt.
func (c *Client) send(ctx context.Context, cl call) (*http.Response, error) {
	var payload []byte
	if cl.body != nil {
		var err error
		if payload, err = json.Marshal(cl.body); err != nil {
			return nil, fmt.Errorf("herald client: %s %s: encoding the request: %w", cl.method, cl.path, err)
		}
		cl.contentType = "application/json"
	}
	for attempt := 1; ; attempt++ {
		resp, err := c.attempt(ctx, cl, payload)
		if err == nil {
			return resp, nil
		}
		wait, retry := c.shouldRetry(ctx, cl, attempt, err)
		if !retry {
			return nil, err
		}
		if cl.stream != nil {
			seeker, ok := cl.stream.(io.Seeker)
			if !ok {
				return nil, err
			}
			if _, serr := seeker.Seek(0, io.SeekStart); serr != nil {
				return nil, err
			}
		}
		if serr := c.sleep(ctx, wait); serr != nil {
			return nil, errors.Join(err, serr)
		}
	}
}

// attempt sends c once. A non-2xx answer is an *Error.
func (c *Client) attempt(ctx context.Context, cl call, payload []byte) (*http.Response, error) {
	cancel := context.CancelFunc(func() {})
	if c.timeout > 0 && !cl.noTimeout {
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
	}
	u := *c.base
	u.RawPath = c.base.EscapedPath() + cl.path
	u.Path, _ = url.PathUnescape(u.RawPath)
	u.RawQuery = cl.query.Encode()
	var body io.Reader
	switch {
	case payload != nil:
		body = bytes.NewReader(payload)
	case cl.stream != nil:
		body = cl.stream
	}
	req, err := http.NewRequestWithContext(ctx, cl.method, u.String(), body)
	if err != nil {
		cancel()
		return nil, err
	}
	for k, vs := range cl.header {
		req.Header[k] = vs
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	if cl.contentType != "" {
		req.Header.Set("Content-Type", cl.contentType)
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json")
	}
	req.Header.Set("User-Agent", c.userAgent)
	resp, err := c.http.Do(req)
	if err != nil {
		cancel()
		return nil, &netError{err: err}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer cancel()
		defer resp.Body.Close()
		return nil, errorFrom(cl.method, cl.path, resp)
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// shouldRetry says whether attempt's error is worth another try, and after how long.
func (c *Client) shouldRetry(ctx context.Context, cl call, attempt int, err error) (time.Duration, bool) {
	if attempt >= c.retry.MaxAttempts || ctx.Err() != nil {
		return 0, false
	}
	backoff := c.backoff(attempt)
	var herr *Error
	if errors.As(err, &herr) {
		switch herr.Status {
		case http.StatusTooManyRequests, http.StatusServiceUnavailable:
			if herr.RetryAfter > 0 {
				if herr.RetryAfter > c.retry.MaxRetryAfter {
					return 0, false
				}
				return herr.RetryAfter, true
			}
			return backoff, true
		}
		return 0, false
	}
	var nerr *netError
	if errors.As(err, &nerr) && cl.idempotent {
		return backoff, true
	}
	return 0, false
}

// backoff is the wait before retry number attempt: full jitter over an
// exponential ceiling.
func (c *Client) backoff(attempt int) time.Duration {
	ceiling := c.retry.InitialBackoff << (attempt - 1)
	if ceiling > c.retry.MaxBackoff || ceiling <= 0 {
		ceiling = c.retry.MaxBackoff
	}
	if ceiling <= 0 {
		return 0
	}
	return ceiling/2 + rand.N(ceiling/2+1)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// netError is a request that got no answer (connection refused or reset, a
// timeout): retried only for idempotent calls, returned as its cause.
type netError struct{ err error }

func (e *netError) Error() string { return "herald client: " + e.err.Error() }
func (e *netError) Unwrap() error { return e.err }

// cancelOnClose releases an attempt's timeout when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// pathOf joins path segments, each escaped, so an id holding '/' or '?' stays one
// segment: pathOf("v1", "users", id) is "/v1/users/<id escaped>".
func pathOf(segs ...string) string {
	var b strings.Builder
	for _, s := range segs {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

// retryAfter parses a Retry-After header in seconds (Herald's form) or as an HTTP date.
func retryAfter(h string) time.Duration {
	if h == "" {
		return 0
	}
	if s, err := strconv.Atoi(h); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}
