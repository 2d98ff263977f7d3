package runner_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/orqest/sandbox/egress"
	"github.com/orqest/sandbox/egress/egresstest"
	"github.com/orqest/sandbox/internal/pyproc"
	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/validator"
)

// egressProbe is trusted test code run after the runner program, below
// every Python layer (no import shim, no audit hook: the kernel's rule
// alone): sealed by sealPrologue, it tries the sockets of argv[2] ([label, family,
// type, port or 0 for none, "bind" or ""]) and prints {label: errno}
// (0: made and connected).
const egressProbe = sealPrologue + `import socket
out = {"layers": st["layers"], "missing": st["missing"]}
for label, fam, typ, port, how in json.loads(sys.argv[2]):
    try:
        s = socket.socket(fam, typ)
        try:
            if how == "bind":
                s.bind(("127.0.0.1", 0))
            elif port:
                s.settimeout(5)
                s.connect(("127.0.0.1", port))
                s.sendall(b"x")
        finally:
            s.close()
        out[label] = 0
    except OSError as e:
        out[label] = e.errno or -1
` + sealEpilogue

// The kernel rule of a seal with an egress proxy, the Python layers
// bypassed: a sealed process connects over TCP to the proxy's port on
// 127.0.0.1 and to no other port (Landlock), makes no UDP, Unix or raw
// socket and binds nothing (seccomp); a seal without one creates no socket
// at all.
func TestEgressKernelRule(t *testing.T) {
	needSealProbe(t)
	proxyPort, otherPort := serveLocal(t, func(net.Conn) {}), serveLocal(t, func(net.Conn) {})
	eg, err := runner.ParseEgress(fmt.Sprintf("http://127.0.0.1:%d", proxyPort))
	if err != nil {
		t.Fatal(err)
	}
	const (
		eperm  = int(unix.EPERM)
		eacces = int(unix.EACCES)
	)
	type probe struct {
		label     string
		fam, typ  int
		port      int
		how       string
		with, not int // errno with and without egress
	}
	probes := []probe{
		{"tcp proxy port", unix.AF_INET, unix.SOCK_STREAM, proxyPort, "", 0, eperm},
		{"tcp other port", unix.AF_INET, unix.SOCK_STREAM, otherPort, "", eacces, eperm},
		{"tcp socket only", unix.AF_INET, unix.SOCK_STREAM, 0, "", 0, eperm},
		{"tcp bind", unix.AF_INET, unix.SOCK_STREAM, 0, "bind", eperm, eperm},
		{"udp", unix.AF_INET, unix.SOCK_DGRAM, 0, "", eperm, eperm},
		{"unix", unix.AF_UNIX, unix.SOCK_STREAM, 0, "", eperm, eperm},
		{"raw", unix.AF_INET, unix.SOCK_RAW, 0, "", eperm, eperm},
		{"netlink", unix.AF_NETLINK, unix.SOCK_RAW, 0, "", eperm, eperm},
	}
	var calls [][]any
	for _, p := range probes {
		calls = append(calls, []any{p.label, p.fam, p.typ, p.port, p.how})
	}
	require := []string{runner.LayerNoNewPrivs, runner.LayerSeccomp, runner.LayerLandlockFS, runner.LayerLandlockNet}
	for _, withEgress := range []bool{true, false} {
		seal := runner.Seal{Require: require}
		if withEgress {
			seal.SetEgress(eg)
		} else {
			// A network namespace of its own would hide 127.0.0.1's
			// listeners: seccomp alone must refuse the socket.
			seal.Disable = []string{runner.LayerNetNamespace, runner.LayerUserNamespace}
		}
		for _, role := range []string{"full", "child"} {
			t.Run(fmt.Sprintf("egress=%v/%s", withEgress, role), func(t *testing.T) {
				got := runSealProbe(t, egressProbe, role, string(mustJSON(t, calls)), mustJSON(t, seal),
					"SKIPPING: this kernel lacks a layer the rule needs (Landlock ABI >= 4)")
				t.Logf("layers: %s; missing: %s", got["layers"], got["missing"])
				for _, p := range probes {
					var e int
					if err := json.Unmarshal(got[p.label], &e); err != nil {
						t.Fatalf("%s: %v", p.label, err)
					}
					want := p.not
					if withEgress {
						want = p.with
					}
					if e != want {
						t.Errorf("%s: errno %d (%v), want %d (%v)", p.label, e, unix.Errno(e), want, unix.Errno(want))
					}
				}
			})
		}
	}
}

