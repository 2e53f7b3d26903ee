// Package egress is the one policy every outbound provider connection goes
// through: the HTTP clients of SendGrid, Twilio and FCM (its OAuth token
// exchange included) and the SMTP relay dialer.
//
// A tenant chooses some of the addresses Herald connects to (an SMTP relay's
// host and port; before this policy, an FCM key's token_uri), so without it the
// worker could be made to reach what only it can reach: loopback services, the
// private network, the cloud metadata endpoint (169.254.169.254,
// fd00:ec2::254). The policy refuses every address that is not public:
//
//   - IPv4: every prefix of the IANA special-purpose registry — 0/8, 10/8,
//     100.64/10 (CGNAT), 127/8, 169.254/16, 172.16/12, 192.168/16, 192.0.0/24,
//     the documentation and benchmarking ranges, multicast 224/4 and 240/4;
//   - IPv6: everything outside global unicast 2000::/3 (::1, ::, fc00::/7 ULA,
//     fe80::/10, ff00::/8 multicast, NAT64 64:ff9b::/96), and the special
//     prefixes inside it (6to4 2002::/16, Teredo and 2001::/23, documentation);
//   - IPv4-mapped IPv6 (::ffff:127.0.0.1) is judged as the IPv4 address it maps.
//
// The check runs at connect time, on the address the socket is about to connect
// to (a net.Dialer Control hook, before any packet is sent), after name
// resolution: a host name that resolves to 127.0.0.1, or that answers a public
// address first and a private one later (DNS rebinding), is refused all the
// same. The address lists come from code.dny.dev/ssrf, which is generated from
// the IANA registries.
//
// Redirects are never followed by the policy's HTTP client: a provider API
// answers, it does not redirect, and a followed redirect would carry the
// request (and its credentials) to another host and bring that host's body
// back into the attempt history.
//
// The operator can allow named destinations (HERALD_EGRESS_ALLOW): tests that
// run local fakes on 127.0.0.1, an on-premise SMTP relay on the private
// network. See Parse.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"code.dny.dev/ssrf"
)

// ErrRefused is what every refused connection wraps (errors.Is).
var ErrRefused = errors.New("egress: destination refused")

// RefusedError is a connection the policy refused. Addr is the address the
// socket would have connected to (ip:port) and is for logs: tell a tenant
// Host, not Addr, so the refusal does not reveal where an internal name points.
type RefusedError struct {
	// Host is the host as dialled ("relay.example.com", "10.0.0.1").
	Host string
	// Addr is the resolved address, ip:port.
	Addr string
	// Why is the policy's reason ("127.0.0.1 is not a permitted destination …").
	Why string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("egress: connection to %s (%s) refused: %s", e.Host, e.Addr, e.Why)
}

// Is makes errors.Is(err, ErrRefused) hold.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// RedirectError is a redirect the policy's HTTP client refused to follow.
type RedirectError struct {
	// Status is the redirect's HTTP status (301, 302, 307...).
	Status int
}

func (e *RedirectError) Error() string {
	return fmt.Sprintf("egress: the provider answered with a redirect (HTTP %d), which Herald does not follow", e.Status)
}

// IsRefused reports whether err is a connection the policy refused.
func IsRefused(err error) bool { return errors.Is(err, ErrRefused) }

// AsRefused finds the RefusedError in err's chain.
func AsRefused(err error) (*RefusedError, bool) {
	var re *RefusedError
	ok := errors.As(err, &re)
	return re, ok
}

// IsRedirect reports whether err is a refused redirect.
func IsRedirect(err error) bool {
	var re *RedirectError
	return errors.As(err, &re)
}

// Policy decides which addresses provider connections may reach: every public
// address, plus what the operator allowed. The zero value is not usable; use
// Default, Parse or MustParse. A Policy is safe for concurrent use.
type Policy struct {
	allow    []rule
	source   string
	resolver *net.Resolver
	// ports, when set (WithPorts), are the only ports a destination the
	// operator did not name in the allowlist may be reached on.
	ports []uint16

	once      sync.Once
	transport *http.Transport
}

// rule is one allowlist entry: a host name, or an IP prefix, with an optional
// port (0: any).
type rule struct {
	name   string // lower case, no trailing dot; "" for a prefix rule
	prefix netip.Prefix
	port   uint16
}

// guard holds the address lists; Herald picks the ports and networks itself.
var guard = ssrf.New(ssrf.WithAnyPort(), ssrf.WithAnyNetwork())

// Default is the policy with nothing allowed beyond public addresses: what
// Herald uses when the operator allowed nothing. It is one policy (one
// connection pool) for the whole process.
func Default() *Policy { return defaultPolicy }

var defaultPolicy = &Policy{}

