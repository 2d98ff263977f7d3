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
	"slices"
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
// "hello from NAME" (a POST: {"from": NAME, "method", "body"} as JSON), closed when the test ends, and returns its port.
func Serve(t testing.TB, addr netip.Addr, name string, tlsOn bool) int {
	t.Helper()
	l, err := net.Listen("tcp", netip.AddrPortFrom(addr, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	srv := &httptest.Server{Listener: l, Config: &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<16))
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(map[string]string{"from": name, "method": r.Method, "body": string(body)})
				return
			}
			fmt.Fprintf(w, "hello from %s", name)
		}),
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
// HTTPS_PROXY), standing for what a tool of the image that uses the
// environment's proxy would do (user code's own way out is UserBody). Each argument is
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

// UserAllow is the allow list the user-code cases are written for.
var UserAllow = []string{"allowed.test", "rebind.test"}

// UserBody is what an LLM writes to call an API from a session's code:
// urlopen of each of args["urls"] (name: URL) with the response read and
// its status, code and content type; the HTTPError (status, message,
// body) or URLError (reason) of a refusal; a JSON POST of a Request to
// args["json"] read with json.load; urlopen of file:///etc/passwd. The
// result maps each name (and "json", "file") to what it got.
const UserBody = `import json
import urllib.request
import urllib.error
out = {}
for name, url in args["urls"].items():
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            out[name] = {"status": r.status, "code": r.getcode(), "body": r.read().decode(),
                         "type": r.headers.get("Content-Type")}
    except urllib.error.HTTPError as e:
        out[name] = {"status": e.code, "error": "HTTPError: %s" % e.reason, "body": e.read().decode()}
    except urllib.error.URLError as e:
        out[name] = {"error": "URLError: %s" % e.reason}
req = urllib.request.Request(args["json"], data=b'{"q": 1}', headers={"Content-Type": "application/json"}, method="POST")
with urllib.request.urlopen(req, timeout=10) as r:
    out["json"] = {"status": r.status, "body": json.dumps(json.load(r))}
try:
    urllib.request.urlopen("file:///etc/passwd")
    out["file"] = {"body": "opened"}
except urllib.error.URLError as e:
    out["file"] = {"error": "URLError: %s" % e.reason}
return out`

// UserResult is one entry of UserBody's result.
type UserResult struct {
	Status int    `json:"status"`
	Code   int    `json:"code"`
	Body   string `json:"body"`
	Error  string `json:"error"`
}

// UserCase is one URL of UserBody and what it must get: the status (0: no
// response, a URLError) and a text of its body or error.
type UserCase struct {
	Name, URL string
	Status    int
	Want      string
}

// UserCases are UserBody's URLs for the servers of Serve on addr (plain
// HTTP on allowedPort and forbiddenPort, TLS on tlsPort) under UserAllow:
// the allowed server answers; the forbidden one, a raw address, the
// metadata address and a name resolving to loopback are refused (403 with
// the policy's words), and so is a CONNECT to the forbidden name (a
// URLError: "Tunnel connection failed: 403 ...").
func UserCases(addr netip.Addr, allowedPort, forbiddenPort, tlsPort int) []UserCase {
	return []UserCase{
		{"allowed", fmt.Sprintf("http://allowed.test:%d/", allowedPort), 200, "hello from allowed"},
		{"forbidden", fmt.Sprintf("http://forbidden.test:%d/", forbiddenPort), 403, "is not in allow"},
		{"forbidden-tls", fmt.Sprintf("https://forbidden.test:%d/", tlsPort), 0, "is not in allow"},
		{"raw-ip", fmt.Sprintf("http://%s:%d/", addr, forbiddenPort), 403, "no address or CIDR entry"},
		{"metadata", "http://169.254.169.254/latest/meta-data/", 403, "no address or CIDR entry"},
		{"rebind", fmt.Sprintf("http://rebind.test:%d/", forbiddenPort), 403, "127.0.0.1, a loopback address"},
	}
}

// UserArgs are UserBody's args for cases, the JSON POST to the allowed
// server.
func UserArgs(cases []UserCase, allowedPort int) map[string]any {
	urls := map[string]string{}
	for _, c := range cases {
		urls[c.Name] = c.URL
	}
	return map[string]any{"urls": urls, "json": fmt.Sprintf("http://allowed.test:%d/api", allowedPort)}
}

