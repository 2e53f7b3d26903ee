// Package smtp sends email through an SMTP relay (a tenant's own mail server, or a
// relay service such as SES, Mailgun or Postmark over SMTP) with the
// github.com/wneessen/go-mail library. It is the second link of the email failover
// chain after SendGrid.
//
// # Idempotency
//
// SMTP has none. RFC 5321 defines no idempotency key, and a relay that receives
// the same message twice delivers it twice. The protocol even has a known
// duplicate window of its own (RFC 1047): when the connection drops after the
// client sent the final "." of DATA but before it read the server's 250, the relay
// has the message and the client cannot know; retrying sends it again. Herald
// treats that case like every other timeout: retryable, because a rare double
// beats a silent loss (see package providers).
//
// What this package does instead:
//
//   - A deterministic Message-ID derived from the idempotency key,
//     <notification_id.channel@herald> (sanitized; see MessageID), the same on
//     every attempt. Message-ID is only an identifier: relays do not deduplicate
//     on it. Some receiving systems do (Gmail is widely reported to collapse
//     identical Message-IDs in a mailbox, as do some list managers and archives),
//     most do not, and a duplicate is at least recognizable downstream, in bounces
//     (which quote the original headers) and in the recipient's mailbox. The
//     Message-ID is returned as Result.ProviderMessageID (without angle brackets).
//   - X-Herald-Notification-Id, X-Herald-Channel and X-Herald-Tenant headers, which
//     come back in bounces and feedback reports that include the original headers.
//
// There are no delivery receipts for SMTP: the relay's 250 after DATA only means
// it queued the message. Bounces arrive later as email to the envelope sender and
// are not read by Herald.
//
// # Errors
//
// Every failure is a *providers.Error (Provider "smtp"):
//
//   - 4xx replies (421 service unavailable, 450/451/452 temporary failures, 454
//     temporary auth failure) → retryable, Code "smtp_4NN".
//   - 5xx replies → permanent: Code "invalid_address" for a recipient the relay
//     calls malformed or unknown (553, or 550/551 with enhanced status 5.1.x at
//     RCPT), otherwise "smtp_5NN" (550 mailbox unavailable, 552 too big, 554
//     rejected...). The enhanced status code (RFC 3463) is in the Reason.
//   - rejected credentials (535, 534, 530, 538 at AUTH) → permanent, Code "auth";
//     a relay that offers no usable AUTH mechanism, no STARTTLS under the
//     "starttls" policy, or a certificate that does not verify → permanent,
//     Code "config" or "tls": these need an operator, not a retry.
//   - connection refused or reset, timeouts, cancellation → retryable, Code
//     "connection", "timeout" or "canceled" (providers.TransportError).
package smtp

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/textproto"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	mail "github.com/wneessen/go-mail"

	"github.com/herald-notify/herald/internal/egress"
	"github.com/herald-notify/herald/providers"
)

// Name is the provider name in Results, Errors and provider_configs.
const Name = "smtp"

// Header names Herald puts on every message.
const (
	HeaderNotificationID = "X-Herald-Notification-Id"
	HeaderChannel        = "X-Herald-Channel"
	HeaderTenant         = "X-Herald-Tenant"
)

// DefaultMessageIDDomain is the right-hand side of Herald's Message-IDs.
const DefaultMessageIDDomain = "herald"

// DefaultTimeout bounds each SMTP connection (dial, then every command); the
// caller's context bounds the whole send as well.
const DefaultTimeout = 30 * time.Second

// TLSPolicy is how the connection to the relay is secured.
type TLSPolicy string

// TLS policies.
const (
	// TLSNone sends in plain text (an internal relay on a trusted network; default
	// port 25). Credentials are refused with it unless Host is a loopback address.
	TLSNone TLSPolicy = "none"
	// TLSStartTLS requires STARTTLS (default; default port 587).
	TLSStartTLS TLSPolicy = "starttls"
	// TLSImplicit speaks TLS from the first byte (SMTPS; default port 465).
	TLSImplicit TLSPolicy = "tls"
)

