// Package sendgrid sends email through SendGrid's v3 Mail Send API with the official
// github.com/sendgrid/sendgrid-go library, and verifies and parses SendGrid's signed
// Event Webhook into provider-neutral receipts.
//
// # Idempotency
//
// SendGrid's v3 Mail Send has no idempotency key: the published OpenAPI document
// (sendgrid_mail_v3.json, POST /v3/mail/send) defines no Idempotency-Key header or
// body field — its only header parameter is Content-Encoding — and a repeated
// request is a second email. What Herald uses instead:
//
//   - custom_args {notification_id, channel, tenant} on the personalization. SendGrid
//     copies custom args into every Event Webhook event for the message, so every
//     receipt (processed, delivered, bounce, dropped, ...) names the notification and
//     channel even when the worker died before it could record the X-Message-Id.
//     A retry that finds such a receipt must not send again (see providers.Receipt).
//     They go on the personalization because the spec types the message-level
//     custom_args as a string (the SDK would send an object there).
//   - the X-Message-Id response header of the 202, kept as the provider message id;
//     webhook events carry it as the prefix of sg_message_id.
//   - no Message-ID header of our own: SendGrid sets its own and uses it as smtp-id.
//
// So the window between "SendGrid accepted" and "Herald recorded it" can double-send
// unless a receipt arrived in between; that is documented in package providers.
package sendgrid

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sendgrid/rest"
	sendgridgo "github.com/sendgrid/sendgrid-go"
	"github.com/sendgrid/sendgrid-go/helpers/mail"

	"github.com/herald-notify/herald/internal/egress"
	"github.com/herald-notify/herald/providers"
)

// Name is the provider name in Results, Errors, Receipts and provider_configs.
const Name = "sendgrid"

// DefaultBaseURL is SendGrid's global API host.
const DefaultBaseURL = "https://api.sendgrid.com"

// Custom-arg names Herald puts on every message; they come back in every webhook event.
const (
	ArgNotificationID = "notification_id"
	ArgChannel        = "channel"
	ArgTenant         = "tenant"
)

// Config configures a Client.
type Config struct {
	// APIKey is the tenant's SendGrid API key (secret).
	APIKey string
	// BaseURL replaces https://api.sendgrid.com (tests point it at a fake or a contract server).
	BaseURL string
	// From and FromName are the default sender; a message may override them.
	From     string
	FromName string
	// HTTPClient defaults to the default egress policy's client with a 30 s
	// timeout (internal addresses and redirects refused; a client without a
	// transport gets that policy's, see egress.OrDefault).
	HTTPClient *http.Client
}

// Client sends email through SendGrid. It is safe for concurrent use.
type Client struct {
	apiKey   string
	baseURL  string
	from     string
	fromName string
	rest     *rest.Client
}

var _ providers.EmailSender = (*Client)(nil)

// New validates cfg and returns a Client.
func New(cfg Config) (*Client, error) {
	if cfg.APIKey == "" {
		return nil, providers.Errorf(Name, "config", "API key is empty")
	}
	base := strings.TrimRight(cfg.BaseURL, "/")
	if base == "" {
		base = DefaultBaseURL
	}
	hc := egress.OrDefault(cfg.HTTPClient, 30*time.Second)
	return &Client{apiKey: cfg.APIKey, baseURL: base, from: cfg.From, fromName: cfg.FromName, rest: &rest.Client{HTTPClient: hc}}, nil
}

// SendEmail sends msg as one SendGrid mail send. A 2xx means SendGrid accepted the
// message: it is a success even if the X-Message-Id header is missing (then
// ProviderMessageID is empty). idempotencyKey is not sent (SendGrid has no such
// field); the tags are, as custom_args.
func (c *Client) SendEmail(ctx context.Context, msg providers.EmailMessage, _ string, tags providers.Tags) (providers.Result, error) {
	if err := tags.Validate(); err != nil {
		return providers.Result{}, providers.Errorf(Name, "bad_request", "%v", err)
	}
	m, err := c.build(msg, tags)
	if err != nil {
		return providers.Result{}, err
	}
	return c.send(ctx, m)
}

// MaxPersonalizations is the most personalizations one mail send takes
// (sendgrid_mail_v3.json: personalizations maxItems 1000).
const MaxPersonalizations = 1000

// MaxEmailBatch implements providers.BatchEmailSender.
func (c *Client) MaxEmailBatch() int { return MaxPersonalizations }

