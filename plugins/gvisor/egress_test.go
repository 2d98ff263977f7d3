package gvisor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orqest/sandbox/egress"
	"github.com/orqest/sandbox/egress/egresstest"
	"github.com/orqest/sandbox/shared"
)

// probe runs in the session's sandbox (runsc exec, uid 65534, with the
// runtime's environment: HTTP_PROXY and HTTPS_PROXY): user code cannot
// open sockets itself (the validator, the runner's audit hook), so the
// probe stands for what a socket-using tool would do.
const probe = `import json, os, socket, sys, urllib.request, urllib.error
def get(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return {"status": r.status, "body": r.read().decode()}
    except urllib.error.HTTPError as e:
        return {"status": e.code, "body": e.read().decode()}
    except Exception as e:
        return {"error": str(e)}
out = {"proxy": os.environ.get("HTTP_PROXY", "")}
for arg in sys.argv[1:]:
    kind, _, target = arg.partition("=")
    if kind == "direct":
        h, _, p = target.rpartition(":")
        try:
            socket.create_connection((h, int(p)), timeout=5).close()
            out[arg] = {"connected": True}
        except OSError as e:
            out[arg] = {"errno": e.errno, "error": str(e)}
    else:
        out[arg] = get(target)
print(json.dumps(out))
`

// TestEgressSession: a gVisor session of a sandbox with a network block
// reaches the allowed server through the forwarder in its sandbox and the
// proxy in the plugin, and nothing else: the forbidden server, a raw
// address, the metadata address and an allowed name resolving to
// 127.0.0.1 get a 403 naming the policy, and a connection that skips the
// proxy fails in the Sentry's network stack (no route: --network=none).
// The backend does not declare pause with egress rules; the attempts are
// events of the next response; Close leaves no sandbox, socket or
// directory.
func TestEgressSession(t *testing.T) {
	addr := egresstest.HostAddr(t)
	allowedPort := egresstest.Serve(t, addr, "allowed", false)
	forbiddenPort := egresstest.Serve(t, addr, "forbidden", false)
	pol := &shared.EgressPolicy{Name: `sandbox "g" network {}`, Allow: []string{"allowed.test", "rebind.test"}}
	b, _ := newSessionBackendWith(t, nil, shared.ConfigureRequest{Classes: true, Egress: pol}, func(b *Backend) { b.egressLookup = egresstest.Lookup(addr) })
	info, err := b.Info(context.Background(), shared.InfoRequest{})
	if err != nil || !info.Has(shared.CapEgress) || info.Has(shared.CapPause) {
		t.Fatalf("Info: %v; egress %v (want true), pause %v (want false)", err, info.Has(shared.CapEgress), info.Has(shared.CapPause))
	}
	sid := openSession(t, b, "alice")
	a, err := b.Agent(sid)
	if err != nil {
		t.Fatal(err)
	}
	ag := a.(*agent)
	if ag.egress == nil || ag.egress.forwarder == nil {
		t.Fatal("the session has no egress forwarder")
	}
	dir := ag.egress.Dir

	cases := []struct {
		arg    string
		status int
		want   string
	}{
		{fmt.Sprintf("get=http://allowed.test:%d/", allowedPort), 200, "hello from allowed"},
		{fmt.Sprintf("get=http://forbidden.test:%d/", forbiddenPort), 403, "is not in allow"},
		{fmt.Sprintf("get=http://%s:%d/", addr, forbiddenPort), 403, "no address or CIDR entry"},
		{"get=http://169.254.169.254/latest/meta-data/", 403, "no address or CIDR entry"},
		{fmt.Sprintf("get=http://rebind.test:%d/", forbiddenPort), 403, "127.0.0.1, a loopback address"},
	}
	b.mu.RLock()
	g := b.globals(b.runsc, b.cfg, b.state)
	b.mu.RUnlock()
	args := append(slices.Clone(g[1:]), "exec", "--user", "65534:65534")
	for _, e := range egress.ProxyEnv(egress.ProxyURL) {
		args = append(args, "--env", e)
	}
	args = append(args, ag.container, DefaultPython, "-I", "-c", probe)
	for _, c := range cases {
		args = append(args, c.arg)
	}
	direct := fmt.Sprintf("direct=%s:%d", addr, allowedPort)
	args = append(args, direct)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, g[0], args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("probe: %v: %s", err, stderr.String())
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("probe output %q: %v", stdout.String(), err)
	}
	t.Logf("probe: %s", stdout.String())
	for _, c := range cases {
		var r struct {
			Status int
			Body   string
			Error  string
		}
		_ = json.Unmarshal(got[c.arg], &r)
		if r.Status != c.status || !strings.Contains(r.Body+r.Error, c.want) || (c.status != 200 && !strings.Contains(r.Body, pol.Name)) {
			t.Errorf("%s: %+v; want status %d, %q and the policy's name", c.arg, r, c.status, c.want)
		}
	}
	var d struct {
		Connected bool
		Errno     int
	}
	_ = json.Unmarshal(got[direct], &d)
	// The Sentry's network stack answers EHOSTUNREACH where Linux says
	// ENETUNREACH: either way, no route.
	if d.Connected || (d.Errno != 101 && d.Errno != 113) {
		t.Errorf("a direct connection: %s; want ENETUNREACH (101) or EHOSTUNREACH (113)", got[direct])
	}
	// The runtime's own environment points at the proxy.
	spec, err := os.ReadFile(ag.dir + "/bundle/config.json")
	if err != nil || !strings.Contains(string(spec), "HTTPS_PROXY="+egress.ProxyURL) || !strings.Contains(string(spec), egressSocketDir) {
		t.Errorf("the session's spec lacks the proxy environment or the socket mount: %v", err)
	}

	resp, err := b.Execute(ctx, shared.ExecuteRequest{SessionID: sid, UserID: "alice", Code: "return 1"})
	if err != nil {
		t.Fatal(err)
	}
	var allowed, refused int
	for _, ev := range resp.Events {
		var e egress.Event
		if json.Unmarshal(ev.Payload, &e) != nil || e.Session != sid || e.User != "alice" {
			t.Errorf("event %s: %s", ev.Type, ev.Payload)
		}
		switch ev.Type {
		case egress.EventAllowed:
			allowed++
		case egress.EventRefused:
			refused++
		}
	}
	if allowed != 1 || refused != 4 {
		t.Errorf("%d allowed, %d refused events; want 1 and 4: %+v", allowed, refused, resp.Events)
	}
	if _, err := b.Close(ctx, shared.CloseRequest{SessionID: sid}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket directory %s outlived the session: %v", dir, err)
	}
}

