// Package egresstest has what the backends' egress tests share: an
// address of this machine standing for a host on the network, and
// servers on it.
package egresstest

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

// HostAddr is a non-loopback IPv4 address of this machine (the docker
// bridge's gateway or an interface's): a server bound to it stands for a
// host on the network, reachable from the proxy in the plugin but not
// from a session's own network namespace. Without one the test skips,
// loudly.
func HostAddr(t testing.TB) netip.Addr {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() && !p.Addr().IsLoopback() && !p.Addr().IsLinkLocalUnicast() {
			return p.Addr()
		}
	}
	t.Skip("SKIPPING: this machine has no non-loopback IPv4 address to stand for a remote host")
	return netip.Addr{}
}

// Serve starts an HTTP server (HTTPS with tlsOn) on addr:0 that answers
// "hello from NAME", closed when the test ends, and returns its port.
func Serve(t testing.TB, addr netip.Addr, name string, tlsOn bool) int {
	t.Helper()
	l, err := net.Listen("tcp", netip.AddrPortFrom(addr, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	srv := &httptest.Server{Listener: l, Config: &http.Server{
		Handler:  http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "hello from %s", name) }),
		ErrorLog: log.New(io.Discard, "", 0), // refused handshakes are the point of some tests
	}}
	if tlsOn {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return l.Addr().(*net.TCPAddr).Port
}
