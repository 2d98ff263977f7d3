package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/orqest/sandbox/egress"
	"github.com/orqest/sandbox/egress/egresstest"
	"github.com/orqest/sandbox/shared"
)

// egressBackend is a backend configured with a network block; lookup
// stands for DNS.
func egressBackend(t *testing.T, pol *shared.EgressPolicy, lookup egress.LookupFunc) *Backend {
	t.Helper()
	return configuredBackendWith(t, map[string]any{"image": testImage()}, shared.ConfigureRequest{Egress: pol}, func(b *Backend) { b.egressLookup = lookup })
}

// TestEgressDocker: a session of a sandbox with a network block reaches
// the allowed server, over plain HTTP and over TLS through CONNECT, and
// nothing else: the forbidden server, a raw address, the metadata
// address and a name resolving to 127.0.0.1 are refused with a 403 that
// names the policy; a connection that skips the proxy fails at the
// kernel (ENETUNREACH: the container is on network none). Every attempt
// is an event of the next response; Close leaves no forwarder, socket or
// directory behind.
func TestEgressDocker(t *testing.T) {
	addr := egresstest.HostAddr(t)
	allowedPort := egresstest.Serve(t, addr, "allowed", false)
	tlsPort := egresstest.Serve(t, addr, "allowed-tls", true)
	forbiddenPort := egresstest.Serve(t, addr, "forbidden", false)
	pol := &shared.EgressPolicy{Name: `sandbox "egress-test" network {}`, Allow: []string{"allowed.test", "rebind.test"}, BudgetBytes: 1 << 20}
	b := egressBackend(t, pol, egresstest.Lookup(addr))
	info, err := b.Info(context.Background(), shared.InfoRequest{})
	if err != nil || !info.Has(shared.CapEgress) {
		t.Fatalf("Info: %v, egress capability %v", err, info.Has(shared.CapEgress))
	}
	user := testUser(t)
	sid := openSession(t, b, user)
	ctr := containerOf(t, b, sid)
	a, err := b.Agent(sid)
	if err != nil {
		t.Fatal(err)
	}
	side := a.(*agent).egress
	if side == nil || side.forwarder == "" {
		t.Fatal("the session has no egress forwarder")
	}

	cases := egresstest.Cases(addr, allowedPort, tlsPort, forbiddenPort)
	args := append([]string{"python3", "-I", "-c", egresstest.Probe}, egresstest.Args(cases)...)
	direct := fmt.Sprintf("direct=%s:%d", addr, allowedPort)
	args = append(args, direct)
	stdout, stderr, code := execIn(t, ctr, "65534:65534", args...)
	if code != 0 {
		t.Fatalf("probe exit %d: %s", code, stderr)
	}
	var got map[string]egresstest.ProbeResult
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("probe output %q: %v", stdout, err)
	}
	egresstest.Check(t, got, cases, pol.Name)
	if r := got[direct]; r.Connected || r.Errno != 101 { // ENETUNREACH
		t.Errorf("a direct connection: %+v; want ENETUNREACH (101) from the kernel", r)
	}
	t.Logf("probe: %s", stdout)

	// The attempts reach the host with the next response.
	resp, err := b.Execute(context.Background(), shared.ExecuteRequest{SessionID: sid, UserID: user, Code: "return 1"})
	if err != nil {
		t.Fatal(err)
	}
	allowed, refused, unauthenticated := egresstest.Count(t, resp.Events, sid, user, addr)
	if unauthenticated != 0 {
		t.Errorf("%d proxy authentication refusals on docker, which has none", unauthenticated)
	}
	if allowed != 2 || refused != 5 {
		t.Errorf("%d allowed and %d refused events, want 2 and 5: %+v", allowed, refused, resp.Events)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := b.Close(ctx, shared.CloseRequest{SessionID: sid}); err != nil {
		t.Fatal(err)
	}
	dc := requireDocker(t)
	if _, err := dc.ContainerInspect(ctx, side.forwarder, client.ContainerInspectOptions{}); err == nil {
		t.Errorf("the forwarder %s outlived its session", shortID(side.forwarder))
	}
	if _, err := os.Stat(side.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket directory %s outlived its session: %v", side.Dir, err)
	}
}