// trustProbe is trusted test code, below every Python layer: ssl is
// imported before the seal, and once sealed it loads the default
// verification context (the CA bundle and directory OpenSSL reads) and
// prints how many CA certificates it got.
const trustProbe = "import ssl\n" + sealPrologue + `out = {"layers": st["layers"], "x509_ca": ssl.create_default_context().cert_store_stats()["x509_ca"]}
` + sealEpilogue

// A seal with an egress proxy may read the public TLS trust store, so
// HTTPS through the proxy verifies servers; a seal without one reads none
// of it (Landlock).
func TestEgressSealReadsTrustStore(t *testing.T) {
	needSealProbe(t)
	bundle := "/etc/ssl/certs/ca-certificates.crt"
	if _, err := os.Stat(bundle); err != nil {
		t.Skipf("SKIPPING: this machine has no CA bundle at %s (Debian package ca-certificates): %v", bundle, err)
	}
	eg, err := runner.ParseEgress("http://127.0.0.1:3128")
	if err != nil {
		t.Fatal(err)
	}
	for _, withEgress := range []bool{true, false} {
		seal := runner.Seal{Require: []string{runner.LayerNoNewPrivs, runner.LayerSeccomp, runner.LayerLandlockFS}}
		if withEgress {
			seal.SetEgress(eg)
		}
		got := runSealProbe(t, trustProbe, "child", "", mustJSON(t, seal), "SKIPPING: this kernel has no Landlock, the layer that keeps the store from a seal without egress")
		var n int
		if err := json.Unmarshal(got["x509_ca"], &n); err != nil {
			t.Fatal(err)
		}
		if withEgress && n == 0 {
			t.Errorf("with an egress proxy the sealed process loaded no CA certificate (layers %s)", got["layers"])
		}
		if !withEgress && n != 0 {
			t.Errorf("without an egress proxy the sealed process loaded %d CA certificates: it may read the trust store", n)
		}
		t.Logf("egress %v: %d CA certificates", withEgress, n)
	}
}

