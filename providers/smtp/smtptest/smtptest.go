// Package smtptest is an SMTP server for tests, built on github.com/emersion/go-smtp.
// It listens on 127.0.0.1 only, records every message it receives (envelope, raw
// bytes, parsed headers, the decoded text and HTML parts), and can be told how to
// answer each connection: accept, reply with an SMTP error code at a given stage
// (421/451 retryable, 550/553 permanent...), or hang without answering so the client
// runs into its timeout. It can require AUTH PLAIN and speak STARTTLS or implicit
// TLS with a self-signed certificate. All methods are safe for concurrent use.
//
// Behaviours are decided per connection (Herald's SMTP client sends one message per
// connection): Next queues behaviours for the next connections in order; Always sets
// the behaviour for every later connection until Recover.
package smtptest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"math/big"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-sasl"
	gosmtp "github.com/emersion/go-smtp"

	"github.com/herald-notify/herald/providers/providertest"
)

// Stage is the point of an SMTP transaction where a Behavior answers.
type Stage string

// Stages.
const (
	// StageHello answers the EHLO/HELO (the client's first command): a 421 there is
	// a relay that is up but refuses service.
	StageHello Stage = "HELLO"
	StageMail  Stage = "MAIL"
	StageRcpt  Stage = "RCPT"
	// StageData answers after the whole message was received (a content
	// rejection, or with Hang a message the server has but never acknowledged).
	StageData Stage = "DATA"
)

// Behavior is how the server answers one connection. The zero Behavior accepts.
type Behavior struct {
	// Stage is where the behaviour applies; the stages before it succeed.
	Stage Stage
	// Code is the SMTP reply code to answer at Stage (421, 451, 550, 553...).
	Code int
	// Enhanced is the RFC 3463 enhanced status code ("5.1.1"); empty means
	// "C.0.0" with C the first digit of Code.
	Enhanced string
	// Message is the reply text.
	Message string
	// Hang makes the server never answer at Stage (until Close): the client's
	// timeout fires. At StageData the message is recorded first, unacknowledged:
	// the server has it, the client does not know.
	Hang bool
}

// Reply answers code at stage.
func Reply(stage Stage, code int, enhanced, message string) Behavior {
	return Behavior{Stage: stage, Code: code, Enhanced: enhanced, Message: message}
}

// Fail421 is a relay shedding load: "421 4.3.2 service not available" at MAIL.
func Fail421() Behavior {
	return Reply(StageMail, 421, "4.3.2", "Service not available, closing transmission channel")
}

// Fail451 is a temporary local error: "451 4.3.0" at MAIL.
func Fail451() Behavior {
	return Reply(StageMail, 451, "4.3.0", "Requested action aborted: local error in processing")
}

// Reject550 is an unknown mailbox: "550 5.1.1" at RCPT.
func Reject550() Behavior {
	return Reply(StageRcpt, 550, "5.1.1", "Requested action not taken: mailbox unavailable")
}

// Reject553 is a malformed address: "553 5.1.3" at RCPT.
func Reject553() Behavior {
	return Reply(StageRcpt, 553, "5.1.3", "Requested action not taken: mailbox name not allowed")
}

// Hang never answers at stage.
func Hang(stage Stage) Behavior { return Behavior{Stage: stage, Hang: true} }

// TLSMode is how the server offers TLS.
type TLSMode string

// TLS modes.
const (
	TLSNone     TLSMode = ""
	TLSStartTLS TLSMode = "starttls"
	TLSImplicit TLSMode = "tls"
)

// Options configure a Server.
type Options struct {
	// Username and Password, when set, make the server advertise AUTH PLAIN and
	// refuse MAIL from a client that did not authenticate (530); wrong credentials
	// get 535 5.7.8.
	Username string
	Password string
	// TLS offers STARTTLS or speaks TLS from the first byte, with a self-signed
	// certificate for 127.0.0.1 and localhost (trust it with ClientTLSConfig).
	TLS TLSMode
}

// Message is one message the server received.
type Message struct {
	// From and To are the envelope (MAIL FROM, RCPT TO).
	From string
	To   []string
	// Raw is the message as received (headers and body).
	Raw []byte
	// Header is the parsed header; Subject is the decoded Subject.
	Header  mail.Header
	Subject string
	// Text and HTML are the decoded text/plain and text/html parts ("" if absent).
	Text string
	HTML string
	// Acknowledged is false for a message received under Hang(StageData): the
	// server has it but never said so.
	Acknowledged bool
	// Authenticated is the username the client authenticated as ("" for none).
	Authenticated string
	At            time.Time
}

