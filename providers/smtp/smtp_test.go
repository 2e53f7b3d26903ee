package smtp_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/providertest"
	"github.com/herald-notify/herald/providers/smtp"
	"github.com/herald-notify/herald/providers/smtp/smtptest"
)

var tags = providers.Tags{TenantID: "t_acme", NotificationID: "ntf_01J0000000000000000000000", Channel: herald.ChannelEmail}

func message() providers.EmailMessage {
	return providers.EmailMessage{
		To: "alice@example.com", ToName: "Alice", Subject: "Order #1234 shipped",
		Text: "Your order shipped.", HTML: "<p>Your order <b>shipped</b>.</p>",
		Headers: map[string]string{
			"List-Unsubscribe":      "<https://herald.example/u/abc>, <mailto:unsubscribe@acme.example>",
			"List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
		},
	}
}

func startServer(t *testing.T, opts smtptest.Options) *smtptest.Server {
	t.Helper()
	srv, err := smtptest.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

func newClient(t *testing.T, srv *smtptest.Server, mod func(*smtp.Config)) *smtp.Client {
	t.Helper()
	cfg := smtp.Config{Host: srv.Host, Port: srv.Port, TLS: smtp.TLSNone, From: "noreply@acme.example", FromName: "Acme", Timeout: 5 * time.Second,
		Egress: providertest.Loopback()} // the test relay is on 127.0.0.1
	if mod != nil {
		mod(&cfg)
	}
	c, err := smtp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func send(t *testing.T, c *smtp.Client, msg providers.EmailMessage) (providers.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.SendEmail(ctx, msg, tags.IdempotencyKey(), tags)
}

func providerError(t *testing.T, err error) *providers.Error {
	t.Helper()
	pe, ok := providers.AsError(err)
	if !ok {
		t.Fatalf("error %v (%T) is not a *providers.Error", err, err)
	}
	if pe.Provider != smtp.Name || pe.Reason == "" {
		t.Fatalf("error %+v", pe)
	}
	return pe
}

func TestSendDeliversMultipartWithHeadersAndTags(t *testing.T) {
	srv := startServer(t, smtptest.Options{})
	msg := message()
	msg.ReplyTo = "support@acme.example"
	msg.Headers["Message-ID"] = "<caller@example.com>" // reserved: dropped
	msg.Headers["X-Herald-Tenant"] = "t_other"         // reserved: dropped
	res, err := send(t, newClient(t, srv, nil), msg)
	if err != nil {
		t.Fatal(err)
	}
	wantID := "ntf_01J0000000000000000000000.email@herald"
	if res.Provider != "smtp" || res.ProviderMessageID != wantID {
		t.Fatalf("result %+v", res)
	}
	msgs := srv.Messages()
	if len(msgs) != 1 || srv.Accepted() != 1 {
		t.Fatalf("server got %d messages", len(msgs))
	}
	m := msgs[0]
	if m.From != "noreply@acme.example" || len(m.To) != 1 || m.To[0] != "alice@example.com" {
		t.Fatalf("envelope from %q to %q", m.From, m.To)
	}
	h := m.Header
	for name, want := range map[string]string{
		"Message-Id":               "<" + wantID + ">",
		"X-Herald-Notification-Id": tags.NotificationID,
		"X-Herald-Channel":         "email",
		"X-Herald-Tenant":          "t_acme",
		"List-Unsubscribe":         "<https://herald.example/u/abc>, <mailto:unsubscribe@acme.example>",
		"List-Unsubscribe-Post":    "List-Unsubscribe=One-Click",
		"From":                     `"Acme" <noreply@acme.example>`,
		"To":                       `"Alice" <alice@example.com>`,
		"Reply-To":                 "<support@acme.example>",
	} {
		if got := h.Get(name); got != want {
			t.Errorf("header %s = %q, want %q", name, got, want)
		}
	}
	if len(h["Message-Id"]) != 1 || len(h["X-Herald-Tenant"]) != 1 {
		t.Errorf("reserved headers duplicated: %q %q", h["Message-Id"], h["X-Herald-Tenant"])
	}
	if h.Get("Date") == "" {
		t.Error("no Date header")
	}
	if !strings.HasPrefix(h.Get("Content-Type"), "multipart/alternative") {
		t.Errorf("Content-Type %q", h.Get("Content-Type"))
	}
	if m.Subject != "Order #1234 shipped" || m.Text != "Your order shipped." || m.HTML != "<p>Your order <b>shipped</b>.</p>" {
		t.Errorf("subject %q text %q html %q", m.Subject, m.Text, m.HTML)
	}
	if i, j := strings.Index(string(m.Raw), "text/plain"), strings.Index(string(m.Raw), "text/html"); i < 0 || j < i {
		t.Error("text/plain must precede text/html")
	}
}

func TestSingleBodiesAndNonASCII(t *testing.T) {
	srv := startServer(t, smtptest.Options{})
	c := newClient(t, srv, nil)
	htmlOnly := message()
	htmlOnly.Text = ""
	htmlOnly.Subject = "Bestellung verschickt – Grüße"
	htmlOnly.HTML = "<p>Grüße aus Köln</p>"
	if _, err := send(t, c, htmlOnly); err != nil {
		t.Fatal(err)
	}
	textOnly := message()
	textOnly.HTML = ""
	if _, err := send(t, c, textOnly); err != nil {
		t.Fatal(err)
	}
	msgs := srv.Messages()
	if got := msgs[0].Header.Get("Content-Type"); !strings.HasPrefix(got, "text/html") || msgs[0].HTML != "<p>Grüße aus Köln</p>" || msgs[0].Subject != htmlOnly.Subject {
		t.Errorf("html-only: %q %q %q", got, msgs[0].HTML, msgs[0].Subject)
	}
	if got := msgs[1].Header.Get("Content-Type"); !strings.HasPrefix(got, "text/plain") || msgs[1].Text != "Your order shipped." {
		t.Errorf("text-only: %q %q", got, msgs[1].Text)
	}
}

func TestMessageIDIsDeterministicAcrossAttempts(t *testing.T) {
	srv := startServer(t, smtptest.Options{})
	c := newClient(t, srv, nil)
	r1, err1 := send(t, c, message())
	r2, err2 := send(t, c, message())
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	msgs := srv.Messages()
	if r1.ProviderMessageID != r2.ProviderMessageID || msgs[0].Header.Get("Message-Id") != msgs[1].Header.Get("Message-Id") {
		t.Fatalf("ids differ: %q %q", r1.ProviderMessageID, r2.ProviderMessageID)
	}
	other := tags
	other.NotificationID = "ntf_other"
	r3, err := c.SendEmail(context.Background(), message(), other.IdempotencyKey(), other)
	if err != nil || r3.ProviderMessageID == r1.ProviderMessageID {
		t.Fatalf("another notification got %q (%v)", r3.ProviderMessageID, err)
	}
}

func TestMessageID(t *testing.T) {
	if got := smtp.MessageID("ntf_01J:email", ""); got != "ntf_01J.email@herald" {
		t.Fatalf("got %q", got)
	}
	if got := smtp.MessageID("ntf_01J:email", "mail.acme.example"); got != "ntf_01J.email@mail.acme.example" {
		t.Fatalf("got %q", got)
	}
	a, b := smtp.MessageID("a b:email", ""), smtp.MessageID("a-b:email", "")
	if a == b || !strings.HasPrefix(a, "a-b.email.") || b != "a-b.email@herald" {
		t.Fatalf("sanitized ids %q %q", a, b)
	}
	for _, key := range []string{"<evil>\r\nBcc: x@y:email", strings.Repeat("x", 500) + ":email", "::", "ü:email"} {
		id := smtp.MessageID(key, "")
		local, domain, ok := strings.Cut(id, "@")
		if !ok || domain != "herald" || local == "" || len(id) > 200 || strings.ContainsAny(local, "<>@ \r\n") ||
			strings.HasPrefix(local, ".") || strings.HasSuffix(local, ".") || strings.Contains(local, "..") {
			t.Errorf("MessageID(%q) = %q", key, id)
		}
		if smtp.MessageID(key, "") != id {
			t.Errorf("MessageID(%q) not deterministic", key)
		}
	}
}

func TestAuth(t *testing.T) {
	srv := startServer(t, smtptest.Options{Username: "relay-user", Password: "s3cret"})
	ok := newClient(t, srv, func(c *smtp.Config) { c.Username, c.Password = "relay-user", "s3cret" })
	if _, err := send(t, ok, message()); err != nil {
		t.Fatal(err)
	}
	if got := srv.Messages()[0].Authenticated; got != "relay-user" {
		t.Fatalf("authenticated as %q", got)
	}

	bad := newClient(t, srv, func(c *smtp.Config) { c.Username, c.Password = "relay-user", "wrong" })
	_, err := send(t, bad, message())
	if pe := providerError(t, err); !pe.Permanent || pe.Code != "auth" || strings.Contains(pe.Reason, "wrong") {
		t.Fatalf("wrong password: %+v", pe)
	}
	none := newClient(t, srv, nil)
	_, err = send(t, none, message())
	if pe := providerError(t, err); !pe.Permanent || pe.Code != "auth" {
		t.Fatalf("no credentials (530): %+v", pe)
	}
	if srv.Accepted() != 1 {
		t.Fatalf("accepted %d", srv.Accepted())
	}
}

// TestTLSPolicies: each client TLS policy against a server that offers it (the
// client trusts its certificate and logs in as u/p when login is set) or not.
// code is the permanent error's code, "" when the message must be delivered.
func TestTLSPolicies(t *testing.T) {
	for _, tc := range []struct {
		name, notDelivered  string
		server              smtptest.Options
		client              smtp.TLSPolicy
		login, plainText    bool
		code, authenticated string
	}{
		{name: "starttls", server: smtptest.Options{TLS: smtptest.TLSStartTLS, Username: "u", Password: "p"}, client: smtp.TLSStartTLS,
			login: true, authenticated: "u", notDelivered: "not delivered over STARTTLS"},
		{name: "implicit", server: smtptest.Options{TLS: smtptest.TLSImplicit, Username: "u", Password: "p"}, client: smtp.TLSImplicit,
			login: true, notDelivered: "not delivered over implicit TLS"},
		{name: "untrusted certificate", server: smtptest.Options{TLS: smtptest.TLSStartTLS}, client: smtp.TLSStartTLS, code: "tls"},
		{name: "starttls not offered", client: smtp.TLSStartTLS, code: "config", plainText: true},
		{name: "implicit tls against plain port", client: smtp.TLSImplicit, code: "tls"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startServer(t, tc.server)
			c := newClient(t, srv, func(c *smtp.Config) {
				c.TLS = tc.client
				if tc.login {
					c.TLSConfig, c.Username, c.Password = srv.ClientTLSConfig(), "u", "p"
				}
			})
			_, err := send(t, c, message())
			if tc.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				if srv.Accepted() != 1 || (tc.authenticated != "" && srv.Messages()[0].Authenticated != tc.authenticated) {
					t.Fatal(tc.notDelivered)
				}
			} else if pe := providerError(t, err); !pe.Permanent || pe.Code != tc.code {
				t.Fatalf("%+v", pe)
			} else if tc.plainText && srv.Accepted() != 0 {
				t.Fatal("sent in plain text")
			}
		})
	}
}