// ParseEgress takes the host and port of an http:// proxy URL, with its
// credentials kept in URL, and refuses what is not one.
func TestParseEgress(t *testing.T) {
	for in, want := range map[string]runner.Egress{
		"http://127.0.0.1:3128":          {URL: "http://127.0.0.1:3128", Host: "127.0.0.1", Port: 3128},
		"http://u:p@10.0.0.7:8080/":      {URL: "http://u:p@10.0.0.7:8080/", Host: "10.0.0.7", Port: 8080},
		"http://[::1]:3128":              {URL: "http://[::1]:3128", Host: "::1", Port: 3128},
		"http://proxy.svc.cluster.local": {URL: "http://proxy.svc.cluster.local", Host: "proxy.svc.cluster.local", Port: 80},
	} {
		got, err := runner.ParseEgress(in)
		if err != nil || *got != want {
			t.Errorf("%s: %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"https://127.0.0.1:3128", "socks5://127.0.0.1:1080", "http://:3128", "http://127.0.0.1:0",
		"http://127.0.0.1:99999", "http://127.0.0.1:3128/path", "127.0.0.1:3128"} {
		if got, err := runner.ParseEgress(in); err == nil {
			t.Errorf("%s: %+v, want an error", in, got)
		}
	}
	if got, err := runner.ParseEgress(""); got != nil || err != nil {
		t.Errorf(`"": %+v, %v`, got, err)
	}
	s := runner.Seal{Require: []string{runner.LayerSeccomp, runner.LayerNetNamespace}}
	s.SetEgress(&runner.Egress{URL: "http://127.0.0.1:1", Host: "127.0.0.1", Port: 1})
	if s.Egress == nil || len(s.Require) != 1 || s.Require[0] != runner.LayerSeccomp {
		t.Errorf("SetEgress: %+v", s)
	}
}

// egressEscapes tries what would take urllib.request past the proxy:
// an opener or handler of the code's own, a Request's own proxy, another
// scheme.
const egressEscapes = `import urllib.request
import urllib.error
out = {}
for name in ("build_opener", "install_opener", "ProxyHandler", "FileHandler"):
    try:
        if name == "build_opener":
            from urllib.request import build_opener
        elif name == "install_opener":
            from urllib.request import install_opener
        elif name == "ProxyHandler":
            from urllib.request import ProxyHandler
        else:
            from urllib.request import FileHandler
        out[name] = "imported"
    except ImportError as e:
        out[name] = "%s" % e
try:
    out["opener attribute"] = "%s" % urllib.request.OpenerDirector
except AttributeError as e:
    out["opener attribute"] = "%s" % e
r = urllib.request.Request(args["url"])
r.set_proxy("192.0.2.1:9", "http")
with urllib.request.urlopen(r, timeout=10) as resp:
    out["set_proxy"] = "%d %s" % (resp.status, resp.read().decode())
for name, url in (("ftp", "ftp://example.com/x"), ("data", "data:,hello")):
    try:
        urllib.request.urlopen(url)
        out[name] = "opened"
    except urllib.error.URLError as e:
        out[name] = "%s" % e.reason
return out`

// mustMap decodes a JSON object.
func mustMap(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// startProxy serves a real egress proxy (package egress) on 127.0.0.1
// under policy name with allow, lookup standing for DNS; returns its URL.
func startProxy(t *testing.T, name string, allow []string, lookup egress.LookupFunc) string {
	t.Helper()
	pol, err := egress.ParsePolicy(name, allow, nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := egress.New(egress.Options{Policy: pol, Lookup: lookup})
	go func() { _ = p.Serve(l) }()
	t.Cleanup(func() { p.Close() })
	return "http://" + l.Addr().String()
}

// User code in a sealed runner (every Python layer and the kernel's)
// reaches the allowed server through the egress proxy with urllib.request
// and gets each refusal as an error naming the policy; file:// is refused;
// with socket allowed, a connection past the proxy fails at the kernel.
func TestEgressUserCodeSpawn(t *testing.T) {
	addr := egresstest.HostAddr(t)
	allowed := egresstest.Serve(t, addr, "allowed", false)
	forbidden := egresstest.Serve(t, addr, "forbidden", false)
	tlsPort := egresstest.Serve(t, addr, "allowed-tls", true)
	const policy = `sandbox "runner-egress" network {}`
	eg, err := runner.ParseEgress(startProxy(t, policy, egresstest.UserAllow, egresstest.Lookup(addr)))
	if err != nil {
		t.Fatal(err)
	}
	stdlib, err := exec.Command(python, "-I", "-S", "-c", "import os; print(os.path.dirname(os.__file__))").Output()
	if err != nil {
		t.Fatal(err)
	}
	// the shared libraries of ssl and the other extension modules
	read := pyproc.LibraryPaths([]string{strings.TrimSpace(string(stdlib))})
	run := func(t *testing.T, code string, args map[string]any, imports ...string) runner.Response {
		t.Helper()
		seal := &runner.Seal{ReadPaths: read, Require: []string{runner.LayerNoNewPrivs, runner.LayerSeccomp}}
		seal.SetEgress(eg)
		data, err := runner.Request{Code: code, Args: mustJSON(t, args), AllowedImports: imports, Seal: seal, Rules: validator.RulesJSON()}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		resp, _, stderr := runRawCore(t, data, testCore(t))
		if !resp.Success {
			t.Fatalf("%s: %s (stderr %s)", resp.ErrorKind, resp.Error, stderr)
		}
		return resp
	}
	hooks(t, func(t *testing.T, hook string) {
		cases := egresstest.UserCases(addr, allowed, forbidden, tlsPort)
		resp := run(t, egresstest.UserBody, egresstest.UserArgs(cases, allowed), "urllib", "urllib.request", "urllib.error", "json")
		egresstest.CheckUser(t, resp.Output, cases, policy)

		// The view hands out no opener, handler or proxy of the code's
		// choosing, and a Request's own proxy is not used: the copy
		// urlopen sends goes through the session's proxy.
		resp = run(t, egressEscapes, mustMap(t, fmt.Sprintf(`{"url": "http://allowed.test:%d/"}`, allowed)), "urllib", "urllib.request", "urllib.error")
		var got map[string]string
		if err := json.Unmarshal(resp.Output, &got); err != nil {
			t.Fatal(err)
		}
		for k, want := range map[string]string{
			"build_opener":   "the sandbox's urllib.request offers HTTPError, Request, URLError, urlopen",
			"install_opener": "offers", "ProxyHandler": "offers", "FileHandler": "offers",
			"opener attribute": "no attribute 'OpenerDirector'",
			"set_proxy":        "200 hello from allowed",
			"ftp":              "http:// and https:// URLs only",
			"data":             "http:// and https:// URLs only",
		} {
			if !strings.Contains(got[k], want) {
				t.Errorf("%s: %q, want %q", k, got[k], want)
			}
		}
	})

	resp := run(t, egresstest.DirectBody, map[string]any{"host": addr.String(), "port": allowed}, "socket")
	var d struct {
		Connected bool   `json:"connected"`
		Errno     int    `json:"errno"`
		Error     string `json:"error"`
	}
	if err := json.Unmarshal(resp.Output, &d); err != nil {
		t.Fatal(err)
	}
	if d.Connected || d.Errno != int(unix.EACCES) {
		t.Errorf("a connection past the proxy: %+v; want EACCES from Landlock", d)
	}
}
