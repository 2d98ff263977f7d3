package runner_test

import (
	"encoding/json"
	"fmt"
	"net"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/orqest/sandbox/runner"
)

// serveLocal serves TCP on 127.0.0.1 until the test ends, handle taking
// each connection (closed after it); returns the port.
func serveLocal(t *testing.T, handle func(net.Conn)) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			handle(c)
			c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// egressTFOProbe is trusted test code run after the runner program, below
// every Python layer: sealed by sealPrologue with an egress proxy, it
// opens TCP connections without connect(2), by TCP Fast Open: sendto and
// sendmsg with MSG_FASTOPEN and a destination (argv[2]: [label, port,
// "sendto" or "sendmsg"]) on a blocking socket, and prints {label: errno} (0: data reached the
// listener, which answers "got").
const egressTFOProbe = sealPrologue + `import socket
out = {"layers": st["layers"]}
for label, port, how in json.loads(sys.argv[2]):
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            if how == "sendto":
                s.sendto(b"x", socket.MSG_FASTOPEN, ("127.0.0.1", port))
            else:
                s.sendmsg([b"x"], [], socket.MSG_FASTOPEN, ("127.0.0.1", port))
            out[label] = 0 if s.recv(3) == b"got" else -2
        finally:
            s.close()
    except OSError as e:
        out[label] = e.errno or -1
` + sealEpilogue

// TCP Fast Open is a connect by sendto or sendmsg: a sealed process with
// an egress proxy reaches the proxy's port that way and no other port
// (the Python layers bypassed: the kernel's rule alone).
func TestEgressKernelRuleFastOpen(t *testing.T) {
	needSealProbe(t)
	answer := func(c net.Conn) {
		b := make([]byte, 1)
		if n, _ := c.Read(b); n == 1 {
			_, _ = c.Write([]byte("got"))
		}
	}
	proxyPort, otherPort := serveLocal(t, answer), serveLocal(t, answer)
	eg, err := runner.ParseEgress(fmt.Sprintf("http://127.0.0.1:%d", proxyPort))
	if err != nil {
		t.Fatal(err)
	}
	seal := runner.Seal{Require: []string{runner.LayerNoNewPrivs, runner.LayerSeccomp, runner.LayerLandlockFS, runner.LayerLandlockNet}}
	seal.SetEgress(eg)
	calls := [][]any{
		{"sendto proxy", proxyPort, "sendto"},
		{"sendto other", otherPort, "sendto"},
		{"sendmsg other", otherPort, "sendmsg"},
	}
	for _, role := range []string{"full", "child"} {
		t.Run(role, func(t *testing.T) {
			got := runSealProbe(t, egressTFOProbe, role, string(mustJSON(t, calls)), mustJSON(t, seal),
				"SKIPPING: this kernel lacks a layer the rule needs (Landlock ABI >= 4)")
			t.Logf("layers: %s", got["layers"])
			for label, ok := range map[string]bool{"sendto proxy": true, "sendto other": false, "sendmsg other": false} {
				var e int
				if err := json.Unmarshal(got[label], &e); err != nil {
					t.Fatalf("%s: %v", label, err)
				}
				if ok && e != 0 {
					t.Errorf("%s: errno %d, want a connection", label, e)
				}
				if !ok && e == 0 {
					t.Errorf("%s: connected past Landlock's port rule by TCP Fast Open", label)
				}
				t.Logf("%s: errno %d", label, e)
			}
		})
	}
}

// A seal without an egress proxy still makes the sandbox a network
// namespace of its own (required, and reported in force); only a seal
// with one stays in the session's, and says why.
func TestEgressNetNamespaceOnlyWithout(t *testing.T) {
	needSealProbe(t)
	eg, err := runner.ParseEgress("http://127.0.0.1:3128")
	if err != nil {
		t.Fatal(err)
	}
	for _, withEgress := range []bool{false, true} {
		t.Run(fmt.Sprintf("egress=%v", withEgress), func(t *testing.T) {
			seal := runner.Seal{Require: []string{runner.LayerSeccomp, runner.LayerUserNamespace, runner.LayerNetNamespace}}
			if withEgress {
				seal.SetEgress(eg)
			}
			got := runSealProbe(t, egressProbe, "child", "[]", mustJSON(t, seal),
				"SKIPPING: no user or network namespace here")
			var layers []string
			var missing map[string]string
			if err := json.Unmarshal(got["layers"], &layers); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(got["missing"], &missing); err != nil {
				t.Fatal(err)
			}
			has := false
			for _, l := range layers {
				has = has || l == runner.LayerNetNamespace
			}
			if has == withEgress {
				t.Errorf("network_namespace in force: %v with egress=%v (layers %v, missing %v)", has, withEgress, layers, missing)
			}
			if withEgress && missing[runner.LayerNetNamespace] == "" {
				t.Errorf("egress: network_namespace missing without a reason: %v", missing)
			}
		})
	}
}

