package smtptest

import (
	"fmt"
	"net"
	"sync/atomic"
	"testing"
)

// BannerService starts a TCP service on 127.0.0.1 that is not an SMTP server (an
// internal FTP server, say): it greets every connection with banner and answers
// every read with reply ("" for silence). It returns its port and the count of
// connections it accepted, so an egress test can check that Herald never dialled
// it; it is closed when the test ends.
func BannerService(t testing.TB, banner, reply string) (port int, accepted *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted = &atomic.Int32{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer c.Close()
				fmt.Fprint(c, banner)
				buf := make([]byte, 1024)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
					if reply != "" {
						fmt.Fprint(c, reply)
					}
				}
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, accepted
}
