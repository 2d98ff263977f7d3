// Package egresstest has what the backends' egress tests share: an
// address of this machine standing for a host on the network, and
// servers on it.
package egresstest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/orqest/sandbox/egress"
	"github.com/orqest/sandbox/shared"
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

// Lookup stands for DNS in a backend's egress test: allowed.test and
// forbidden.test resolve to addr, rebind.test (an allowed name that
// answers with loopback) to 127.0.0.1, anything else to nothing.
func Lookup(addr netip.Addr) egress.LookupFunc {
	return func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "allowed.test", "forbidden.test":
			return []netip.Addr{addr}, nil
		case "rebind.test":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return nil, errors.New("no such host")
	}
}

// Case is one Probe argument and what it must get: an HTTP status (0: an
// error) and a text in its body or error.
type Case struct {
	Arg    string
	Status int
	Want   string
}

// Cases are the probes of a session whose policy allows allowed.test and
// rebind.test (Lookup): the allowed server over plain HTTP (allowedPort)
// and TLS (tlsPort) answers; the forbidden server (forbiddenPort), a raw
// address, the metadata address and a name resolving to loopback are
// refused.
func Cases(addr netip.Addr, allowedPort, tlsPort, forbiddenPort int) []Case {
	return []Case{
		{fmt.Sprintf("get=http://allowed.test:%d/", allowedPort), 200, "hello from allowed"},
		{fmt.Sprintf("get=https://allowed.test:%d/", tlsPort), 200, "hello from allowed-tls"},
		{fmt.Sprintf("get=http://forbidden.test:%d/", forbiddenPort), 403, fmt.Sprintf("forbidden.test:%d is not in allow", forbiddenPort)},
		{fmt.Sprintf("get=https://forbidden.test:%d/", tlsPort), 0, "is not in allow"},
		{fmt.Sprintf("get=http://%s:%d/", addr, forbiddenPort), 403, "no address or CIDR entry"},
		{"get=http://169.254.169.254/latest/meta-data/", 403, "no address or CIDR entry"},
		{fmt.Sprintf("get=http://rebind.test:%d/", forbiddenPort), 403, "127.0.0.1, a loopback address"},
	}
}

// Args are the Probe arguments of cases.
func Args(cases []Case) []string {
	args := make([]string, len(cases))
	for i, c := range cases {
		args[i] = c.Arg
	}
	return args
}

// Check checks got against cases: each gets its status and text, and
// every refusal names policy.
func Check(t testing.TB, got map[string]ProbeResult, cases []Case, policy string) {
	t.Helper()
	for _, c := range cases {
		r := got[c.Arg]
		text := r.Body + r.Error
		if r.Status != c.Status || !strings.Contains(text, c.Want) {
			t.Errorf("%s: %+v; want status %d and %q", c.Arg, r, c.Status, c.Want)
		}
		if c.Status != 200 && !strings.Contains(text, policy) {
			t.Errorf("%s: the refusal %q does not name the policy", c.Arg, text)
		}
	}
}

// Count counts a response's egress events: those of session sid and
// user allowed and refused (an allowed one must have carried bytes from
// addr), and the refusals of the proxy's authentication, which name no
// session. An event of another session is an error.
func Count(t testing.TB, evs []shared.Event, sid, user string, addr netip.Addr) (allowed, refused, unauthenticated int) {
	t.Helper()
	for _, ev := range evs {
		var e egress.Event
		if err := json.Unmarshal(ev.Payload, &e); err != nil {
			t.Fatal(err)
		}
		if ev.Type == egress.EventRefused && strings.HasPrefix(e.Reason, egress.AuthRefusal) {
			unauthenticated++
			continue
		}
		if e.Session != sid || e.User != user {
			t.Errorf("event %s of session %q user %q, want %q %q", ev.Type, e.Session, e.User, sid, user)
		}
		switch ev.Type {
		case egress.EventAllowed:
			allowed++
			if e.BytesReceived == 0 || e.Addr != addr.String() {
				t.Errorf("allowed event: %+v", e)
			}
		case egress.EventRefused:
			refused++
		}
	}
	return allowed, refused, unauthenticated
}