// TestEgressUserCodeSession: a gVisor session's own code (Execute, sealed
// as every call is) reaches the allowed server with urllib.request
// through the forwarder and the proxy, and gets each refusal as an error
// naming the policy; file:// is refused; with socket allowed, a
// connection that skips the proxy fails in the Sentry (no route: the
// Sentry has no Landlock, so no port rule). The call's own egress events
// come with its response.
func TestEgressUserCodeSession(t *testing.T) {
	addr := egresstest.HostAddr(t)
	allowed := egresstest.Serve(t, addr, "allowed", false)
	forbidden := egresstest.Serve(t, addr, "forbidden", false)
	tlsPort := egresstest.Serve(t, addr, "allowed-tls", true)
	pol := &shared.EgressPolicy{Name: `sandbox "g-user" network {}`, Allow: egresstest.UserAllow}
	b, _ := newSessionBackendWith(t, nil, shared.ConfigureRequest{Egress: pol}, func(b *Backend) { b.egressLookup = egresstest.Lookup(addr) })
	sid := openSession(t, b, "alice")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	exec := func(code string, args []byte, imports ...string) (shared.ExecuteResponse, error) {
		return b.Execute(ctx, shared.ExecuteRequest{SessionID: sid, UserID: "alice", Code: code, Args: args, AllowedImports: imports})
	}
	// no route in the Sentry (no Landlock there: no port rule)
	egresstest.CheckUserCode(t, exec, addr, allowed, forbidden, tlsPort, pol.Name, 101, 113)
	if _, err := b.Close(ctx, shared.CloseRequest{SessionID: sid}); err != nil {
		t.Fatal(err)
	}
}
