package egress_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/egress"
	"github.com/herald-notify/herald/internal/egress/egresstest"
)

// Only Check runs for these: nothing is dialled.
func TestDefaultRefusesEveryInternalAddress(t *testing.T) {
	p := egress.Default()
	for _, s := range []string{
		"127.0.0.1", "127.8.9.10", "0.0.0.0", "0.1.2.3", // loopback, "this network"
		"10.0.0.1", "172.16.5.4", "172.31.255.255", "192.168.1.1", // RFC 1918
		"169.254.169.254", "169.254.0.1", // link-local, the metadata endpoint
		"100.64.0.1", "100.100.100.200", // CGNAT (Alibaba's metadata endpoint)
		"192.0.0.192",                                     // IETF assignments (Oracle's metadata endpoint)
		"224.0.0.1", "239.255.255.250", "255.255.255.255", // multicast, broadcast
		"198.18.0.1", "192.0.2.1", // benchmarking, documentation
		"::1", "::", // loopback, unspecified
		"fe80::1", "fc00::1", "fd00:ec2::254", // link-local, ULA, AWS's IPv6 metadata endpoint
		"ff02::1",                                                       // multicast
		"::ffff:127.0.0.1", "::ffff:169.254.169.254", "::ffff:10.0.0.1", // IPv4-mapped
		"64:ff9b::a9fe:a9fe", // NAT64 of 169.254.169.254
		"2002:7f00:1::1",     // 6to4 of 127.0.0.1
		"2001::1",            // Teredo
	} {
		if err := p.Check(netip.MustParseAddr(s), 443); !errors.Is(err, egress.ErrRefused) {
			t.Errorf("%s: %v, want refused", s, err)
		}
	}
	for _, s := range []string{"8.8.8.8", "142.250.74.10", "2607:f8b0:4004:c07::5f", "::ffff:8.8.8.8"} {
		if err := p.Check(netip.MustParseAddr(s), 25); err != nil {
			t.Errorf("%s: %v, want allowed", s, err)
		}
	}
}

