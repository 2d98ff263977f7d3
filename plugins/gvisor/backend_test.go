package gvisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/orqest/sandbox/internal/forkcore"
	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
)

// needRunsc skips (loudly) when runsc is absent, unless
// ORQEST_REQUIRE_GVISOR=1 makes that a failure (CI sets it).
func needRunsc(t testing.TB) {
	t.Helper()
	if _, err := lookRunsc(""); err != nil {
		if os.Getenv("ORQEST_REQUIRE_GVISOR") == "1" {
			t.Fatalf("ORQEST_REQUIRE_GVISOR=1 but %v", err)
		}
		t.Skipf("SKIPPING the gVisor tests: %v", err)
	}
}

// testRunsc is the config block's runsc and platform the tests run
// with: ORQEST_RUNSC and ORQEST_GVISOR_PLATFORM when set (a runsc other
// than the one in $PATH, e.g. `make runsc`'s with "systrap"), else the
// plugin's defaults.
func testRunsc() map[string]any {
	cfg := map[string]any{}
	if v := os.Getenv("ORQEST_RUNSC"); v != "" {
		cfg["runsc"] = v
	}
	if v := os.Getenv("ORQEST_GVISOR_PLATFORM"); v != "" {
		cfg["platform"] = v
	}
	return cfg
}