// TestEgressWarmPool: a warm container (pool {}) gets its forwarder when
// it is started ahead of demand; once bound to a session its proxy works
// and its events name that session; nothing is left after Shutdown.
func TestEgressWarmPool(t *testing.T) {
	addr := egresstest.HostAddr(t)
	port := egresstest.Serve(t, addr, "allowed", false)
	pol := &shared.EgressPolicy{Name: `sandbox "pool" network {}`, Allow: []string{"allowed.test"}}
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		if host == "allowed.test" {
			return []netip.Addr{addr}, nil
		}
		return nil, errors.New("no such host")
	}
	b := configuredBackendWith(t, map[string]any{"image": testImage(), "pool": map[string]any{"size": 1}}, shared.ConfigureRequest{Egress: pol},
		func(b *Backend) { b.egressLookup = lookup })
	user := testUser(t)
	s1 := openSession(t, b, user)
	waitFor(t, "a warm container", 60*time.Second, func() bool { return b.Warm(user) })
	s2 := openSession(t, b, user)
	a, err := b.Agent(s2)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(a.(*agent).label, "warm-") || a.(*agent).egress == nil || a.(*agent).egress.forwarder == "" {
		t.Fatalf("session %s is not a warm container with a forwarder: label %q", s2, a.(*agent).label)
	}
	url := fmt.Sprintf("get=http://allowed.test:%d/", port)
	stdout, stderr, code := execIn(t, containerOf(t, b, s2), "65534:65534", "python3", "-I", "-c", egresstest.Probe, url)
	if code != 0 || !strings.Contains(stdout, "hello from allowed") {
		t.Fatalf("probe from the warm session: exit %d %s %s", code, stdout, stderr)
	}
	resp, err := b.Execute(context.Background(), shared.ExecuteRequest{SessionID: s2, UserID: user, Code: "return 1"})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range resp.Events {
		var e egress.Event
		if json.Unmarshal(ev.Payload, &e) == nil && ev.Type == egress.EventAllowed {
			n++
			if e.Session != s2 || e.User != user {
				t.Errorf("event of session %q user %q, want %q %q", e.Session, e.User, s2, user)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d allowed events, want 1: %+v", n, resp.Events)
	}
	// Shutdown removes the sessions (s1, s2), the new warm container and
	// every forwarder; testUser's cleanup fails the test on any left.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b.Shutdown(ctx)
	if _, err := b.Agent(s1); err == nil {
		t.Errorf("session %s survived Shutdown", s1)
	}
}

// TestEgressUserCodeDocker: the session's own code (Execute, sealed as
// every call is) reaches the allowed server with urllib.request through
// the egress proxy and gets each refusal as an error naming the policy;
// file:// is refused; with socket allowed, a connection that skips the
// proxy fails at the kernel. The call's own egress events come with its
// response.
func TestEgressUserCodeDocker(t *testing.T) {
	addr := egresstest.HostAddr(t)
	allowed := egresstest.Serve(t, addr, "allowed", false)
	forbidden := egresstest.Serve(t, addr, "forbidden", false)
	tlsPort := egresstest.Serve(t, addr, "allowed-tls", true)
	pol := &shared.EgressPolicy{Name: `sandbox "egress-user" network {}`, Allow: egresstest.UserAllow, BudgetBytes: 1 << 20}
	b := egressBackend(t, pol, egresstest.Lookup(addr))
	user := testUser(t)
	sid := openSession(t, b, user)
	exec := egresstest.InSession(b.Execute, sid, user)
	// EACCES: Landlock (connect to the proxy's port only); ENETUNREACH
	// where Landlock has no net rule (network none has no route).
	egresstest.CheckUserCode(t, exec, addr, allowed, forbidden, tlsPort, pol.Name, 13, 101)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := b.Close(ctx, shared.CloseRequest{SessionID: sid}); err != nil {
		t.Fatal(err)
	}
}

// TestEgressUserCodeStateful: a stateful interpreter (whose audit hook,
// armed by its first call, stays) fetches through the proxy on every
// call, and keeps what it fetched.
func TestEgressUserCodeStateful(t *testing.T) {
	addr := egresstest.HostAddr(t)
	allowed := egresstest.Serve(t, addr, "allowed", false)
	pol := &shared.EgressPolicy{Name: `sandbox "egress-stateful" network {}`, Allow: egresstest.UserAllow}
	b := egressBackend(t, pol, egresstest.Lookup(addr))
	user := testUser(t)
	sid := openSession(t, b, user)
	imports := []string{"urllib", "urllib.request", "urllib.error"}
	url := fmt.Sprintf("http://allowed.test:%d/", allowed)
	for i, code := range []string{
		"import urllib.request\nseen = [urllib.request.urlopen(" + strconv.Quote(url) + ", timeout=10).read().decode()]",
		"import urllib.request\nseen.append(urllib.request.urlopen(" + strconv.Quote(url) + ", timeout=10).read().decode())\nreturn seen",
	} {
		res := execOK(t, b, shared.ExecuteRequest{SessionID: sid, UserID: user, AgentID: "a", Code: code, Stateful: true, AllowedImports: imports})
		if !res.Success || res.StateLost {
			t.Fatalf("call %d: %+v", i+1, res)
		}
		if i == 1 && string(res.Output) != `["hello from allowed","hello from allowed"]` {
			t.Errorf("call 2: %s", res.Output)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := b.Close(ctx, shared.CloseRequest{SessionID: sid}); err != nil {
		t.Fatal(err)
	}
}