// SendEmailBatch sends one content to up to MaxPersonalizations recipients in
// one mail send: one personalization per recipient with its own to, headers
// (its unsubscribe link), custom_args (its notification), so every webhook
// event still names the recipient's notification, and substitutions (its own
// values, which SendGrid replaces in the subject, the content and the reply-to;
// at most providers.MaxSubstitutionBytes, the spec's 10,000 bytes per
// personalization, see providers.CheckSubstitutions). A recipient the spec's
// limits refuse fails the whole call, permanently, before a request is made.
func (c *Client) SendEmailBatch(ctx context.Context, msg providers.EmailMessage, to []providers.BatchRecipient) (providers.Result, error) {
	if len(to) == 0 || len(to) > MaxPersonalizations {
		return providers.Result{}, providers.Errorf(Name, "bad_request", "a batch has 1 to %d recipients, not %d", MaxPersonalizations, len(to))
	}
	first := to[0]
	msg.To = first.To
	if err := first.Tags.Validate(); err != nil {
		return providers.Result{}, providers.Errorf(Name, "bad_request", "%v", err)
	}
	m, err := c.build(msg, first.Tags)
	if err != nil {
		return providers.Result{}, err
	}
	m.Personalizations = nil
	for _, r := range to {
		if err := r.Tags.Validate(); err != nil {
			return providers.Result{}, providers.Errorf(Name, "bad_request", "%v", err)
		}
		if strings.TrimSpace(r.To) == "" {
			return providers.Result{}, providers.NoEmailAddress(Name)
		}
		p := mail.NewPersonalization()
		p.AddTos(mail.NewEmail("", r.To))
		p.SetCustomArg(ArgNotificationID, r.Tags.NotificationID)
		p.SetCustomArg(ArgChannel, string(r.Tags.Channel))
		p.SetCustomArg(ArgTenant, r.Tags.TenantID)
		for k, v := range r.Headers {
			p.SetHeader(k, v)
		}
		if err := providers.CheckSubstitutions(Name, msg, r.Substitutions); err != nil {
			return providers.Result{}, err
		}
		for k, v := range r.Substitutions {
			p.SetSubstitution(k, v)
		}
		m.AddPersonalizations(p)
	}
	return c.send(ctx, m)
}

// send posts m as one mail send, for SendEmail and SendEmailBatch alike: a 2xx
// is SendGrid's acceptance (with or without an X-Message-Id), anything else is
// classified.
func (c *Client) send(ctx context.Context, m *mail.SGMailV3) (providers.Result, error) {
	req := sendgridgo.GetRequest(c.apiKey, "/v3/mail/send", c.baseURL)
	req.Method = rest.Post
	req.Body = mail.GetRequestBody(m)
	resp, err := c.rest.SendWithContext(ctx, req)
	if err != nil {
		return providers.Result{}, providers.TransportError(Name, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return providers.Result{Provider: Name, ProviderMessageID: header(resp.Headers, "X-Message-Id")}, nil
	}
	return providers.Result{}, classify(resp)
}

func (c *Client) build(msg providers.EmailMessage, tags providers.Tags) (*mail.SGMailV3, error) {
	from, fromName := msg.Sender(c.from, c.fromName)
	if err := providers.CheckEmail(Name, msg, from); err != nil {
		return nil, err
	}
	m := new(mail.SGMailV3)
	m.SetFrom(mail.NewEmail(fromName, from))
	m.Subject = msg.Subject
	if msg.ReplyTo != "" {
		m.SetReplyTo(mail.NewEmail("", msg.ReplyTo))
	}
	p := mail.NewPersonalization()
	p.AddTos(mail.NewEmail(msg.ToName, msg.To))
	p.SetCustomArg(ArgNotificationID, tags.NotificationID)
	p.SetCustomArg(ArgChannel, string(tags.Channel))
	p.SetCustomArg(ArgTenant, tags.TenantID)
	m.AddPersonalizations(p)
	// text/plain must come before text/html.
	if msg.Text != "" {
		m.AddContent(mail.NewContent("text/plain", msg.Text))
	}
	if msg.HTML != "" {
		m.AddContent(mail.NewContent("text/html", msg.HTML))
	}
	for k, v := range msg.Headers {
		m.SetHeader(k, v)
	}
	seen := map[string]bool{}
	for _, cat := range msg.Categories {
		if cat != "" && !seen[cat] && len(seen) < 10 {
			seen[cat] = true
			m.AddCategories(cat)
		}
	}
	return m, nil
}

type errorBody struct {
	Errors []struct {
		Message string  `json:"message"`
		Field   *string `json:"field"`
	} `json:"errors"`
}

func classify(resp *rest.Response) *providers.Error {
	var eb errorBody
	_ = json.Unmarshal([]byte(resp.Body), &eb)
	var msgs []string
	code := ""
	for _, e := range eb.Errors {
		msgs = append(msgs, e.Message)
		if e.Field != nil && strings.Contains(*e.Field, ".email") && strings.HasPrefix(*e.Field, "personalizations") {
			code = "invalid_address"
		}
	}
	h := http.Header(resp.Headers)
	pe := providers.HTTPError(Name, resp.StatusCode, h, code, strings.Join(msgs, "; "))
	if pe.RetryAfter == 0 && resp.StatusCode == http.StatusTooManyRequests {
		// SendGrid announces the end of a rate-limit window in X-RateLimit-Reset
		// (unix seconds) rather than Retry-After.
		if reset, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			if d := time.Until(time.Unix(reset, 0)); d > 0 {
				pe.RetryAfter = d
			}
		}
	}
	return pe
}

func header(h map[string][]string, name string) string { return http.Header(h).Get(name) }
