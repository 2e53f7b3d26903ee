package smtptest_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	gosmtp "github.com/emersion/go-smtp"

	"github.com/herald-notify/herald/providers/smtp/smtptest"
)

const raw = "From: a@example.com\r\nTo: b@example.com\r\nSubject: =?UTF-8?q?Gr=C3=BC=C3=9Fe?=\r\n" +
	"MIME-Version: 1.0\r\nContent-Type: multipart/alternative; boundary=XX\r\n\r\n" +
	"--XX\r\nContent-Type: text/plain; charset=UTF-8\r\nContent-Transfer-Encoding: base64\r\n\r\nSGFsbG8=\r\n" +
	"--XX\r\nContent-Type: text/html; charset=UTF-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n<p>Gr=C3=BC=C3=9Fe</p>\r\n" +
	"--XX--\r\n"

// sendRaw sends raw over a plain connection, one connection per message.
func sendRaw(s *smtptest.Server) error {
	c, err := gosmtp.Dial(s.Addr)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.SendMail("a@example.com", []string{"b@example.com"}, strings.NewReader(raw))
}

func TestRecordsAndParses(t *testing.T) {
	s, err := smtptest.New(smtptest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.HasPrefix(s.Addr, "127.0.0.1:") || s.Port == 0 {
		t.Fatalf("addr %q", s.Addr)
	}
	if err := sendRaw(s); err != nil {
		t.Fatal(err)
	}
	if !s.WaitMessages(1, time.Second) {
		t.Fatal("no message")
	}
	m := s.Messages()[0]
	if m.From != "a@example.com" || len(m.To) != 1 || m.To[0] != "b@example.com" || !m.Acknowledged {
		t.Fatalf("envelope %+v", m)
	}
	if m.Subject != "Grüße" || m.Text != "Hallo" || m.HTML != "<p>Grüße</p>" || m.Header.Get("To") != "b@example.com" {
		t.Fatalf("parsed subject %q text %q html %q", m.Subject, m.Text, m.HTML)
	}
}

func TestBehaviors(t *testing.T) {
	s, err := smtptest.New(smtptest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Next(smtptest.Reject553())
	s.Always(smtptest.Fail421())
	var se *gosmtp.SMTPError
	if err := sendRaw(s); err == nil || !asSMTP(err, &se) || se.Code != 553 {
		t.Fatalf("queued behaviour: %v", err)
	}
	for i := 0; i < 2; i++ {
		if err := sendRaw(s); err == nil || !asSMTP(err, &se) || se.Code != 421 {
			t.Fatalf("always: %v", err)
		}
	}
	s.Recover()
	if err := sendRaw(s); err != nil {
		t.Fatal(err)
	}
	if s.Accepted() != 1 || s.Connections() != 4 {
		t.Fatalf("accepted %d connections %d", s.Accepted(), s.Connections())
	}
}

func TestHangIsReleasedByClose(t *testing.T) {
	s, err := smtptest.New(smtptest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Next(smtptest.Hang(smtptest.StageData))
	done := make(chan error, 1)
	go func() { done <- sendRaw(s) }()
	if !s.WaitMessages(1, 5*time.Second) {
		t.Fatal("message not received")
	}
	if s.Accepted() != 0 || s.Messages()[0].Acknowledged {
		t.Fatal("hung message counted as acknowledged")
	}
	s.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("hung send succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not release the hang")
	}
}

func asSMTP(err error, target **gosmtp.SMTPError) bool {
	return errors.As(err, target)
}