// newBackend returns a configured backend, shut down at cleanup; after the
// shutdown no sandbox of it may be left.
func newBackend(t *testing.T, hooks testHooks) *Backend {
	t.Helper()
	needRunsc(t)
	b := NewBackend(hclog.NewNullLogger())
	b.test = hooks
	t.Cleanup(func() {
		state := b.state
		b.Shutdown()
		if _, err := os.Stat(state); !os.IsNotExist(err) {
			t.Errorf("state directory %s left after Shutdown (%v)", state, err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	raw, _ := json.Marshal(testRunsc())
	if _, err := b.Configure(ctx, shared.ConfigureRequest{Config: raw, Classes: true}); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	return b
}

func execute(t *testing.T, b *Backend, req shared.ExecuteRequest) shared.ExecutionResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := b.Execute(ctx, req)
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	return resp.Result
}

func TestRunsInGVisor(t *testing.T) {
	b := newBackend(t, testHooks{})
	res := execute(t, b, shared.ExecuteRequest{Code: "print('hi')\nreturn args['x'] * 2", Args: []byte(`{"x":21}`)})
	if !res.Success || string(res.Output) != "42" || res.Stdout != "hi\n" {
		t.Fatalf("result %+v", res)
	}
	t.Logf("layers in force inside gVisor: %v; missing: %v", b.layers.Layers, b.layers.Missing)
}

// runscProcesses lists runsc processes whose command line names dir.
func runscProcesses(t testing.TB, dir string) []string {
	out, _ := exec.Command("ps", "-eo", "pid,args").Output()
	var found []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, dir) && !strings.Contains(l, " ps ") {
			found = append(found, strings.TrimSpace(l))
		}
	}
	return found
}

// assertNoSandboxes fails when a runsc process of this test process's
// backends (their state directories are named orqest-gvisor-*) is left.
func assertNoSandboxes(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := runscProcesses(t, statePrefix+strconv.Itoa(os.Getpid())+"-")
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("runsc processes left: %v", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTimeoutKillsSandbox: a busy loop under a 1 s limit is a timeout
// result, returned near the limit, and no runsc process or container state
// of it is left.
func TestTimeoutKillsSandbox(t *testing.T) {
	b := newBackend(t, testHooks{})
	start := time.Now()
	res := execute(t, b, shared.ExecuteRequest{Code: "while True:\n    pass", Timeout: time.Second})
	if res.Success || res.ErrorKind != shared.KindTimeout {
		t.Fatalf("want a timeout, got %+v", res)
	}
	if d := time.Since(start); d > 2500*time.Millisecond {
		t.Fatalf("a 1 s timeout took %v to return", d)
	} else {
		t.Logf("a 1 s timeout returned after %v", d)
	}
	// The sandbox and its gofer are gone when Execute returns (only the
	// background `runsc delete` of its state files may still run).
	for _, p := range runscProcesses(t, b.state) {
		if !strings.Contains(p, " delete --force ") {
			t.Fatalf("runsc process left after the timeout: %s", p)
		}
	}
	b.pending.Wait()
	if left := runscProcesses(t, b.state); len(left) > 0 {
		t.Fatalf("runsc processes left: %v", left)
	}
	out, err := exec.Command(b.runsc, "--root="+filepath.Join(b.state, "runsc"), "list", "-quiet").CombinedOutput()
	if err != nil {
		t.Fatalf("runsc list: %v: %s", err, out)
	}
	if s := strings.TrimSpace(string(out)); s != "" {
		t.Fatalf("runsc list after the timeout: %q", s)
	}
	calls, _ := os.ReadDir(filepath.Join(b.state, "calls"))
	if len(calls) != 0 {
		t.Fatalf("call directories left: %v", calls)
	}
	// The backend still serves.
	if res := execute(t, b, shared.ExecuteRequest{Code: "return 7"}); string(res.Output) != "7" {
		t.Fatalf("after the timeout: %+v", res)
	}
}

// TestMemoryLimit: an allocation beyond memory_mb fails as memory, not as
// a crash of the sandbox.
func TestMemoryLimit(t *testing.T) {
	b := newBackend(t, testHooks{})
	res := execute(t, b, shared.ExecuteRequest{Code: "x = bytearray(400 * 1024 * 1024)\nreturn len(x)", MemoryMB: 128})
	if res.Success || res.ErrorKind != shared.KindMemory {
		t.Fatalf("want a memory error, got %+v", res)
	}
}

// TestKernelBoundary runs code with every Python-level layer out of the way
// (validator skipped, in-child checker accepting everything, generous
// builtins): what it sees is gVisor's kernel, not the host's, and not the
// host's files.
func TestKernelBoundary(t *testing.T) {
	hostVersion, err := os.ReadFile("/proc/version")
	if err != nil {
		t.Fatal(err)
	}
	canary := filepath.Join(t.TempDir(), "canary")
	if err := os.WriteFile(canary, []byte("host secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(canary), 0o755); err != nil {
		t.Fatal(err)
	}
	b := newBackend(t, bypassValidation())
	code := `import os
out = {"version": open("/proc/version").read()}
try:
    out["canary"] = open(` + strconv.Quote(canary) + `).read()
except OSError as e:
    out["canary_error"] = type(e).__name__
out["root"] = sorted(os.listdir("/"))
return out`
	res := execute(t, b, shared.ExecuteRequest{Code: code, AllowedImports: []string{"os"}})
	if !res.Success {
		t.Fatalf("result %+v", res)
	}
	var got struct {
		Version     string   `json:"version"`
		Canary      *string  `json:"canary"`
		CanaryError string   `json:"canary_error"`
		Root        []string `json:"root"`
	}
	if err := json.Unmarshal(res.Output, &got); err != nil {
		t.Fatalf("output %s: %v", res.Output, err)
	}
	if got.Version == "" || got.Version == string(hostVersion) {
		t.Fatalf("/proc/version inside the sandbox is the host's: %q", got.Version)
	}
	if !strings.HasPrefix(got.Version, "Linux version 4.4.0") {
		t.Fatalf("/proc/version inside the sandbox is not gVisor's (Linux version 4.4.0 ...): %q", got.Version)
	}
	if got.Canary != nil || got.CanaryError != "FileNotFoundError" {
		t.Fatalf("host file %s visible inside the sandbox: %+v", canary, got)
	}
	for _, n := range got.Root {
		if n == "home" || n == "root" || n == "work" || n == "var" {
			t.Fatalf("host directory /%s visible inside the sandbox: %v", n, got.Root)
		}
	}
	t.Logf("inside: %q; root: %v", strings.TrimSpace(got.Version), got.Root)
}

// TestMissingRunscFailsClosed: Configure with a runsc that is not there
// fails with ErrUnavailable naming runsc and how to install it.
func TestMissingRunscFailsClosed(t *testing.T) {
	b := NewBackend(hclog.NewNullLogger())
	defer b.Shutdown()
	_, err := b.Configure(context.Background(), shared.ConfigureRequest{Config: []byte(`{"runsc": "/nonexistent/runsc", "require": ["kernel_boundary"]}`)})
	if !errors.Is(err, shared.ErrUnavailable) {
		t.Fatalf("want ErrUnavailable, got %v", err)
	}
	if !strings.Contains(err.Error(), "apt-get install runsc") {
		t.Fatalf("error does not say how to install runsc: %v", err)
	}
	if _, err := b.Execute(context.Background(), shared.ExecuteRequest{Code: "return 1"}); !errors.Is(err, shared.ErrFailedPrecondition) {
		t.Fatalf("Execute on an unconfigured backend: %v", err)
	}
	info, err := b.Info(context.Background(), shared.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Tier != 3 || !slices.Contains(info.Capabilities, shared.CapKernelBoundary) {
		t.Fatalf("info %+v", info)
	}
}

// TestConfigRefusals: unknown platforms and capabilities, and bad
// attributes, are refused, naming the attribute.
func TestConfigRefusals(t *testing.T) {
	b := NewBackend(hclog.NewNullLogger())
	defer b.Shutdown()
	for c, field := range map[string]string{
		`{"platform": "xen"}`:             "platform",
		`{"require": ["teleportation"]}`:  "require",
		`{"bogus": 1}`:                    "bogus",
		`{"python": "python3"}`:           "python",
		`{"workspace_mb": -1}`:            "workspace_mb",
		`{"runtime": "orqest-runtime"}`:   "runtime",
		`{"runsc": "/nonexistent/runsc"}`: "runsc",
	} {
		_, err := b.Configure(context.Background(), shared.ConfigureRequest{Config: []byte(c)})
		if !errors.Is(err, shared.ErrInvalidArgument) {
			t.Errorf("config %s: want ErrInvalidArgument, got %v", c, err)
		}
		// A refused attribute is named (the host points at it in the policy).
		var fe *shared.FieldError
		if !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("config %s: %v, want a FieldError on %s", c, err, field)
		}
	}
}

// bypassValidation returns test hooks that take every Python-level layer
// out of the way: the Go validator is skipped, the in-child checker accepts
// everything, the runtime audit hook is not armed, the builtins are
// generous. What is left is gVisor (and the runner's kernel layers).
func bypassValidation() testHooks {
	prog := runner.Program()
	i := strings.Index(prog, "\ndef _orq_main(")
	if i < 0 {
		panic("runner layout changed: no _orq_main")
	}
	prog = prog[:i] + `
def _orq_check(code, allowed_imports, rules, classes=False):
    return []


def _orq_audit_arm(rules, allowed, workspace=None):
    return {"armed": False}


def _orq_audit_disarm():
    pass
` + prog[i:]
	return testHooks{skipValidation: true, program: prog, rules: json.RawMessage(`{"safe_builtins":["open","print","repr","str","int","len","dict","list","tuple","Exception",
	"BaseException","OSError","isinstance","type","getattr","hasattr","range","sorted","bytes","ValueError","True","False","None"]}`)}
}

// TestCapabilitiesTruthful: Info after Configure declares kernel_boundary
// and exactly the runner layers the probe found inside the Sentry; a
// require naming one it did not find (Landlock: not in the Sentry) fails
// Configure, one it did find passes.
func TestCapabilitiesTruthful(t *testing.T) {
	b := newBackend(t, testHooks{})
	info, err := b.Info(context.Background(), shared.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(info.Capabilities, shared.CapKernelBoundary) {
		t.Fatalf("kernel_boundary not declared: %v", info.Capabilities)
	}
	for _, l := range runner.Layers {
		c := runner.LayerCapability(l)
		if got, want := slices.Contains(info.Capabilities, c), slices.Contains(b.layers.Layers, l); got != want {
			t.Errorf("capability %s declared %v, but the probe found layer %s: %v", c, got, l, want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := b.Configure(ctx, shared.ConfigureRequest{Config: []byte(`{"require": ["kernel_boundary", "network_isolation"]}`)}); err != nil {
		t.Fatalf("require kernel_boundary: %v", err)
	}
	for _, l := range runner.Layers {
		c := runner.LayerCapability(l)
		if slices.Contains(b.layers.Layers, l) {
			continue
		}
		_, err := b.Configure(ctx, shared.ConfigureRequest{Config: []byte(`{"require": ["` + string(c) + `"]}`)})
		if !errors.Is(err, shared.ErrFailedPrecondition) {
			t.Errorf("require %s (layer %s not in force inside gVisor): want ErrFailedPrecondition, got %v", c, l, err)
		}
	}
}

// TestNoNetwork: with the Python layers bypassed, code cannot reach a
// listener on the host's loopback: refused by the runner's seccomp filter
// and, with the runner's seccomp, user and network namespaces switched off, by
// gVisor alone (the sandbox's loopback is the Sentry's own, with nothing
// listening).
func TestNoNetwork(t *testing.T) {
	for _, disable := range [][]string{nil, {runner.LayerSeccomp, runner.LayerUserNamespace, runner.LayerNetNamespace}} {
		t.Run(fmt.Sprintf("disable=%v", disable), func(t *testing.T) {
			hooks := bypassValidation()
			hooks.disable = disable
			testNoNetwork(t, hooks, disable == nil)
		})
	}
}

func testNoNetwork(t *testing.T, hooks testHooks, sealed bool) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
			accepted <- struct{}{}
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	b := newBackend(t, hooks)
	code := `import socket
try:
    s = socket.create_connection(("127.0.0.1", ` + strconv.Itoa(port) + `), timeout=2)
    return "connected"
except OSError as e:
    return type(e).__name__`
	res := execute(t, b, shared.ExecuteRequest{Code: code, AllowedImports: []string{"socket"}})
	if !res.Success && res.ErrorKind == "" {
		t.Fatalf("result %+v", res)
	}
	if string(res.Output) == `"connected"` {
		t.Fatalf("the sandbox reached the host's loopback")
	}
	select {
	case <-accepted:
		t.Fatal("the host listener accepted a connection from the sandbox")
	case <-time.After(100 * time.Millisecond):
	}
	if !sealed && string(res.Output) == `"PermissionError"` {
		t.Fatalf("with the runner's seccomp off, socket() should be allowed and the connect refused by the Sentry's netstack: %s", res.Output)
	}
	t.Logf("connect from inside: %s %s %s", res.Output, res.ErrorKind, res.Error)
}

// TestSweepStale: a state directory of a dead plugin process is removed,
// one of a living process (this one) and unrelated names are kept.
func TestSweepStale(t *testing.T) {
	tmp := t.TempDir()
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(tmp, fmt.Sprintf("%s%d-abc", statePrefix, cmd.Process.Pid))
	alive := filepath.Join(tmp, fmt.Sprintf("%s%d-abc", statePrefix, os.Getpid()))
	other := filepath.Join(tmp, "orqest-gvisor-notapid-abc")
	for _, d := range []string{dead, alive, other} {
		if err := os.MkdirAll(filepath.Join(d, "runsc"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	n, err := SweepStale(tmp, "")
	if err != nil || n != 1 {
		t.Fatalf("SweepStale = %d, %v; want 1", n, err)
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("dead plugin's directory kept: %v", err)
	}
	for _, d := range []string{alive, other} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s removed: %v", d, err)
		}
	}
}

// needCore skips (loudly) when no C loop is available to this test binary
// (`make test` builds it and sets forkcore.Env), unless ORQEST_REQUIRE_GVISOR=1
// makes that a failure.
func needCore(t *testing.T) {
	t.Helper()
	if data, why, err := forkcore.Load("gvisor", "", forkCoreSHA256); err != nil || data == nil {
		if os.Getenv("ORQEST_REQUIRE_GVISOR") == "1" {
			t.Fatalf("ORQEST_REQUIRE_GVISOR=1 but the C audit hook is not available: %s %v", why, err)
		}
		t.Skipf("SKIP: no C audit hook for the sandboxes (%s %v); run `make test`, which builds it and sets %s", why, err, forkcore.Env)
	}
}

// metaclassBody passes the Go validator and builds a metaclass with the
// real type(): only the runner's C class guard refuses it (the Python hook
// does not guard type.__new__).
const metaclassBody = "T = type(int)\nreturn repr(T('M', (T,), {}))"

// TestCHookInEverySandbox: one-call sandboxes, session calls (the
// runtime's one-call spawns) and a stateful session's later calls run the
// runner's audit hook in C, bound read-only from the plugin's checked
// copy; with forkcore = "none" the
// Python hook stands in and the same body passes, which shows what the
// refusal rests on.
func TestCHookInEverySandbox(t *testing.T) {
	needRunsc(t)
	needCore(t)
	refused := func(t *testing.T, res shared.ExecutionResult) {
		t.Helper()
		if res.Success || !strings.Contains(res.Error, "in the sandbox") {
			t.Fatalf("want the C class guard's refusal, got success=%v %s: %s (stderr %q)", res.Success, res.ErrorKind, res.Error, res.Stderr)
		}
	}
	t.Run("one call", func(t *testing.T) {
		b := newBackend(t, testHooks{})
		if b.cfg.core == "" {
			t.Fatal("configured without the C loop")
		}
		if fi, err := os.Stat(b.cfg.core); err != nil || fi.Mode().Perm()&0o222 != 0 {
			t.Fatalf("the placed copy %s: %v (mode %v), want read-only", b.cfg.core, err, fi.Mode())
		}
		refused(t, execute(t, b, shared.ExecuteRequest{Code: metaclassBody}))
		wantOK := execute(t, b, shared.ExecuteRequest{Code: "class A:\n    pass\nT = type(A)\nreturn T('X', (A,), {'w': 2}).w"})
		if !wantOK.Success || string(wantOK.Output) != "2" {
			t.Fatalf("benign type() call: %+v", wantOK)
		}
	})
	t.Run("session", func(t *testing.T) {
		b, _ := newSessionBackend(t, nil)
		id := openSession(t, b, "alice")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		resp, err := b.Execute(ctx, shared.ExecuteRequest{SessionID: id, UserID: "alice", Code: metaclassBody})
		if err != nil {
			t.Fatal(err)
		}
		refused(t, resp.Result)
	})
	t.Run("stateful session", func(t *testing.T) {
		b, _ := newSessionBackend(t, nil)
		id := openSession(t, b, "alice")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		call := func(code string) shared.ExecutionResult {
			t.Helper()
			resp, err := b.Execute(ctx, shared.ExecuteRequest{SessionID: id, UserID: "alice", Code: code, Stateful: true})
			if err != nil {
				t.Fatal(err)
			}
			return resp.Result
		}
		if res := call("kept = 7"); !res.Success {
			t.Fatalf("call 1: %+v", res)
		}
		// The interpreter's later calls run under the hook its first armed.
		refused(t, call(metaclassBody))
		if res := call("return kept"); !res.Success || string(res.Output) != "7" || res.StateLost {
			t.Fatalf("after the refusal: %+v", res)
		}
	})
	t.Run("forkcore none", func(t *testing.T) {
		needRunsc(t)
		b := NewBackend(hclog.NewNullLogger())
		t.Cleanup(b.Shutdown)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := b.Configure(ctx, shared.ConfigureRequest{Config: json.RawMessage(`{"forkcore":"none","sessions":false}`)}); err != nil {
			t.Fatal(err)
		}
		res := execute(t, b, shared.ExecuteRequest{Code: metaclassBody})
		if !res.Success {
			t.Fatalf("with the Python hook the body was refused too (%s: %s): the test no longer shows the C guard's part", res.ErrorKind, res.Error)
		}
	})
}

// A forkcore whose bytes are not those the plugin was built with is
// refused at Configure, naming both hashes.
func TestForkCoreChecked(t *testing.T) {
	needRunsc(t)
	fake := filepath.Join(t.TempDir(), forkcore.Name)
	if err := os.WriteFile(fake, []byte("\x7fELF not the real thing"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := forkCoreSHA256
	t.Cleanup(func() { forkCoreSHA256 = old })
	forkCoreSHA256 = strings.Repeat("ab", 32)
	b := NewBackend(hclog.NewNullLogger())
	t.Cleanup(b.Shutdown)
	_, err := b.Configure(context.Background(), shared.ConfigureRequest{Config: json.RawMessage(`{"forkcore":"` + fake + `","sessions":false}`)})
	var fe *shared.FieldError
	if !errors.Is(err, shared.ErrFailedPrecondition) || !errors.As(err, &fe) || fe.Field != "forkcore" || !strings.Contains(err.Error(), forkCoreSHA256) {
		t.Fatalf("tampered forkcore: got %v, want ErrFailedPrecondition on forkcore naming the expected sha256", err)
	}
}