// Server is a running test SMTP server.
type Server struct {
	// Addr is "127.0.0.1:PORT"; Host and Port are its parts.
	Addr string
	Host string
	Port int

	opts    Options
	srv     *gosmtp.Server
	ln      net.Listener
	certs   *x509.CertPool
	done    chan struct{}
	closeMu sync.Once

	// Script gives the server Next, Always and Recover, per connection (the
	// same behaviour queue as the HTTP fakes in providers/providertest).
	providertest.Script[Behavior]

	mu       sync.Mutex
	messages []Message
	conns    int
	perConn  map[*gosmtp.Conn]Behavior
	changed  chan struct{}
}

// New starts a server on 127.0.0.1 with a free port. Close it when done.
func New(opts Options) (*Server, error) {
	s := &Server{opts: opts, done: make(chan struct{}), perConn: map[*gosmtp.Conn]Behavior{}, changed: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := gosmtp.NewServer(gosmtp.BackendFunc(s.newSession))
	srv.Domain = "smtptest.localhost"
	srv.AllowInsecureAuth = true
	srv.ReadTimeout = 30 * time.Second
	srv.WriteTimeout = 30 * time.Second
	srv.MaxMessageBytes = 10 << 20
	srv.ErrorLog = log.New(io.Discard, "", 0)
	if opts.TLS != TLSNone {
		cert, pool, err := selfSigned()
		if err != nil {
			ln.Close()
			return nil, err
		}
		s.certs = pool
		cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		switch opts.TLS {
		case TLSStartTLS:
			srv.TLSConfig = cfg
		case TLSImplicit:
			ln = tls.NewListener(ln, cfg)
		default:
			ln.Close()
			return nil, fmt.Errorf("smtptest: unknown TLS mode %q", opts.TLS)
		}
	}
	s.srv, s.ln = srv, ln
	s.Addr = ln.Addr().String()
	host, port, _ := net.SplitHostPort(s.Addr)
	s.Host = host
	s.Port, _ = strconv.Atoi(port)
	go func() { _ = srv.Serve(ln) }()
	return s, nil
}

// Close releases every hanging answer and stops the server.
func (s *Server) Close() {
	s.closeMu.Do(func() {
		close(s.done)
		_ = s.srv.Close()
	})
}

// ClientTLSConfig trusts the server's self-signed certificate (nil without TLS).
func (s *Server) ClientTLSConfig() *tls.Config {
	if s.certs == nil {
		return nil
	}
	return &tls.Config{RootCAs: s.certs, ServerName: s.Host, MinVersion: tls.VersionTLS12}
}

// Messages returns a copy of every message received, in arrival order (including
// unacknowledged ones).
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.messages...)
}

// Accepted returns how many messages the server received and acknowledged.
func (s *Server) Accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.messages {
		if m.Acknowledged {
			n++
		}
	}
	return n
}

// Connections returns how many SMTP sessions were opened (clients that got as far
// as EHLO).
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

// WaitMessages blocks until at least n messages were received or d passed; it
// reports whether they were.
func (s *Server) WaitMessages(n int, d time.Duration) bool {
	return providertest.WaitUntil(d, func() (bool, <-chan struct{}) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.messages) >= n, s.changed
	})
}

// behaviorFor decides (once) how conn is answered.
func (s *Server) behaviorFor(c *gosmtp.Conn) Behavior {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.perConn[c]; ok {
		return b
	}
	s.conns++
	b := providertest.Take(&s.Script)
	s.perConn[c] = b
	return b
}

func (s *Server) forget(c *gosmtp.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.perConn, c)
}

// answer applies b at stage: nil to go on, an *SMTPError to refuse, or it hangs.
func (s *Server) answer(b Behavior, stage Stage) error {
	if b.Stage != stage {
		return nil
	}
	if b.Hang {
		<-s.done
		return &gosmtp.SMTPError{Code: 421, EnhancedCode: gosmtp.EnhancedCode{4, 3, 0}, Message: "Server shutting down"}
	}
	if b.Code == 0 {
		return nil
	}
	return smtpError(b)
}

func smtpError(b Behavior) *gosmtp.SMTPError {
	ec := gosmtp.EnhancedCode{b.Code / 100, 0, 0}
	if parts := strings.Split(b.Enhanced, "."); len(parts) == 3 {
		for i, p := range parts {
			ec[i], _ = strconv.Atoi(p)
		}
	}
	msg := b.Message
	if msg == "" {
		msg = "Test failure"
	}
	return &gosmtp.SMTPError{Code: b.Code, EnhancedCode: ec, Message: msg}
}

