// Package twilio sends SMS through Twilio's Messages resource with the official
// github.com/twilio/twilio-go library, and validates and parses Twilio's message
// status callbacks into provider-neutral receipts.
//
// # Idempotency
//
// Twilio's Messages create (POST /2010-04-01/Accounts/{AccountSid}/Messages.json)
// has no documented idempotency key: the published OpenAPI document
// (twilio_api_v2010.json) defines no such header or parameter for it, and
// twilio-go's CreateMessageParams has no field for one (twilio-go only sends an
// Idempotency-Key header on a few newer APIs, e.g. voice v3 transcriptions). The
// I-Twilio-Idempotency-Token header is real but goes the other way: Twilio puts it
// on the webhook requests it sends to you, so that you can recognise its retries of
// the same callback. Config.IdempotencyHeader can send it on Messages create as an
// experiment (twilio-go can only do that through a custom client.BaseClient, which
// this package has anyway); nothing in Herald relies on Twilio honouring it.
//
// What Herald relies on instead:
//   - the StatusCallback URL names the tenant, notification and channel
//     (?tenant=…&notification_id=…&channel=sms), so every status callback (queued,
//     sent, delivered, undelivered, failed) names the notification even when the
//     worker died before it could record the MessageSid;
//   - the MessageSid from the 201 response is the provider message id.
//
// # Base URL
//
// twilio-go hard-codes https://api.twilio.com in each generated service. This
// package passes its own client.BaseClient to the service
// (openapi.NewApiServiceWithClient), which rewrites the scheme and host to
// Config.BaseURL, binds the request to the caller's context (twilio-go itself sends
// with context.Background), and records the HTTP status and headers, which
// twilio-go's error type drops (Retry-After).
package twilio

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twilio/twilio-go/client"
	openapi "github.com/twilio/twilio-go/rest/api/v2010"

	"github.com/herald-notify/herald/internal/egress"
	"github.com/herald-notify/herald/providers"
)

// Name is the provider name in Results, Errors, Receipts and provider_configs.
const Name = "twilio"

// DefaultBaseURL is Twilio's REST API host.
const DefaultBaseURL = "https://api.twilio.com"

// IdempotencyHeader is the header Config.IdempotencyHeader sends.
const IdempotencyHeader = "I-Twilio-Idempotency-Token"

// Query parameters the StatusCallback URL carries.
const (
	QueryTenant         = "tenant"
	QueryNotificationID = "notification_id"
	QueryChannel        = "channel"
)

// Config configures a Client.
type Config struct {
	// AccountSID is the account messages are sent from (AC…).
	AccountSID string
	// AuthToken is the account's auth token (secret). With APIKeySID set it is the
	// API key's secret instead.
	AuthToken string
	// APIKeySID (SK…) authenticates with an API key instead of the account SID.
	APIKeySID string
	// From and MessagingServiceSID are the default sender; MessagingServiceSID wins.
	From                string
	MessagingServiceSID string
	// StatusCallbackURL is the public URL of Herald's Twilio webhook (e.g.
	// https://herald.example.com/v1/webhooks/twilio). Each message's callback is
	// this URL plus the notification's tags as query parameters. Empty: no callback
	// unless the message sets one.
	StatusCallbackURL string
	// BaseURL replaces https://api.twilio.com (tests point it at a fake or a contract server).
	BaseURL string
	// HTTPClient's transport and timeout are used (default: the default egress
	// policy's transport, which refuses internal addresses, and a 30 s
	// timeout). Redirects are never followed.
	HTTPClient *http.Client
	// IdempotencyHeader also sends I-Twilio-Idempotency-Token: notification_id:channel.
	// Undocumented for Messages create; see the package comment.
	IdempotencyHeader bool
}

// Client sends SMS through Twilio. It is safe for concurrent use.
type Client struct {
	cfg       Config
	base      *url.URL
	transport http.RoundTripper
	timeout   time.Duration
}

var _ providers.SMSSender = (*Client)(nil)

// New validates cfg and returns a Client.
func New(cfg Config) (*Client, error) {
	switch {
	case !strings.HasPrefix(cfg.AccountSID, "AC"):
		return nil, providers.Errorf(Name, "config", "account SID %q must start with AC", cfg.AccountSID)
	case cfg.AuthToken == "":
		return nil, providers.Errorf(Name, "config", "auth token is empty")
	}
	c := &Client{cfg: cfg, transport: egress.Default().Transport(), timeout: 30 * time.Second}
	if cfg.BaseURL != "" {
		u, err := url.Parse(strings.TrimRight(cfg.BaseURL, "/"))
		if err != nil || u.Scheme == "" || u.Host == "" {
			return nil, providers.Errorf(Name, "config", "base URL %q is not absolute", cfg.BaseURL)
		}
		c.base = u
	}
	if hc := cfg.HTTPClient; hc != nil {
		if hc.Transport != nil {
			c.transport = hc.Transport
		}
		c.timeout = hc.Timeout
	}
	return c, nil
}

