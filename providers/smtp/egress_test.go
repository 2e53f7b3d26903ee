package smtp_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/egress"
	"github.com/herald-notify/herald/internal/egress/egresstest"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/providertest"
	"github.com/herald-notify/herald/providers/smtp"
	"github.com/herald-notify/herald/providers/smtp/smtptest"
)

func sendTo(t *testing.T, host string, port int, policy *egress.Policy) error {
	t.Helper()
	c, err := smtp.New(smtp.Config{Host: host, Port: port, TLS: smtp.TLSNone, From: "noreply@acme.example", Timeout: 2 * time.Second, Egress: policy})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = c.SendEmail(ctx, message(), tags.IdempotencyKey(), tags)
	return err
}

// TestInternalRelaysAreRefusedAtDial: with the default policy, a relay on an
// internal address is refused before the connection is made, permanently, and
// nothing the service would have said comes back.
func TestInternalRelaysAreRefusedAtDial(t *testing.T) {
	port, accepted := smtptest.BannerService(t, "220 (vsFTPd 3.0.3) internal-ftp-7\r\n", "500 Unknown command (vsFTPd 3.0.3 on internal-ftp-7)\r\n")
	cases := []struct {
		host string
		port int
	}{{"127.0.0.1", port}, {"localhost", port}, {"::ffff:127.0.0.1", port}, {"10.0.0.1", 25}, {"169.254.169.254", 25}, {"fd00:ec2::254", 25}, {"0.0.0.0", port}}
	for _, c := range cases {
		err := sendTo(t, c.host, c.port, nil)
		pe, ok := providers.AsError(err)
		if !ok || pe.Code != "egress_refused" || !pe.Permanent {
			t.Errorf("%s:%d: %v, want a permanent egress refusal", c.host, c.port, err)
			continue
		}
		if strings.Contains(err.Error(), "ftp") || strings.Contains(err.Error(), "10.0.0.1:25") {
			t.Errorf("%s:%d: the error says too much: %v", c.host, c.port, err)
		}
	}
	time.Sleep(50 * time.Millisecond)
	if n := accepted.Load(); n != 0 {
		t.Fatalf("the internal service accepted %d connections", n)
	}
}

// TestANameResolvingInsideIsRefused: a relay host name whose DNS answer is
// 127.0.0.1 is refused when dialling, like the address itself.
func TestANameResolvingInsideIsRefused(t *testing.T) {
	srv := startServer(t, smtptest.Options{})
	res := egresstest.NewResolver(map[string]netip.Addr{"mail.tenant.example": netip.MustParseAddr("127.0.0.1")})
	err := sendTo(t, "mail.tenant.example", srv.Port, egress.Default().WithResolver(res.Resolver))
	if pe, ok := providers.AsError(err); !ok || pe.Code != "egress_refused" || !strings.Contains(pe.Reason, "mail.tenant.example") {
		t.Fatalf("%v, want a refusal naming the host", err)
	}
	if res.Queries() == 0 || srv.Connections() != 0 {
		t.Fatalf("DNS queries %d, relay connections %d (want >0, 0)", res.Queries(), srv.Connections())
	}
	// Allowed by the operator (an on-premise relay): delivered.
	if err := sendTo(t, "mail.tenant.example", srv.Port, egress.MustParse("mail.tenant.example").WithResolver(res.Resolver)); err != nil {
		t.Fatalf("allowed relay: %v", err)
	}
}

// TestANonSMTPServiceIsNotQuoted: even where the operator allowed the address,
// what a service that is not an SMTP server says is not reflected.
func TestANonSMTPServiceIsNotQuoted(t *testing.T) {
	for _, banner := range []string{"HTTP/1.1 400 Bad Request internal-admin-9\r\n", "+OK redis-internal-9 ready\r\n", "SSH-2.0-OpenSSH_9.2p1 internal-bastion-9\r\n"} {
		port, accepted := smtptest.BannerService(t, banner, "")
		err := sendTo(t, "127.0.0.1", port, providertest.Loopback())
		if err == nil || strings.Contains(err.Error(), "internal-") || accepted.Load() != 1 {
			t.Errorf("banner %q: %v (accepted %d)", banner, err, accepted.Load())
		}
	}
}