func (s *Server) newSession(c *gosmtp.Conn) (gosmtp.Session, error) {
	b := s.behaviorFor(c)
	if err := s.answer(b, StageHello); err != nil {
		return nil, err
	}
	return &session{s: s, conn: c, b: b}, nil
}

func (s *Server) record(m Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.messages = append(s.messages, m)
	close(s.changed)
	s.changed = make(chan struct{})
}

type session struct {
	s    *Server
	conn *gosmtp.Conn
	b    Behavior
	user string
	from string
	to   []string
}

var _ gosmtp.AuthSession = (*session)(nil)

func (ss *session) AuthMechanisms() []string {
	if ss.s.opts.Username == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (ss *session) Auth(mech string) (sasl.Server, error) {
	if mech != sasl.Plain || ss.s.opts.Username == "" {
		return nil, gosmtp.ErrAuthUnknownMechanism
	}
	return sasl.NewPlainServer(func(_, username, password string) error {
		if username != ss.s.opts.Username || password != ss.s.opts.Password {
			return gosmtp.ErrAuthFailed
		}
		ss.user = username
		return nil
	}), nil
}

func (ss *session) Mail(from string, _ *gosmtp.MailOptions) error {
	if ss.s.opts.Username != "" && ss.user == "" {
		return &gosmtp.SMTPError{Code: 530, EnhancedCode: gosmtp.EnhancedCode{5, 7, 0}, Message: "Authentication required"}
	}
	if err := ss.s.answer(ss.b, StageMail); err != nil {
		return err
	}
	ss.from = from
	return nil
}

func (ss *session) Rcpt(to string, _ *gosmtp.RcptOptions) error {
	if err := ss.s.answer(ss.b, StageRcpt); err != nil {
		return err
	}
	ss.to = append(ss.to, to)
	return nil
}

func (ss *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	m := parse(raw)
	m.From, m.To, m.Authenticated, m.At = ss.from, append([]string(nil), ss.to...), ss.user, time.Now()
	if ss.b.Stage == StageData && ss.b.Hang {
		ss.s.record(m)
		return ss.s.answer(ss.b, StageData)
	}
	if err := ss.s.answer(ss.b, StageData); err != nil {
		return err
	}
	m.Acknowledged = true
	ss.s.record(m)
	return nil
}

func (ss *session) Reset() { ss.from, ss.to = "", nil }

func (ss *session) Logout() error {
	ss.s.forget(ss.conn)
	return nil
}

// parse fills Header, Subject, Text and HTML from raw, as far as it can.
func parse(raw []byte) Message {
	m := Message{Raw: raw}
	pm, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return m
	}
	m.Header = pm.Header
	dec := new(mime.WordDecoder)
	if subj, err := dec.DecodeHeader(pm.Header.Get("Subject")); err == nil {
		m.Subject = subj
	}
	body, _ := io.ReadAll(pm.Body)
	// The CRLF before the terminating "." belongs to the transport, not the text.
	body = bytes.TrimSuffix(body, []byte("\r\n"))
	walk(pm.Header.Get("Content-Type"), pm.Header.Get("Content-Transfer-Encoding"), body, &m)
	return m
}

func walk(contentType, cte string, body []byte, m *Message) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt = "text/plain"
	}
	if strings.HasPrefix(mt, "multipart/") {
		mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
		for {
			p, err := mr.NextRawPart()
			if err != nil {
				return
			}
			b, _ := io.ReadAll(p)
			walk(p.Header.Get("Content-Type"), p.Header.Get("Content-Transfer-Encoding"), b, m)
		}
	}
	text := string(decode(cte, body))
	switch {
	case mt == "text/plain" && m.Text == "":
		m.Text = text
	case mt == "text/html" && m.HTML == "":
		m.HTML = text
	}
}

func decode(cte string, b []byte) []byte {
	switch strings.ToLower(strings.TrimSpace(cte)) {
	case "quoted-printable":
		if out, err := io.ReadAll(quotedprintable.NewReader(bytes.NewReader(b))); err == nil {
			return out
		}
	case "base64":
		clean := strings.Map(func(r rune) rune {
			if r == '\r' || r == '\n' || r == ' ' {
				return -1
			}
			return r
		}, string(b))
		if out, err := base64.StdEncoding.DecodeString(clean); err == nil {
			return out
		}
	}
	return b
}

// selfSigned makes a certificate for 127.0.0.1 and localhost and a pool trusting it.
func selfSigned() (tls.Certificate, *x509.CertPool, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "smtptest"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool, nil
}