// StatusCallbackURL returns base with the tags added as query parameters.
func StatusCallbackURL(base string, tags providers.Tags) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set(QueryTenant, tags.TenantID)
	q.Set(QueryNotificationID, tags.NotificationID)
	q.Set(QueryChannel, string(tags.Channel))
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// SendSMS creates one Twilio Message. A 2xx means Twilio accepted it: success even
// if the response body cannot be read (then ProviderMessageID is empty).
func (c *Client) SendSMS(ctx context.Context, msg providers.SMSMessage, idempotencyKey string, tags providers.Tags) (providers.Result, error) {
	if err := tags.Validate(); err != nil {
		return providers.Result{}, providers.Errorf(Name, "bad_request", "%v", err)
	}
	params, err := c.params(msg, tags)
	if err != nil {
		return providers.Result{}, err
	}
	bc := c.newBaseClient(ctx)
	if c.cfg.IdempotencyHeader && idempotencyKey != "" {
		bc.headers = map[string]string{IdempotencyHeader: idempotencyKey}
	}
	m, err := openapi.NewApiServiceWithClient(bc).CreateMessage(params)
	status, header := bc.last()
	if status >= 200 && status < 300 {
		res := providers.Result{Provider: Name}
		if err == nil && m != nil && m.Sid != nil {
			res.ProviderMessageID = *m.Sid
		}
		return res, nil
	}
	if err == nil {
		// No 2xx recorded but no error either: cannot happen with twilio-go today.
		return providers.Result{}, &providers.Error{Provider: Name, Code: "unknown", Reason: "no response recorded"}
	}
	return providers.Result{}, classify(err, status, header)
}

func (c *Client) params(msg providers.SMSMessage, tags providers.Tags) (*openapi.CreateMessageParams, error) {
	if strings.TrimSpace(msg.To) == "" {
		return nil, &providers.Error{Provider: Name, Code: "invalid_number", Reason: "recipient has no phone number", Permanent: true}
	}
	if msg.Body == "" {
		return nil, providers.Errorf(Name, "bad_request", "message body is empty")
	}
	p := &openapi.CreateMessageParams{}
	p.SetTo(msg.To)
	p.SetBody(msg.Body)
	switch {
	case msg.MessagingServiceSID != "":
		p.SetMessagingServiceSid(msg.MessagingServiceSID)
	case msg.From != "":
		p.SetFrom(msg.From)
	case c.cfg.MessagingServiceSID != "":
		p.SetMessagingServiceSid(c.cfg.MessagingServiceSID)
	case c.cfg.From != "":
		p.SetFrom(c.cfg.From)
	default:
		return nil, providers.Errorf(Name, "config", "no sender: set a From number or a messaging service")
	}
	cb := msg.StatusCallback
	if cb == "" && c.cfg.StatusCallbackURL != "" {
		var err error
		if cb, err = StatusCallbackURL(c.cfg.StatusCallbackURL, tags); err != nil {
			return nil, providers.Errorf(Name, "config", "status callback URL: %v", err)
		}
	}
	if cb != "" {
		p.SetStatusCallback(cb)
	}
	return p, nil
}

// permanentCodes are Twilio error codes that retrying the same message cannot fix.
var permanentCodes = map[int]string{
	20003: "authentication failed",
	20404: "resource not found (account SID?)",
	21211: "invalid 'To' number",
	21214: "'To' number cannot be reached",
	21217: "'To' number does not appear valid",
	21401: "invalid phone number",
	21408: "sending to this region is not enabled",
	21602: "message body is required",
	21603: "'From' or messaging service is required",
	21604: "'To' number is required",
	21606: "'From' number cannot send this message",
	21608: "trial accounts can only send to verified numbers",
	21610: "recipient unsubscribed (replied STOP)",
	21612: "cannot route to this 'To' number",
	21614: "'To' number is not a mobile number",
	21617: "body exceeds 1600 characters",
	21659: "'From' is not a Twilio number",
	21660: "'From' does not belong to the account",
	21661: "'From' is not SMS-capable",
}

