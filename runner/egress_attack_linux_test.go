package runner_test

import (
	"encoding/json"
	"fmt"
	"net"
	"testing"

	"github.com/orqest/sandbox/runner"
)

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
	listen := func() int {
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
				b := make([]byte, 1)
				if n, _ := c.Read(b); n == 1 {
					_, _ = c.Write([]byte("got"))
				}
				c.Close()
			}
		}()
		return l.Addr().(*net.TCPAddr).Port
	}
	proxyPort, otherPort := listen(), listen()
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
