// Package egresstest helps test the egress policy without a network: a
// resolver whose answers the test chooses, so that a host name can resolve to
// a refused address (the DNS trick the dial-time check exists for).
package egresstest

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"

	"golang.org/x/net/dns/dnsmessage"
)

// Resolver is a Go resolver whose DNS server, over an in-memory pipe, answers
// A and AAAA queries from names (name → address, no trailing dot) and NXDOMAIN
// for any other name. Queries counts the questions it answered, so a test can
// tell that resolution really went through it.
type Resolver struct {
	*net.Resolver
	queries atomic.Int32
}

// NewResolver returns a Resolver answering from names; pass its Resolver to
// egress.Policy.WithResolver.
func NewResolver(names map[string]netip.Addr) *Resolver {
	r := &Resolver{}
	r.Resolver = &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		client, server := net.Pipe()
		go r.serve(server, names)
		return client, nil
	}}
	return r
}

// Queries is the number of questions answered so far.
func (r *Resolver) Queries() int { return int(r.queries.Load()) }

// serve speaks DNS over a stream (2-byte length prefix), as the Go resolver
// does on a connection that is not a PacketConn.
func (r *Resolver) serve(c net.Conn, names map[string]netip.Addr) {
	defer c.Close()
	for {
		var l [2]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return
		}
		b := make([]byte, binary.BigEndian.Uint16(l[:]))
		if _, err := io.ReadFull(c, b); err != nil {
			return
		}
		var p dnsmessage.Parser
		h, err := p.Start(b)
		if err != nil {
			return
		}
		q, err := p.Question()
		if err != nil {
			return
		}
		r.queries.Add(1)
		resp := dnsmessage.Message{Header: dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true},
			Questions: []dnsmessage.Question{q}}
		a, known := names[strings.TrimSuffix(q.Name.String(), ".")]
		rh := dnsmessage.ResourceHeader{Name: q.Name, Type: q.Type, Class: dnsmessage.ClassINET, TTL: 60}
		switch {
		case !known:
			resp.RCode = dnsmessage.RCodeNameError
		case q.Type == dnsmessage.TypeA && a.Is4():
			resp.Answers = []dnsmessage.Resource{{Header: rh, Body: &dnsmessage.AResource{A: a.As4()}}}
		case q.Type == dnsmessage.TypeAAAA && a.Is6() && !a.Is4In6():
			resp.Answers = []dnsmessage.Resource{{Header: rh, Body: &dnsmessage.AAAAResource{AAAA: a.As16()}}}
		}
		out, err := resp.Pack()
		if err != nil {
			return
		}
		binary.BigEndian.PutUint16(l[:], uint16(len(out)))
		if _, err := c.Write(append(l[:], out...)); err != nil {
			return
		}
	}
}