// Config configures a Client.
type Config struct {
	// Host and Port are the relay's address. Port 0 means the policy's default.
	Host string
	Port int
	// Username and Password are the relay's SMTP AUTH credentials (secret); empty
	// Username means no AUTH.
	Username string
	Password string
	// TLS is the TLS policy; empty means TLSStartTLS.
	TLS TLSPolicy
	// TLSConfig replaces the default TLS client configuration (tests use it to
	// trust a self-signed certificate). ServerName defaults to Host.
	TLSConfig *tls.Config
	// From and FromName are the default sender; a message may override them.
	From     string
	FromName string
	// Timeout bounds the connection and each command; 0 means DefaultTimeout.
	Timeout time.Duration
	// MessageIDDomain is the right-hand side of the Message-ID; empty means
	// DefaultMessageIDDomain.
	MessageIDDomain string
	// HELO is the name sent in EHLO; empty means the machine's host name.
	HELO string
	// Egress is the policy the relay is dialled under: a relay that is (or
	// resolves to) a loopback, private, link-local or other internal address
	// is refused unless the operator allowed it. nil means egress.Default().
	Egress *egress.Policy
}

// Client sends email through an SMTP relay, one connection per message. It is safe
// for concurrent use.
type Client struct {
	host, helo, from, fromName, midDomain string
	port                                  int
	policy                                TLSPolicy
	username, password                    string
	tlsConfig                             *tls.Config
	timeout                               time.Duration
	egress                                *egress.Policy
}

var _ providers.EmailSender = (*Client)(nil)