func TestAllowlist(t *testing.T) {
	p, err := egress.Parse(" 127.0.0.1:8025, 10.20.0.0/16 [::1]:25,relay.corp.example, Mail.Example.:2525 ,::ffff:192.168.7.7")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		addr string
		port uint16
		ok   bool
	}{
		{"127.0.0.1", 8025, true}, {"127.0.0.1", 22, false}, {"::ffff:127.0.0.1", 8025, true},
		{"10.20.3.4", 25, true}, {"10.20.255.255", 1, true}, {"10.21.0.1", 25, false},
		{"::1", 25, true}, {"::1", 26, false},
		{"192.168.7.7", 9, true}, {"192.168.7.8", 9, false},
		{"169.254.169.254", 80, false},
	}
	for _, c := range cases {
		if err := p.Check(netip.MustParseAddr(c.addr), c.port); (err == nil) != c.ok {
			t.Errorf("%s port %d: %v, want allowed=%v", c.addr, c.port, err, c.ok)
		}
	}
	if got := p.String(); got != "127.0.0.1:8025,10.20.0.0/16,[::1]:25,relay.corp.example,Mail.Example.:2525,::ffff:192.168.7.7" {
		t.Errorf("String() = %q", got)
	}
	if p, err := egress.Parse(""); err != nil || p.Check(netip.MustParseAddr("127.0.0.1"), 80) == nil {
		t.Errorf("empty allowlist: %v", err)
	}
	for _, bad := range []string{"10.0.0.0/33", "127.0.0.1:0", "127.0.0.1:70000", "relay:x", "http://relay.example", "a..b", "-a.example", "fe80::1%eth0", "under score!"} {
		if _, err := egress.Parse(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// listener counts the connections it accepts.
type listener struct {
	net.Listener
	accepted atomic.Int32
}

func listen(t *testing.T) (*listener, int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &listener{Listener: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.accepted.Add(1)
			c.Close()
		}
	}()
	return l, ln.Addr().(*net.TCPAddr).Port
}

func TestDialRefusesBeforeConnecting(t *testing.T) {
	l, port := listen(t)
	ctx := context.Background()
	for _, addr := range []string{net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), net.JoinHostPort("::ffff:127.0.0.1", strconv.Itoa(port)),
		"localhost:" + strconv.Itoa(port)} {
		_, err := egress.Default().DialContext(ctx, "tcp", addr)
		re, ok := egress.AsRefused(err)
		if !ok || !egress.IsRefused(err) || re.Host == "" {
			t.Fatalf("dial %s: %v, want a refusal", addr, err)
		}
	}
	// Addresses nothing here listens on; refused before any packet is sent.
	for _, addr := range []string{"169.254.169.254:80", "10.0.0.1:25", "[fd00:ec2::254]:80", "0.0.0.0:" + strconv.Itoa(port)} {
		if _, err := egress.Default().DialContext(ctx, "tcp", addr); !egress.IsRefused(err) {
			t.Fatalf("dial %s: %v, want a refusal", addr, err)
		}
	}
	if _, err := egress.Default().DialContext(ctx, "udp", "8.8.8.8:53"); !egress.IsRefused(err) {
		t.Fatalf("udp: %v", err)
	}
	time.Sleep(50 * time.Millisecond)
	if n := l.accepted.Load(); n != 0 {
		t.Fatalf("the listener accepted %d connections", n)
	}
	for _, allow := range []string{"127.0.0.1", "127.0.0.1:" + strconv.Itoa(port), "localhost"} {
		c, err := egress.MustParse(allow).DialContext(ctx, "tcp4", "localhost:"+strconv.Itoa(port))
		if err != nil {
			t.Fatalf("allow %s: %v", allow, err)
		}
		c.Close()
	}
	if _, err := egress.MustParse("127.0.0.1:1").DialContext(ctx, "tcp", "127.0.0.1:"+strconv.Itoa(port)); !egress.IsRefused(err) {
		t.Fatalf("another port allowed: %v", err)
	}
}

// TestANameThatResolvesInsideIsRefusedAtDialTime: the check is on the address
// the name resolved to, when connecting, whatever the name looks like.
func TestANameThatResolvesInsideIsRefusedAtDialTime(t *testing.T) {
	l, port := listen(t)
	res := egresstest.NewResolver(map[string]netip.Addr{
		"relay.tenant.example": netip.MustParseAddr("127.0.0.1"), "meta.tenant.example": netip.MustParseAddr("169.254.169.254"),
		"ula.tenant.example": netip.MustParseAddr("fd00:ec2::254")})
	p := egress.Default().WithResolver(res.Resolver)
	for _, host := range []string{"relay.tenant.example", "meta.tenant.example", "ula.tenant.example"} {
		_, err := p.DialContext(context.Background(), "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		re, ok := egress.AsRefused(err)
		if !ok || re.Host != host {
			t.Fatalf("%s: %v, want a refusal naming the host", host, err)
		}
	}
	if res.Queries() == 0 {
		t.Fatal("the fake DNS server was never asked: the test proves nothing")
	}
	if n := l.accepted.Load(); n != 0 {
		t.Fatalf("the listener accepted %d connections", n)
	}
	// The operator can allow the name: then it reaches what it resolves to.
	c, err := egress.MustParse("relay.tenant.example").WithResolver(res.Resolver).DialContext(context.Background(), "tcp", net.JoinHostPort("relay.tenant.example", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("allowed name: %v", err)
	}
	c.Close()
}

func TestClientRefusesRedirectsAndInternalHosts(t *testing.T) {
	var inside atomic.Int32
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inside.Add(1)
		fmt.Fprint(w, "internal secret")
	}))
	defer internal.Close()
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		target := internal.URL + "/x"
		if r.URL.Path == "/metadata" {
			target = "http://169.254.169.254/latest/meta-data/"
		}
		http.Redirect(w, r, target, http.StatusTemporaryRedirect)
	}))
	defer redirector.Close()

	// Only the redirector's own host:port is allowed.
	p := egress.MustParse(strings.TrimPrefix(redirector.URL, "http://"))
	for _, path := range []string{"/", "/metadata"} {
		resp, err := p.Client(5*time.Second).Post(redirector.URL+path, "application/json", strings.NewReader("{}"))
		if err == nil {
			resp.Body.Close()
			t.Fatalf("%s: a redirect was followed (status %d)", path, resp.StatusCode)
		}
		if !egress.IsRedirect(err) || strings.Contains(err.Error(), "secret") {
			t.Fatalf("%s: %v", path, err)
		}
	}
	// The internal host directly: refused at dial time.
	if _, err := p.Client(5 * time.Second).Get(internal.URL); !egress.IsRefused(err) {
		t.Fatalf("internal host: %v", err)
	}
	if inside.Load() != 0 {
		t.Fatalf("the internal host was reached %d times", inside.Load())
	}
	if p.Transport().Proxy != nil {
		t.Fatal("the transport uses a proxy, which would dial past the check")
	}
}