// egressSockoptProbe is trusted test code run after the runner program,
// below every Python layer: sealed by sealPrologue with an egress proxy,
// it sets the socket options of argv[2] ({"port": p, "calls": [label,
// level, optname, value as int or hex bytes]}) on a TCP socket connected
// to 127.0.0.1:p and prints {label: errno} (0: set).
const egressSockoptProbe = sealPrologue + `import socket
out = {"layers": st["layers"]}
arg = json.loads(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.connect(("127.0.0.1", arg["port"]))
for label, level, name, value in arg["calls"]:
    try:
        s.setsockopt(level, name, bytes.fromhex(value) if isinstance(value, str) else value)
        out[label] = 0
    except OSError as e:
        out[label] = e.errno or -1
s.close()
` + sealEpilogue

// A sealed process with an egress proxy sets the socket options a TCP
// client needs (TCP_NODELAY, as http.client does; SO_KEEPALIVE) and no
// other: no socket filter, congestion control, MD5 signature, upper-layer
// protocol (kTLS) or IP options, kernel code user code has no need of
// (the Python layers bypassed: seccomp alone).
func TestEgressKernelRuleSockopt(t *testing.T) {
	needSealProbe(t)
	port := serveLocal(t, func(net.Conn) {})
	eg, err := runner.ParseEgress(fmt.Sprintf("http://127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	seal := runner.Seal{Require: []string{runner.LayerNoNewPrivs, runner.LayerSeccomp}}
	seal.SetEgress(eg)
	const (
		solSocket, soKeepalive, soAttachFilter, soRcvbuf = 1, 9, 26, 8
		ipprotoIP, ipOptions                             = 0, 4
		ipprotoTCP, tcpNodelay, tcpCongestion, tcpMD5    = 6, 1, 13, 14
		tcpULP                                           = 31
	)
	// SO_ATTACH_FILTER's struct sock_fprog is a pointer Python cannot
	// pass: a zero one gets EFAULT where the call is allowed.
	calls := [][]any{
		{"TCP_NODELAY", ipprotoTCP, tcpNodelay, 1},
		{"SO_KEEPALIVE", solSocket, soKeepalive, 1},
		{"SO_RCVBUF", solSocket, soRcvbuf, 4096},
		{"SO_ATTACH_FILTER", solSocket, soAttachFilter, "0100000000000000" + "0000000000000000"},
		{"TCP_CONGESTION", ipprotoTCP, tcpCongestion, "72656e6f"},
		{"TCP_MD5SIG", ipprotoTCP, tcpMD5, "00"},
		{"TCP_ULP", ipprotoTCP, tcpULP, "746c73"},
		{"IP_OPTIONS", ipprotoIP, ipOptions, "01010101"},
	}
	arg := mustJSON(t, map[string]any{"port": port, "calls": calls})
	for _, role := range []string{"full", "child"} {
		t.Run(role, func(t *testing.T) {
			got := runSealProbe(t, egressSockoptProbe, role, string(arg), mustJSON(t, seal), "")
			for _, c := range calls {
				label := c[0].(string)
				var e int
				if err := json.Unmarshal(got[label], &e); err != nil {
					t.Fatalf("%s: %v", label, err)
				}
				want := int(unix.EPERM)
				if label == "TCP_NODELAY" || label == "SO_KEEPALIVE" {
					want = 0
				}
				if e != want {
					t.Errorf("%s: errno %d (%v), want %d (%v)", label, e, unix.Errno(e), want, unix.Errno(want))
				}
			}
		})
	}
}