func TestReplyClassification(t *testing.T) {
	for _, tc := range []struct {
		name      string
		b         smtptest.Behavior
		code      string
		permanent bool
		enhanced  string
	}{
		{"421 at MAIL", smtptest.Fail421(), "smtp_421", false, "4.3.2"},
		{"451 at MAIL", smtptest.Fail451(), "smtp_451", false, "4.3.0"},
		{"421 at EHLO", smtptest.Reply(smtptest.StageHello, 421, "4.3.2", "Too busy"), "smtp_421", false, ""},
		{"452 at RCPT", smtptest.Reply(smtptest.StageRcpt, 452, "4.2.2", "Mailbox full, try later"), "smtp_452", false, "4.2.2"},
		{"451 after DATA", smtptest.Reply(smtptest.StageData, 451, "4.7.1", "Greylisted"), "smtp_451", false, "4.7.1"},
		{"550 unknown mailbox", smtptest.Reject550(), "invalid_address", true, "5.1.1"},
		{"553 bad address", smtptest.Reject553(), "invalid_address", true, "5.1.3"},
		{"550 policy at RCPT", smtptest.Reply(smtptest.StageRcpt, 550, "5.7.1", "Relaying denied"), "smtp_550", true, "5.7.1"},
		{"550 at MAIL", smtptest.Reply(smtptest.StageMail, 550, "5.7.1", "Sender rejected"), "smtp_550", true, "5.7.1"},
		{"552 after DATA", smtptest.Reply(smtptest.StageData, 552, "5.3.4", "Message too big"), "smtp_552", true, "5.3.4"},
		{"554 after DATA", smtptest.Reply(smtptest.StageData, 554, "5.7.1", "Spam"), "smtp_554", true, "5.7.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startServer(t, smtptest.Options{})
			srv.Next(tc.b)
			c := newClient(t, srv, nil)
			_, err := send(t, c, message())
			pe := providerError(t, err)
			if pe.Permanent != tc.permanent || pe.Code != tc.code || providers.IsPermanent(err) != tc.permanent {
				t.Fatalf("got %+v", pe)
			}
			if tc.enhanced != "" && !strings.Contains(pe.Reason, tc.enhanced) {
				t.Errorf("reason %q lacks %s", pe.Reason, tc.enhanced)
			}
			if srv.Accepted() != 0 {
				t.Fatal("a refused message was accepted")
			}
			// The next connection is accepted: faults are per connection.
			if _, err := send(t, c, message()); err != nil || srv.Accepted() != 1 {
				t.Fatalf("after the fault: %v", err)
			}
		})
	}
}