func TestOrDefault(t *testing.T) {
	if c := egress.OrDefault(nil, time.Second); c.Timeout != time.Second || c.Transport != egress.Default().Transport() || c.CheckRedirect == nil {
		t.Fatalf("nil: %+v", c)
	}
	plain := &http.Client{Timeout: 2 * time.Second}
	c := egress.OrDefault(plain, time.Second)
	if c == plain || c.Timeout != 2*time.Second || c.Transport != egress.Default().Transport() || c.CheckRedirect == nil || plain.Transport != nil {
		t.Fatalf("no transport: %+v", c)
	}
	own := &http.Client{Transport: http.DefaultTransport}
	if egress.OrDefault(own, time.Second) != own {
		t.Fatal("a client with its own transport must be kept")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	if _, err := c.Get(srv.URL); !egress.IsRefused(err) {
		t.Fatalf("a client without a transport reached 127.0.0.1: %v", err)
	}
}

// WithPorts (tenant webhooks): a public address only on the ports given; a
// destination the operator named keeps the ports its rule allows; a name that
// does not resolve is still refused by its port.
func TestWithPortsRefusesOtherPorts(t *testing.T) {
	p := egress.MustParse("127.0.0.1, relay.corp.example:2525").WithPorts(80, 443)
	public := netip.MustParseAddr("93.184.216.34")
	for _, port := range []uint16{80, 443} {
		if err := p.Check(public, port); err != nil {
			t.Errorf("public :%d refused: %v", port, err)
		}
	}
	for _, port := range []uint16{22, 25, 6379, 8080} {
		if err := p.Check(public, port); !errors.Is(err, egress.ErrRefused) || !strings.Contains(err.Error(), "port") {
			t.Errorf("public :%d: %v, want refused for its port", port, err)
		}
	}
	if err := p.Check(netip.MustParseAddr("127.0.0.1"), 8025); err != nil {
		t.Errorf("the operator's 127.0.0.1 on any port: %v", err)
	}
	ctx := context.Background()
	if err := p.CheckHost(ctx, "relay.corp.example", 2525); err != nil {
		t.Errorf("the operator's relay on its port: %v", err)
	}
	if err := p.CheckHost(ctx, "does-not-resolve.invalid", 22); !errors.Is(err, egress.ErrRefused) {
		t.Errorf("an unresolvable name on :22: %v, want refused", err)
	}
	if err := p.CheckHost(ctx, "93.184.216.34", 6379); !errors.Is(err, egress.ErrRefused) {
		t.Errorf("a public address on :6379: %v, want refused", err)
	}
	// The providers' policy itself is unchanged.
	if err := egress.MustParse("127.0.0.1").Check(public, 8080); err != nil {
		t.Errorf("without WithPorts :8080 is refused: %v", err)
	}
}