// Parse reads an allowlist (HERALD_EGRESS_ALLOW): entries separated by commas
// or spaces, each one of
//
//	relay.corp.example        a host name, any port
//	relay.corp.example:2525   a host name on one port
//	127.0.0.1  ::1            an address, any port
//	127.0.0.1:8025 [::1]:8025 an address on one port
//	10.20.0.0/16  fd12::/48   a prefix, any port
//
// A name is matched against the host as configured (the provider base URL's
// host, the SMTP relay's host), case-insensitively, and then reaches whatever
// it resolves to: allow names you control. An address or prefix is matched
// against the address actually connected to. The empty string is Default.
func Parse(s string) (*Policy, error) {
	p := &Policy{source: strings.Join(strings.FieldsFunc(s, isSep), ",")}
	for _, e := range strings.FieldsFunc(s, isSep) {
		r, err := parseRule(e)
		if err != nil {
			return nil, fmt.Errorf("egress allowlist entry %q: %w", e, err)
		}
		p.allow = append(p.allow, r)
	}
	return p, nil
}

// MustParse is Parse for lists fixed in code (tests); it panics on an error.
func MustParse(s string) *Policy {
	p, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return p
}

func isSep(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' }

func parseRule(e string) (rule, error) {
	if strings.Contains(e, "/") {
		pfx, err := netip.ParsePrefix(e)
		if err != nil {
			return rule{}, errors.New("not a prefix such as 10.20.0.0/16")
		}
		if pfx.Addr().Zone() != "" {
			return rule{}, errors.New("a prefix cannot have a zone")
		}
		return rule{prefix: unmapPrefix(pfx.Masked())}, nil
	}
	if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(e, "["), "]")); err == nil {
		return addrRule(a, 0)
	}
	host, portStr, err := net.SplitHostPort(e)
	if err != nil {
		return nameRule(e, 0)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || port == 0 {
		return rule{}, errors.New("the port must be a number from 1 to 65535")
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return addrRule(a, uint16(port))
	}
	return nameRule(host, uint16(port))
}

func addrRule(a netip.Addr, port uint16) (rule, error) {
	if a.Zone() != "" {
		return rule{}, errors.New("an address cannot have a zone")
	}
	a = a.Unmap()
	return rule{prefix: netip.PrefixFrom(a, a.BitLen()), port: port}, nil
}

func nameRule(name string, port uint16) (rule, error) {
	n := normName(name)
	if n == "" || len(n) > 253 {
		return rule{}, errors.New("not a host name, address or prefix")
	}
	for _, label := range strings.Split(n, ".") {
		if label == "" || len(label) > 63 || strings.HasPrefix(label, "-") || strings.HasSuffix(label, "-") {
			return rule{}, errors.New("not a host name, address or prefix")
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return rule{}, errors.New("not a host name, address or prefix")
			}
		}
	}
	return rule{name: n, port: port}, nil
}

func normName(h string) string { return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".") }

func unmapPrefix(p netip.Prefix) netip.Prefix {
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p
}

// String is the allowlist, as parsed ("" for Default).
func (p *Policy) String() string { return p.source }

// WithResolver returns a copy of the policy that resolves names with r (nil:
// the system's). Tests use it to make a name resolve to a refused address.
func (p *Policy) WithResolver(r *net.Resolver) *Policy {
	return &Policy{allow: p.allow, source: p.source, resolver: r, ports: p.ports}
}

// WithPorts returns a copy of the policy (with a transport of its own) that
// also refuses every port but these, except on destinations the operator
// named in the allowlist (which allows them on the ports it says). Tenant
// webhooks use it (80 and 443 unless HERALD_WEBHOOK_PORTS adds more), so a
// tenant cannot make Herald knock on a public host's other services.
func (p *Policy) WithPorts(ports ...uint16) *Policy {
	return &Policy{allow: p.allow, source: p.source, resolver: p.resolver, ports: slices.Clone(ports)}
}

// portAllowed reports whether port passes WithPorts (always, without it).
func (p *Policy) portAllowed(port uint16) bool {
	return p.ports == nil || slices.Contains(p.ports, port)
}

func (p *Policy) portRefusal(port uint16) string {
	return fmt.Sprintf("port %d is not allowed (allowed: %v, and the destinations HERALD_EGRESS_ALLOW names)", port, p.ports)
}

// allowsName reports whether the operator allowed host (as dialled) on port.
func (p *Policy) allowsName(host string, port uint16) bool {
	n := normName(host)
	for _, r := range p.allow {
		if r.name != "" && r.name == n && (r.port == 0 || r.port == port) {
			return true
		}
	}
	return false
}

// allowsAddr reports whether the operator allowed ip (unmapped) on port.
func (p *Policy) allowsAddr(ip netip.Addr, port uint16) bool {
	for _, r := range p.allow {
		if r.name == "" && r.prefix.Contains(ip) && (r.port == 0 || r.port == port) {
			return true
		}
	}
	return false
}