func TestTimeouts(t *testing.T) {
	// hangAt sends through a relay that hangs at stage, wants a retryable timeout
	// (the client's is 300 ms) and returns the relay and how long the send took.
	hangAt := func(t *testing.T, stage smtptest.Stage) (*smtptest.Server, time.Duration) {
		t.Helper()
		srv := startServer(t, smtptest.Options{})
		srv.Next(smtptest.Hang(stage))
		c := newClient(t, srv, func(c *smtp.Config) { c.Timeout = 300 * time.Millisecond })
		start := time.Now()
		_, err := send(t, c, message())
		if pe := providerError(t, err); pe.Permanent || pe.Code != "timeout" {
			t.Fatalf("%+v after %v", pe, time.Since(start))
		}
		return srv, time.Since(start)
	}
	t.Run("hang at MAIL hits the client timeout", func(t *testing.T) {
		if _, took := hangAt(t, smtptest.StageMail); took > 3*time.Second {
			t.Fatalf("timed out after %v", took)
		}
	})
	t.Run("hang at greeting stage", func(t *testing.T) { hangAt(t, smtptest.StageHello) })
	t.Run("hang after DATA: relay has it, client cannot know", func(t *testing.T) {
		srv, _ := hangAt(t, smtptest.StageData)
		msgs := srv.Messages()
		if len(msgs) != 1 || msgs[0].Acknowledged || srv.Accepted() != 0 {
			t.Fatalf("server has %d messages, accepted %d", len(msgs), srv.Accepted())
		}
	})
	t.Run("context deadline shorter than the timeout", func(t *testing.T) {
		srv := startServer(t, smtptest.Options{})
		srv.Next(smtptest.Hang(smtptest.StageRcpt))
		c := newClient(t, srv, func(c *smtp.Config) { c.Timeout = 30 * time.Second })
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := c.SendEmail(ctx, message(), tags.IdempotencyKey(), tags)
		if pe := providerError(t, err); pe.Permanent || pe.Code != "timeout" || time.Since(start) > 3*time.Second {
			t.Fatalf("%+v after %v", pe, time.Since(start))
		}
	})
	t.Run("canceled", func(t *testing.T) {
		srv := startServer(t, smtptest.Options{})
		srv.Next(smtptest.Hang(smtptest.StageMail))
		c := newClient(t, srv, nil)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(200*time.Millisecond, cancel)
		_, err := c.SendEmail(ctx, message(), tags.IdempotencyKey(), tags)
		if pe := providerError(t, err); pe.Permanent || pe.Code != "canceled" || !errors.Is(err, context.Canceled) {
			t.Fatalf("%+v", pe)
		}
	})
}

func TestConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	c, err := smtp.New(smtp.Config{Host: "127.0.0.1", Port: port, TLS: smtp.TLSNone, From: "a@acme.example", Timeout: time.Second,
		Egress: providertest.Loopback()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.SendEmail(context.Background(), message(), tags.IdempotencyKey(), tags)
	if pe := providerError(t, err); pe.Permanent || pe.Code != "connection" {
		t.Fatalf("%+v", pe)
	}
}

func TestRejectsBadMessagesBeforeConnecting(t *testing.T) {
	srv := startServer(t, smtptest.Options{})
	c := newClient(t, srv, nil)
	for name, tc := range map[string]struct {
		mod  func(*providers.EmailMessage)
		code string
	}{
		"no recipient":     {func(m *providers.EmailMessage) { m.To = "" }, "invalid_address"},
		"bad recipient":    {func(m *providers.EmailMessage) { m.To = "not an address" }, "invalid_address"},
		"no subject":       {func(m *providers.EmailMessage) { m.Subject = "" }, "bad_request"},
		"no body":          {func(m *providers.EmailMessage) { m.Text, m.HTML = "", "" }, "bad_request"},
		"header injection": {func(m *providers.EmailMessage) { m.Headers["X-Note"] = "a\r\nBcc: victim@example.com" }, "bad_request"},
		"bad header name":  {func(m *providers.EmailMessage) { m.Headers["Bad Name:"] = "x" }, "bad_request"},
		"subject break":    {func(m *providers.EmailMessage) { m.Subject = "a\r\nBcc: victim@example.com" }, "bad_request"},
		"bad sender":       {func(m *providers.EmailMessage) { m.From = "nope" }, "config"},
	} {
		msg := message()
		tc.mod(&msg)
		_, err := send(t, c, msg)
		if pe := providerError(t, err); !pe.Permanent || pe.Code != tc.code {
			t.Errorf("%s: %+v", name, pe)
		}
	}
	if _, err := c.SendEmail(context.Background(), message(), "", providers.Tags{}); !providers.IsPermanent(err) {
		t.Errorf("missing tags: %v", err)
	}
	if srv.Connections() != 0 {
		t.Fatalf("%d connections for refused messages", srv.Connections())
	}
}

func TestNewValidates(t *testing.T) {
	for name, cfg := range map[string]smtp.Config{
		"no host":          {From: "a@b.example"},
		"bad policy":       {Host: "relay.example", TLS: "ssl"},
		"bad port":         {Host: "relay.example", Port: 70000},
		"plaintext auth":   {Host: "relay.example", TLS: smtp.TLSNone, Username: "u", Password: "p"},
		"bad mid domain":   {Host: "relay.example", MessageIDDomain: "a b"},
		"mid domain brack": {Host: "relay.example", MessageIDDomain: "x>"},
	} {
		if _, err := smtp.New(cfg); !providers.IsPermanent(err) {
			t.Errorf("%s: %v", name, err)
		}
	}
	c, err := smtp.New(smtp.Config{Host: "relay.example"})
	if err != nil || c.Addr() != "relay.example:587" {
		t.Fatalf("default port: %v %v", c, err)
	}
	c, _ = smtp.New(smtp.Config{Host: "relay.example", TLS: smtp.TLSImplicit})
	if c.Addr() != "relay.example:465" {
		t.Fatalf("implicit port: %s", c.Addr())
	}
	c, _ = smtp.New(smtp.Config{Host: "relay.example", TLS: smtp.TLSNone})
	if c.Addr() != "relay.example:25" {
		t.Fatalf("plain port: %s", c.Addr())
	}
}

func TestConcurrentSends(t *testing.T) {
	srv := startServer(t, smtptest.Options{Username: "u", Password: "p"})
	c := newClient(t, srv, func(c *smtp.Config) { c.Username, c.Password = "u", "p" })
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tg := tags
			tg.NotificationID = fmt.Sprintf("ntf_%02d", i)
			msg := message()
			msg.To = fmt.Sprintf("user%02d@example.com", i)
			res, err := c.SendEmail(context.Background(), msg, tg.IdempotencyKey(), tg)
			if err == nil && res.ProviderMessageID != tg.NotificationID+".email@herald" {
				err = fmt.Errorf("id %q", res.ProviderMessageID)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if srv.Accepted() != n {
		t.Fatalf("accepted %d of %d", srv.Accepted(), n)
	}
}