// CheckUser fails t unless UserBody's output got what cases want, every
// refusal naming policy, the JSON POST echoed and file:// refused.
func CheckUser(t testing.TB, output []byte, cases []UserCase, policy string) {
	t.Helper()
	var got map[string]UserResult
	if err := json.Unmarshal(output, &got); err != nil {
		t.Fatalf("user code's output %s: %v", output, err)
	}
	for _, c := range cases {
		r := got[c.Name]
		text := r.Body + r.Error
		if r.Status != c.Status || !strings.Contains(text, c.Want) {
			t.Errorf("%s (%s): %+v; want status %d and %q", c.Name, c.URL, r, c.Status, c.Want)
		}
		if c.Status != 200 && (!strings.Contains(r.Error, policy) || !strings.Contains(r.Error, c.Want)) {
			t.Errorf("%s: the error %q does not name the policy %q and say why", c.Name, r.Error, policy)
		}
	}
	if r := got["json"]; r.Status != 200 || !strings.Contains(r.Body, `"method": "POST"`) || !strings.Contains(r.Body, `{\"q\": 1}`) {
		t.Errorf("the JSON POST: %+v", r)
	}
	if r := got["file"]; r.Body != "" || !strings.Contains(r.Error, "http:// and https:// URLs only") {
		t.Errorf("file:///etc/passwd: %+v, want refused", r)
	}
	t.Logf("user code got: %s", output)
}

// DirectBody is user code (socket allowed) that connects past the proxy to
// args["host"]:args["port"]: the kernel must refuse it. Its result is
// {"connected": bool, "errno": int, "error": str}: see CheckDirect.
const DirectBody = `import socket
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.settimeout(5)
try:
    s.connect((args["host"], args["port"]))
    return {"connected": True}
except socket.error as e:
    return {"connected": False, "errno": e.errno, "error": "%s" % e}
finally:
    s.close()`

// CountEvents counts the egress events among evs that admitted and that
// refused a connection.
func CountEvents(evs []shared.Event) (allowed, refused int) {
	for _, ev := range evs {
		switch ev.Type {
		case egress.EventAllowed:
			allowed++
		case egress.EventRefused:
			refused++
		}
	}
	return allowed, refused
}

// CheckDirect fails t unless DirectBody's output says the connection
// failed with one of errnos, and returns that errno.
func CheckDirect(t testing.TB, output []byte, errnos ...int) int {
	t.Helper()
	var d struct {
		Connected bool   `json:"connected"`
		Errno     int    `json:"errno"`
		Error     string `json:"error"`
	}
	if err := json.Unmarshal(output, &d); err != nil {
		t.Fatalf("direct connection's output %s: %v", output, err)
	}
	if d.Connected || !slices.Contains(errnos, d.Errno) {
		t.Errorf("a connection past the proxy: %+v; want one of the errnos %v from the kernel", d, errnos)
	}
	t.Logf("a connection past the proxy: %+v", d)
	return d.Errno
}

// Execute runs one call of a session with code, args and the allowed
// imports (a backend's Execute, bound to a session and user).
type Execute func(code string, args []byte, imports ...string) (shared.ExecuteResponse, error)

// InSession is the Execute of a backend's execute bound to session sid of
// user.
func InSession(execute func(context.Context, shared.ExecuteRequest) (shared.ExecuteResponse, error), sid, user string) Execute {
	return func(code string, args []byte, imports ...string) (shared.ExecuteResponse, error) {
		return execute(context.Background(), shared.ExecuteRequest{SessionID: sid, UserID: user, Code: code, Args: args, AllowedImports: imports})
	}
}

// CheckUserCode is the user-code egress test of a session backend:
// UserBody through exec against the servers of Serve on addr (plain HTTP
// on allowedPort and forbiddenPort, TLS on tlsPort, UserAllow under the
// block named policy) gets what UserCases want, with the call's own
// events (two admitted, five refused) in its response; DirectBody to the
// allowed server fails with one of errnos.
func CheckUserCode(t testing.TB, exec Execute, addr netip.Addr, allowedPort, forbiddenPort, tlsPort int, policy string, errnos ...int) {
	t.Helper()
	cases := UserCases(addr, allowedPort, forbiddenPort, tlsPort)
	args, err := json.Marshal(UserArgs(cases, allowedPort))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := exec(UserBody, args, "urllib", "urllib.request", "urllib.error", "json")
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Result.Success {
		t.Fatalf("%s: %s", resp.Result.ErrorKind, resp.Result.Error)
	}
	CheckUser(t, resp.Result.Output, cases, policy)
	// The proxy reports before the call returns: its response has them.
	if allowed, refused := CountEvents(resp.Events); allowed != 2 || refused != 5 {
		t.Errorf("%d allowed and %d refused events with the call's response, want 2 and 5: %+v", allowed, refused, resp.Events)
	}
	args, _ = json.Marshal(map[string]any{"host": addr.String(), "port": allowedPort})
	resp, err = exec(DirectBody, args, "socket")
	if err != nil || !resp.Result.Success {
		t.Fatalf("direct: %v %+v", err, resp.Result)
	}
	CheckDirect(t, resp.Result.Output, errnos...)
}