// New validates cfg and returns a Client. It does not connect.
func New(cfg Config) (*Client, error) {
	c := &Client{
		host: strings.TrimSpace(cfg.Host), port: cfg.Port, policy: cfg.TLS,
		username: cfg.Username, password: cfg.Password,
		from: cfg.From, fromName: cfg.FromName, timeout: cfg.Timeout,
		midDomain: cfg.MessageIDDomain, helo: cfg.HELO, egress: cfg.Egress,
	}
	if c.egress == nil {
		c.egress = egress.Default()
	}
	if c.host == "" {
		return nil, providers.Errorf(Name, "config", "host is empty")
	}
	if c.policy == "" {
		c.policy = TLSStartTLS
	}
	switch c.policy {
	case TLSNone:
		if c.port == 0 {
			c.port = 25
		}
		if c.username != "" && !isLoopback(c.host) {
			return nil, providers.Errorf(Name, "config", "credentials would be sent in plain text: TLS policy %q with a username", TLSNone)
		}
	case TLSStartTLS:
		if c.port == 0 {
			c.port = 587
		}
	case TLSImplicit:
		if c.port == 0 {
			c.port = 465
		}
	default:
		return nil, providers.Errorf(Name, "config", "unknown TLS policy %q (want none, starttls or tls)", cfg.TLS)
	}
	if c.port < 1 || c.port > 65535 {
		return nil, providers.Errorf(Name, "config", "port %d out of range", c.port)
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.midDomain == "" {
		c.midDomain = DefaultMessageIDDomain
	}
	if !validDomain(c.midDomain) {
		return nil, providers.Errorf(Name, "config", "message id domain %q is not a domain name", c.midDomain)
	}
	if c.helo == "" {
		if h, err := os.Hostname(); err == nil && h != "" {
			c.helo = h
		} else {
			c.helo = "localhost"
		}
	}
	if cfg.TLSConfig != nil {
		c.tlsConfig = cfg.TLSConfig.Clone()
	} else {
		c.tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if c.tlsConfig.ServerName == "" {
		c.tlsConfig.ServerName = c.host
	}
	return c, nil
}

// Addr returns host:port of the relay.
func (c *Client) Addr() string { return net.JoinHostPort(c.host, strconv.Itoa(c.port)) }

// SendEmail sends msg to the relay on a new connection. The relay's 250 after
// DATA is success, whatever happens afterwards (RSET or QUIT failing). The
// Message-ID is derived from idempotencyKey (tags.IdempotencyKey() when empty) and
// returned as ProviderMessageID. msg.Headers are added except the ones this
// package sets (Message-ID, From, To, Subject, Date, MIME and X-Herald-* headers),
// which are dropped; msg.Categories are not sent (SMTP has no such thing).
func (c *Client) SendEmail(ctx context.Context, msg providers.EmailMessage, idempotencyKey string, tags providers.Tags) (providers.Result, error) {
	if err := tags.Validate(); err != nil {
		return providers.Result{}, providers.Errorf(Name, "bad_request", "%v", err)
	}
	if idempotencyKey == "" {
		idempotencyKey = tags.IdempotencyKey()
	}
	mid := MessageID(idempotencyKey, c.midDomain)
	m, err := c.build(msg, tags, mid)
	if err != nil {
		return providers.Result{}, err
	}

	conn := &connHolder{}
	defer conn.close()
	mc, err := c.mailClient(ctx, conn)
	if err != nil {
		return providers.Result{}, providers.Errorf(Name, "config", "%v", err)
	}
	sc, err := mc.DialToSMTPClientWithContext(ctx)
	if err != nil {
		return providers.Result{}, classify(ctx, conn.ioErr(), err)
	}
	sendErr := mc.SendWithSMTPClient(sc, m)
	if m.IsDelivered() {
		// The relay answered 250 to the end of DATA: it has the message. A failing
		// RSET or QUIT afterwards changes nothing.
		_ = mc.CloseWithSMTPClient(sc)
		return providers.Result{Provider: Name, ProviderMessageID: mid}, nil
	}
	if sendErr == nil {
		sendErr = errors.New("message not delivered")
	}
	return providers.Result{}, classify(ctx, conn.ioErr(), sendErr)
}

// mailClient builds a go-mail client for one send. It is per call: go-mail's
// Client keeps per-connection state (the negotiated AUTH type), and the dial
// function ties this connection to ctx.
func (c *Client) mailClient(ctx context.Context, conn *connHolder) (*mail.Client, error) {
	opts := []mail.Option{
		mail.WithPort(c.port),
		mail.WithTimeout(c.timeout),
		mail.WithHELO(c.helo),
		mail.WithTLSConfig(c.tlsConfig),
		mail.WithoutNoop(),
		mail.WithDialContextFunc(c.dialer(ctx, conn)),
	}
	switch c.policy {
	case TLSNone:
		opts = append(opts, mail.WithTLSPolicy(mail.NoTLS))
	case TLSStartTLS:
		opts = append(opts, mail.WithTLSPolicy(mail.TLSMandatory))
	case TLSImplicit:
		// The dialer speaks TLS itself; WithSSL only tells go-mail not to try
		// STARTTLS on top.
		opts = append(opts, mail.WithSSL())
	}
	if c.username != "" {
		// The strongest mechanism the relay offers of these; go-mail refuses
		// PLAIN and LOGIN on an unencrypted connection to a non-loopback host.
		opts = append(opts, mail.WithOpportunisticSMTPAuth(mail.SMTPAuthSCRAMSHA256, mail.SMTPAuthPlain, mail.SMTPAuthLogin),
			mail.WithUsername(c.username), mail.WithPassword(c.password))
	}
	return mail.NewClient(c.host, opts...)
}

// dialer dials the relay through the egress policy (with TLS for
// TLSImplicit), records the connection's first I/O error (go-mail's SendError
// hides the network error behind a string), and closes the connection as soon
// as ctx is done, which interrupts a command that is waiting for the relay.
func (c *Client) dialer(ctx context.Context, h *connHolder) mail.DialContextFunc {
	return func(dctx context.Context, network, _ string) (net.Conn, error) {
		// c.Addr(), not go-mail's host:port, which leaves an IPv6 address
		// unbracketed (and so undiallable).
		raw, err := c.egress.DialContext(dctx, network, c.Addr())
		if err != nil {
			return nil, err
		}
		rc := &recordingConn{Conn: raw}
		var conn net.Conn = rc
		if c.policy == TLSImplicit {
			tc := tls.Client(rc, c.tlsConfig)
			if err := tc.HandshakeContext(dctx); err != nil {
				_ = raw.Close()
				return nil, err
			}
			conn = tc
		}
		h.set(rc, conn, context.AfterFunc(ctx, func() { _ = raw.Close() }))
		return conn, nil
	}
}

// build turns msg into a go-mail message.
func (c *Client) build(msg providers.EmailMessage, tags providers.Tags, messageID string) (*mail.Msg, error) {
	from, fromName := msg.Sender(c.from, c.fromName)
	if err := providers.CheckEmail(Name, msg, from); err != nil {
		return nil, err
	}
	m := mail.NewMsg()
	if err := m.FromFormat(fromName, from); err != nil {
		return nil, providers.Errorf(Name, "config", "sender address %q: %v", from, err)
	}
	if err := m.AddToFormat(msg.ToName, msg.To); err != nil {
		return nil, &providers.Error{Provider: Name, Code: "invalid_address", Reason: fmt.Sprintf("recipient address: %v", err), Permanent: true, Err: err}
	}
	if msg.ReplyTo != "" {
		if err := m.ReplyTo(msg.ReplyTo); err != nil {
			return nil, providers.Errorf(Name, "bad_request", "reply-to address: %v", err)
		}
	}
	if strings.ContainsAny(msg.Subject, "\r\n") {
		return nil, providers.Errorf(Name, "bad_request", "subject contains a line break")
	}
	m.Subject(msg.Subject)
	m.SetDate()
	m.SetMessageIDWithValue(messageID)
	for k, v := range msg.Headers {
		name := textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(k))
		if !validHeaderName(name) || strings.ContainsAny(v, "\r\n") {
			return nil, providers.Errorf(Name, "bad_request", "header %q is not a valid header field", k)
		}
		if reserved(name) {
			continue
		}
		m.SetGenHeader(mail.Header(name), v)
	}
	m.SetGenHeader(HeaderNotificationID, tags.NotificationID)
	m.SetGenHeader(HeaderChannel, string(tags.Channel))
	m.SetGenHeader(HeaderTenant, tags.TenantID)
	switch {
	case msg.Text != "" && msg.HTML != "":
		// multipart/alternative: text first, the preferred HTML last.
		m.SetBodyString(mail.TypeTextPlain, msg.Text)
		m.AddAlternativeString(mail.TypeTextHTML, msg.HTML)
	case msg.Text != "":
		m.SetBodyString(mail.TypeTextPlain, msg.Text)
	default:
		m.SetBodyString(mail.TypeTextHTML, msg.HTML)
	}
	return m, nil
}

// reserved headers are set by this package; EmailMessage.Headers cannot replace
// them (they are dropped).
func reserved(canonical string) bool {
	switch canonical {
	case "Message-Id", "From", "To", "Cc", "Bcc", "Subject", "Date", "Sender", "Reply-To",
		"Return-Path", "Mime-Version", "Content-Type", "Content-Transfer-Encoding":
		return true
	}
	return strings.HasPrefix(canonical, "X-Herald-")
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if b := s[i]; b <= ' ' || b >= 0x7f || b == ':' {
			return false
		}
	}
	return true
}