// Check reports whether a connection to ip:port is allowed, as the dial-time
// hook decides it: nil, or an error wrapping ErrRefused.
func (p *Policy) Check(ip netip.Addr, port uint16) error {
	ip = ip.Unmap()
	if p.allowsAddr(ip, port) {
		return nil
	}
	if !p.portAllowed(port) {
		return fmt.Errorf("%w: %s", ErrRefused, p.portRefusal(port))
	}
	if err := guard.SafeAddr(ip); err != nil {
		return fmt.Errorf("%w: %s", ErrRefused, strings.TrimPrefix(err.Error(), ssrf.ErrProhibitedIP.Error()+": "))
	}
	return nil
}

// DialContext connects like net.Dialer.DialContext, refusing (before any packet
// is sent) every address the policy does not allow. A refusal is a
// *RefusedError (wrapped in a *net.OpError).
func (p *Policy) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, &RefusedError{Host: addr, Addr: addr, Why: "only TCP connections are made"}
	}
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port64, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("egress: bad port in %q", addr)
	}
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Resolver: p.resolver}
	if !p.allowsName(host, uint16(port64)) {
		d.Control = func(network, address string, _ syscall.RawConn) error {
			return p.control(host, network, address)
		}
	}
	return d.DialContext(ctx, network, addr)
}

// control is the dial-time hook: address is the resolved ip:port the socket is
// about to connect to.
func (p *Policy) control(host, network, address string) error {
	if network != "tcp4" && network != "tcp6" {
		return &RefusedError{Host: host, Addr: address, Why: "only TCP connections are made"}
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &RefusedError{Host: host, Addr: address, Why: "unparseable address"}
	}
	if err := p.Check(ap.Addr(), ap.Port()); err != nil {
		return &RefusedError{Host: host, Addr: address, Why: strings.TrimPrefix(err.Error(), ErrRefused.Error()+": ")}
	}
	return nil
}

// Transport is the policy's HTTP transport, shared by every client of the
// policy (one connection pool). It dials through DialContext and uses no proxy
// (a proxy would dial on Herald's behalf, past the check).
func (p *Policy) Transport() *http.Transport {
	p.once.Do(func() {
		p.transport = &http.Transport{
			Proxy:                 nil,
			DialContext:           p.DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          100,
			MaxIdleConnsPerHost:   32,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
		}
	})
	return p.transport
}

// Client returns an HTTP client on the policy's transport that refuses every
// redirect (a *RedirectError; the redirect's body is discarded unread).
// timeout bounds each request (0: none).
func (p *Policy) Client(timeout time.Duration) *http.Client {
	return &http.Client{Transport: p.Transport(), Timeout: timeout, CheckRedirect: RefuseRedirects}
}

// RefuseRedirects is an http.Client CheckRedirect that follows no redirect.
func RefuseRedirects(req *http.Request, _ []*http.Request) error {
	status := 0
	if req.Response != nil {
		status = req.Response.StatusCode
	}
	return &RedirectError{Status: status}
}

// OrDefault returns hc when it has a transport of its own (whoever built that
// transport answers for where it connects), else a client with hc's timeout
// and redirect policy on the default policy's transport, refusing redirects
// unless hc says otherwise. A nil hc is Default().Client(timeout).
func OrDefault(hc *http.Client, timeout time.Duration) *http.Client {
	if hc == nil {
		return Default().Client(timeout)
	}
	if hc.Transport != nil {
		return hc
	}
	c := *hc
	c.Transport = Default().Transport()
	if c.CheckRedirect == nil {
		c.CheckRedirect = RefuseRedirects
	}
	return &c
}

// CheckHost reports whether host (a name or an address, as in a URL) on port
// is a destination the policy allows, resolving a name now: for a clear error
// when a tenant registers a URL. A name that does not resolve now passes. It is advice, not the guard: the dial-time
// check still decides every connection (a name may resolve elsewhere later).
func (p *Policy) CheckHost(ctx context.Context, host string, port uint16) error {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if p.allowsName(host, port) {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			return &RefusedError{Host: host, Addr: host, Why: "an address with a zone is not a permitted destination"}
		}
		if err := p.Check(ip, port); err != nil {
			return &RefusedError{Host: host, Addr: host, Why: strings.TrimPrefix(err.Error(), ErrRefused.Error()+": ")}
		}
		return nil
	}
	r := p.resolver
	if r == nil {
		r = net.DefaultResolver
	}
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	addrs, err := r.LookupNetIP(rctx, "ip", host)
	if err != nil {
		// Not resolvable now (it may be later): the dial-time check decides
		// the address; the port is known now.
		if !p.portAllowed(port) {
			return &RefusedError{Host: host, Addr: host, Why: p.portRefusal(port)}
		}
		return nil
	}
	for _, a := range addrs {
		if err := p.Check(a, port); err != nil {
			return &RefusedError{Host: host, Addr: a.String(), Why: strings.TrimPrefix(err.Error(), ErrRefused.Error()+": ")}
		}
	}
	return nil
}
