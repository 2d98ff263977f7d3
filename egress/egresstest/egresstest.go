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
// bridge's gateway or an interface's) outside the prefixes except: a
// server bound to it stands for a host on the network, reachable from the
// proxy in the plugin but not from a session's own network namespace (nor
// from a pod whose network is one of except). Without one the test skips,
// loudly.
func HostAddr(t testing.TB, except ...netip.Prefix) netip.Addr {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
next:
	for _, a := range addrs {
		p, err := netip.ParsePrefix(a.String())
		if err != nil || !p.Addr().Is4() || p.Addr().IsLoopback() || p.Addr().IsLinkLocalUnicast() {
			continue
		}
		for _, e := range except {
			if e.Contains(p.Addr()) {
				continue next
			}
		}
		return p.Addr()
	}
	t.Skipf("SKIPPING: this machine has no non-loopback IPv4 address outside %v to stand for a remote host", except)
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

// Probe is Python that a backend's egress test runs inside a session (as
// the user code's uid, with the session's environment: HTTP_PROXY and
// HTTPS_PROXY): user code cannot open sockets itself (the validator, the
// runner's audit hook and seccomp refuse it), so the probe stands for what
// a socket-using tool of the image would do. Each argument is
// "get=URL" (urllib through the environment's proxy) or "direct=HOST:PORT"
// (a TCP connection that skips it); it prints a JSON object of
// ProbeResult by argument.
const Probe = `import json, socket, ssl, sys, urllib.request, urllib.error
def get(url):
    try:
        ctx = ssl._create_unverified_context()
        with urllib.request.urlopen(url, timeout=10, context=ctx) as r:
            return {"status": r.status, "body": r.read().decode()}
    except urllib.error.HTTPError as e:
        return {"status": e.code, "body": e.read().decode()}
    except Exception as e:
        return {"error": str(e)}
def direct(host, port):
    try:
        socket.create_connection((host, port), timeout=5).close()
        return {"connected": True}
    except OSError as e:
        return {"errno": e.errno, "error": str(e)}
out = {}
for arg in sys.argv[1:]:
    kind, _, target = arg.partition("=")
    if kind == "direct":
        h, _, p = target.rpartition(":")
        out[arg] = direct(h, int(p))
    else:
        out[arg] = get(target)
print(json.dumps(out))
`

// ProbeResult is what Probe reports of one argument.
type ProbeResult struct {
	Status    int    `json:"status"`
	Body      string `json:"body"`
	Error     string `json:"error"`
	Errno     int    `json:"errno"`
	Connected bool   `json:"connected"`
}