// RecipientCodes are the permanent codes that are the recipient's fault (invalid,
// unreachable, unsubscribed or landline number) rather than the configuration's.
var RecipientCodes = map[int]bool{21211: true, 21214: true, 21217: true, 21401: true, 21610: true, 21612: true, 21614: true}

func classify(err error, status int, header http.Header) *providers.Error {
	var te *client.TwilioRestError
	if errors.As(err, &te) {
		if status == 0 {
			status = te.Status
		}
		code := strconv.Itoa(te.Code)
		pe := providers.HTTPError(Name, status, header, code, te.Message)
		if why, ok := permanentCodes[te.Code]; ok {
			pe.Permanent = true
			if pe.Reason == "" {
				pe.Reason = why
			}
		}
		return pe
	}
	if status != 0 {
		// An error response twilio-go could not decode (a proxy's HTML 502, say).
		return providers.HTTPError(Name, status, header, "", "")
	}
	return providers.TransportError(Name, err)
}

// baseClient is the client.BaseClient twilio-go's services send through: the SDK's
// own client.Client, with the URL rebased, the caller's context bound, extra
// headers, and the response status and headers recorded.
type baseClient struct {
	inner   *client.Client
	base    *url.URL
	headers map[string]string

	mu     sync.Mutex
	status int
	header http.Header
}

func (c *Client) newBaseClient(ctx context.Context) *baseClient {
	bc := &baseClient{base: c.base}
	user := c.cfg.AccountSID
	if c.cfg.APIKeySID != "" {
		user = c.cfg.APIKeySID
	}
	bc.inner = &client.Client{
		Credentials: client.NewCredentials(user, c.cfg.AuthToken),
		HTTPClient: &http.Client{
			Transport:     &boundTransport{ctx: ctx, base: c.transport, record: bc.record},
			Timeout:       c.timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
	bc.inner.SetAccountSid(c.cfg.AccountSID)
	return bc
}

func (b *baseClient) record(status int, h http.Header) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.status, b.header = status, h
}

func (b *baseClient) last() (int, http.Header) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.status, b.header
}

func (b *baseClient) AccountSid() string                { return b.inner.AccountSid() }
func (b *baseClient) SetTimeout(d time.Duration)        { b.inner.SetTimeout(d) }
func (b *baseClient) SetOauth(o client.OAuth)           { b.inner.SetOauth(o) }
func (b *baseClient) OAuth() client.OAuth               { return b.inner.OAuth() }
func (b *baseClient) rebase(raw string) (string, error) { return rebase(raw, b.base) }

func (b *baseClient) SendRequest(method, rawURL string, data url.Values, headers map[string]interface{}, body ...byte) (*http.Response, error) {
	u, err := b.rebase(rawURL)
	if err != nil {
		return nil, err
	}
	if len(b.headers) > 0 {
		if headers == nil {
			headers = map[string]interface{}{}
		}
		for k, v := range b.headers {
			headers[k] = v
		}
	}
	return b.inner.SendRequest(method, u, data, headers, body...)
}

func rebase(raw string, base *url.URL) (string, error) {
	if base == nil {
		return raw, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	u.Scheme, u.Host = base.Scheme, base.Host
	u.Path = strings.TrimRight(base.Path, "/") + u.Path
	if u.RawPath != "" {
		u.RawPath = strings.TrimRight(base.EscapedPath(), "/") + u.RawPath
	}
	return u.String(), nil
}

// boundTransport sends with the caller's context (as well as the http.Client's
// own timeout) and records the response. It reads the (small, JSON) body into
// memory and closes the connection's body itself: twilio-go does not close the
// body of an error response.
type boundTransport struct {
	ctx    context.Context
	base   http.RoundTripper
	record func(int, http.Header)
}

const maxResponseBody = 4 << 20

func (t *boundTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	stop := context.AfterFunc(t.ctx, func() { cancel(context.Cause(t.ctx)) })
	defer stop()
	resp, err := t.base.RoundTrip(r.WithContext(ctx))
	if err != nil {
		if ctxErr := t.ctx.Err(); ctxErr != nil {
			return nil, errors.Join(ctxErr, err)
		}
		return nil, err
	}
	t.record(resp.StatusCode, resp.Header.Clone())
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))
	_ = resp.Body.Close()
	if err != nil {
		if ctxErr := t.ctx.Err(); ctxErr != nil {
			err = errors.Join(ctxErr, err)
		}
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			// Accepted, but the body was lost: SendSMS still reports success.
			body = nil
		} else {
			return nil, err
		}
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}