// MessageID returns the Message-ID (without angle brackets) for an idempotency key:
// "notification_id:channel" becomes "notification_id.channel@domain". Characters
// outside [A-Za-z0-9._+=-] become "-"; when that changed anything, or the key is
// longer than 128 characters, a hash of the key is appended so two keys never
// share an id.
func MessageID(idempotencyKey, domain string) string {
	if domain == "" {
		domain = DefaultMessageIDDomain
	}
	want := strings.ReplaceAll(idempotencyKey, ":", ".")
	var b strings.Builder
	for _, r := range want {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9',
			r == '.', r == '_', r == '+', r == '=', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	local := b.String()
	// dot-atom: no leading, trailing or doubled dots.
	for strings.Contains(local, "..") {
		local = strings.ReplaceAll(local, "..", ".")
	}
	local = strings.Trim(local, ".")
	if local != want || len(local) > 128 || local == "" {
		sum := sha256.Sum256([]byte(idempotencyKey))
		if len(local) > 96 {
			local = strings.TrimRight(local[:96], ".")
		}
		if local != "" {
			local += "."
		}
		local += hex.EncodeToString(sum[:8])
	}
	return local + "@" + domain
}

func validDomain(d string) bool {
	if d == "" || len(d) > 253 || strings.HasPrefix(d, ".") || strings.HasSuffix(d, ".") || strings.Contains(d, "..") {
		return false
	}
	for _, r := range d {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-') {
			return false
		}
	}
	return true
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// connHolder keeps the one connection of a send.
type connHolder struct {
	mu   sync.Mutex
	rc   *recordingConn
	conn net.Conn
	stop func() bool
}

func (h *connHolder) set(rc *recordingConn, conn net.Conn, stop func() bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rc, h.conn, h.stop = rc, conn, stop
}

func (h *connHolder) ioErr() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.rc == nil {
		return nil
	}
	return h.rc.err()
}

func (h *connHolder) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stop != nil {
		h.stop()
	}
	if h.conn != nil {
		_ = h.conn.Close()
	}
}

// recordingConn remembers the first read or write error on the connection.
type recordingConn struct {
	net.Conn
	mu    sync.Mutex
	first error
}

func (c *recordingConn) note(err error) {
	if err == nil {
		return
	}
	c.mu.Lock()
	if c.first == nil {
		c.first = err
	}
	c.mu.Unlock()
}

func (c *recordingConn) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.first
}

func (c *recordingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.note(err)
	return n, err
}

func (c *recordingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.note(err)
	return n, err
}
