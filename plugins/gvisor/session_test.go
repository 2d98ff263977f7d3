package gvisor

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/shared"
)

// runtimeBinary returns the agent runtime `make runtime` built into the
// repository's bin/; without it the session tests skip (fail with
// ORQEST_REQUIRE_GVISOR=1).
func runtimeBinary(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
	p := filepath.Join(dir, "bin", RuntimeName)
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("ORQEST_REQUIRE_GVISOR") == "1" {
			t.Fatalf("ORQEST_REQUIRE_GVISOR=1 but %s is missing (make runtime)", p)
		}
		t.Skipf("SKIPPING the gVisor session tests: %s is missing (make runtime)", p)
	}
	return p
}

// sessionConfig is the config block of a backend with sessions: the
// repository's runtime and a data and a paused directory of the test's
// own.
func sessionConfig(t testing.TB, extra map[string]any) []byte {
	t.Helper()
	cfg := testRunsc()
	cfg["runtime"], cfg["data_dir"], cfg["paused_dir"] = runtimeBinary(t), filepath.Join(t.TempDir(), "users"), filepath.Join(t.TempDir(), "paused")
	for k, v := range extra {
		cfg[k] = v
	}
	raw, _ := json.Marshal(cfg)
	return raw
}

// newSessionBackend returns a configured backend with sessions; at
// cleanup it is shut down and no runsc process of it may be left.
func newSessionBackend(t testing.TB, extra map[string]any) (*Backend, []byte) {
	t.Helper()
	return newSessionBackendWith(t, extra, shared.ConfigureRequest{Classes: true}, nil)
}

// newSessionBackendWith is newSessionBackend with the rest of the
// ConfigureRequest (its Config is the session config) and setup run on
// the backend before Configure.
func newSessionBackendWith(t testing.TB, extra map[string]any, req shared.ConfigureRequest, setup func(*Backend)) (*Backend, []byte) {
	t.Helper()
	needRunsc(t)
	raw := sessionConfig(t, extra)
	b := NewBackend(testLogger(t))
	if setup != nil {
		setup(b)
	}
	t.Cleanup(func() {
		b.Shutdown()
		assertNoSandboxes(t)
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req.Config = raw
	if _, err := b.Configure(ctx, req); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	return b, raw
}

// testLogger logs the plugin and its runtimes to the test's output under
// -v; it is quiet otherwise.
func testLogger(t testing.TB) hclog.Logger {
	if !testing.Verbose() {
		return hclog.NewNullLogger()
	}
	return hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Debug, Output: os.Stderr})
}

func openSession(t testing.TB, b *Backend, user string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	resp, err := b.Open(ctx, shared.OpenRequest{UserID: user})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Logf("session %s open in %v", resp.SessionID, time.Since(start))
	return resp.SessionID
}

// TestSessionRunsTheRuntime: a session's calls reach the agent runtime in
// gVisor (the kernel is the Sentry), tokens work (runtime_info needs an
// operator token and refuses an agent one), the tool library lives in the
// user's data directory (0700) and Close leaves no sandbox.
func TestSessionRunsTheRuntime(t *testing.T) {
	b, raw := newSessionBackend(t, nil)
	var cfg Config
	_ = json.Unmarshal(raw, &cfg)
	info, _ := b.Info(context.Background(), shared.InfoRequest{})
	for _, c := range []shared.Capability{shared.CapSessions, shared.CapKernelBoundary, shared.CapToolLibrary} {
		if !slices.Contains(info.Capabilities, c) {
			t.Errorf("Info lacks %s: %v", c, info.Capabilities)
		}
	}
	id := openSession(t, b, "alice")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := "import os\nreturn [os.uname().release, os.getuid(), args['x'] * 2]"
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		t.Fatal(err)
	}
	hostRelease := unix.ByteSliceToString(uts.Release[:])
	for i := range 2 {
		start := time.Now()
		resp, err := b.Execute(ctx, shared.ExecuteRequest{SessionID: id, UserID: "alice", Code: code, Args: []byte(`{"x":21}`), AllowedImports: []string{"os"}})
		if err != nil {
			t.Fatalf("Execute %d: %v", i, err)
		}
		res := resp.Result
		if !res.Success {
			t.Fatalf("Execute %d: %+v", i, res)
		}
		var out []any
		_ = json.Unmarshal(res.Output, &out)
		if len(out) != 3 || out[0] == hostRelease || out[1] != float64(65534) || out[2] != float64(42) {
			t.Fatalf("Execute %d: output %s (want gVisor's kernel release, not the host's %q, and uid 65534)", i, res.Output, hostRelease)
		}
		t.Logf("call %d in %v: %s", i, time.Since(start), res.Output)
	}
	if _, err := b.Execute(ctx, shared.ExecuteRequest{SessionID: id, UserID: "bob", Code: "return 1"}); !errors.Is(err, shared.ErrInvalidArgument) {
		t.Errorf("another user's Execute in alice's session: %v; want ErrInvalidArgument", err)
	}

	agent, err := b.MintToken(ctx, shared.MintTokenRequest{SessionID: id, Scope: shared.ScopeAgent})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.CallTool(ctx, shared.CallToolRequest{SessionID: id, Tool: rtproto.ToolInfo, Token: agent.Token}); !errors.Is(err, shared.ErrPermissionDenied) {
		t.Errorf("runtime_info with an agent token: %v; want ErrPermissionDenied", err)
	}
	op, err := b.MintToken(ctx, shared.MintTokenRequest{SessionID: id, Scope: shared.ScopeOperator})
	if err != nil {
		t.Fatal(err)
	}
	out, err := b.CallTool(ctx, shared.CallToolRequest{SessionID: id, Tool: rtproto.ToolInfo, Token: op.Token})
	if err != nil {
		t.Fatalf("runtime_info: %v", err)
	}
	var ri rtproto.InfoResult
	if err := json.Unmarshal(out.Result, &ri); err != nil || ri.Python != DefaultPython {
		t.Fatalf("runtime_info: %s (%v)", out.Result, err)
	}
	t.Logf("runtime in gVisor: sealing %v, missing %v", ri.Sealing, ri.SealingMissing)

	userDir := filepath.Join(cfg.DataDir, "alice")
	st, err := os.Stat(userDir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("user directory %s: %v %v", userDir, st, err)
	}
	if _, err := os.Stat(filepath.Join(userDir, filepath.Base(rtproto.LibraryPath))); err != nil {
		t.Errorf("the tool library is not in the user's directory: %v", err)
	}
	container := sandboxOf(t, b, id)
	start := time.Now()
	if _, err := b.Close(ctx, shared.CloseRequest{SessionID: id}); err != nil {
		t.Fatalf("Close: %v", err)
	}
	t.Logf("Close took %v", time.Since(start))
	if pids := sandboxPIDs(container); len(pids) > 0 {
		t.Fatalf("runsc processes of %s left after Close: %v", container, pids)
	}
	if _, err := b.Execute(ctx, shared.ExecuteRequest{SessionID: id, Code: "return 1"}); !errors.Is(err, shared.ErrNotFound) {
		t.Errorf("Execute in a closed session: %v; want ErrNotFound", err)
	}
}

// TestSessionKillMidCall: a session sandbox killed during a call is an
// infrastructure error (ErrUnavailable), not a result; nothing of it is
// left, and the next call on the session runs in a fresh sandbox with
// StateLost.
func TestSessionKillMidCall(t *testing.T) {
	b, _ := newSessionBackend(t, nil)
	id := openSession(t, b, "carol")
	container := sandboxOf(t, b, id)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	started := make(chan struct{})
	var once sync.Once
	go func() {
		select {
		case <-started:
			killSandbox(container)
		case <-ctx.Done():
		}
	}()
	start := time.Now()
	resp, err := b.ExecuteStream(ctx, shared.ExecuteRequest{SessionID: id, Code: "print('spinning', flush=True)\nwhile True:\n    pass", Timeout: 30 * time.Second},
		func(shared.OutputChunk) error { once.Do(func() { close(started) }); return nil })
	if !errors.Is(err, shared.ErrUnavailable) {
		t.Fatalf("kill mid-call: %+v, %v; want ErrUnavailable", resp.Result, err)
	}
	t.Logf("kill mid-call returned after %v: %v", time.Since(start), err)
	res, err := b.Execute(ctx, shared.ExecuteRequest{SessionID: id, Code: "return 1"})
	if err != nil || !res.Result.Success || !res.Result.StateLost {
		t.Fatalf("the next call on the killed session: %+v, %v; want success with state_lost", res.Result, err)
	}
	if now := sandboxOf(t, b, id); now == container {
		t.Errorf("the session is still served by the killed sandbox %s", container)
	}
	if pids := sandboxPIDs(container); len(pids) > 0 {
		t.Fatalf("runsc processes of %s left: %v", container, pids)
	}
}

// sandboxOf returns the runsc container id serving open session id.
func sandboxOf(t *testing.T, b *Backend, id string) string {
	t.Helper()
	a, err := b.Agent(id)
	if err != nil {
		t.Fatal(err)
	}
	return a.(*agent).container
}

// TestSessionsNeedTheRuntime: a configured runtime that is missing fails
// Configure; with sessions = false, or without a runtime, the backend does
// not declare sessions and Open is ErrNotSupported.
func TestSessionsNeedTheRuntime(t *testing.T) {
	needRunsc(t)
	b := NewBackend(hclog.NewNullLogger())
	defer b.Shutdown()
	raw, _ := json.Marshal(map[string]any{"runtime": "/nonexistent/" + RuntimeName})
	if _, err := b.Configure(context.Background(), shared.ConfigureRequest{Config: raw}); !errors.Is(err, shared.ErrUnavailable) {
		t.Fatalf("Configure with a missing runtime: %v; want ErrUnavailable", err)
	}
	off := NewBackend(hclog.NewNullLogger())
	defer off.Shutdown()
	raw = sessionConfig(t, map[string]any{"sessions": false})
	if _, err := off.Configure(context.Background(), shared.ConfigureRequest{Config: raw}); err != nil {
		t.Fatalf("Configure with sessions = false: %v", err)
	}
	if info, _ := off.Info(context.Background(), shared.InfoRequest{}); slices.Contains(info.Capabilities, shared.CapSessions) {
		t.Fatalf("sessions declared with sessions = false: %v", info.Capabilities)
	}
	if _, err := off.Open(context.Background(), shared.OpenRequest{UserID: "u"}); !errors.Is(err, shared.ErrNotSupported) {
		t.Fatalf("Open with sessions = false: %v; want ErrNotSupported", err)
	}
	b2 := NewBackend(hclog.NewNullLogger())
	defer b2.Shutdown()
	b2.runsc, b2.state = "/usr/bin/runsc", t.TempDir() // configured, but no runtime
	if _, err := b2.Open(context.Background(), shared.OpenRequest{UserID: "u"}); !errors.Is(err, shared.ErrNotSupported) {
		t.Fatalf("Open without a runtime: %v; want ErrNotSupported", err)
	}
	info, _ := b2.Info(context.Background(), shared.InfoRequest{})
	if slices.Contains(info.Capabilities, shared.CapSessions) {
		t.Fatalf("sessions declared without a runtime: %v", info.Capabilities)
	}
}

// crashHelperEnv makes the test binary a plugin stand-in that opens a
// session, prints its state directory and waits to be killed
// (TestCrashHelper).
const crashHelperEnv = "ORQEST_GVISOR_CRASH_HELPER"

// TestCrashHelper is not a test on its own: TestReaperAfterCrash runs the
// test binary with crashHelperEnv set to a config block.
func TestCrashHelper(t *testing.T) {
	raw := os.Getenv(crashHelperEnv)
	if raw == "" {
		t.Skip("helper process of TestReaperAfterCrash")
	}
	b := NewBackend(hclog.NewNullLogger())
	ctx := context.Background()
	if _, err := b.Configure(ctx, shared.ConfigureRequest{Config: []byte(raw)}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Open(ctx, shared.OpenRequest{UserID: "crash"}); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("STATE " + b.state + "\n")
	time.Sleep(5 * time.Minute)
}

// TestReaperAfterCrash: a plugin process SIGKILLed with a session open
// leaves nothing running: its sandbox dies with it (stdin closes, runsc
// has a parent-death signal), and the reaper then deletes what runsc
// listed under the dead plugin's root and removes its state directory;
// `runsc list` of that root shows no container and no runsc process of it
// is left.
func TestReaperAfterCrash(t *testing.T) {
	needRunsc(t)
	raw := sessionConfig(t, nil)
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.v")
	cmd.Env = append(os.Environ(), crashHelperEnv+"="+string(raw))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var state string
	buf := make([]byte, 0, 4096)
	deadline := time.Now().Add(2 * time.Minute)
	for state == "" && time.Now().Before(deadline) {
		chunk := make([]byte, 1024)
		n, err := stdout.Read(chunk)
		buf = append(buf, chunk[:n]...)
		for _, l := range strings.Split(string(buf), "\n") {
			if s, ok := strings.CutPrefix(l, "STATE "); ok && strings.HasSuffix(string(buf), "\n") {
				state = strings.TrimSpace(s)
			}
		}
		if err != nil {
			t.Fatalf("helper ended before opening its session: %v\n%s", err, buf)
		}
	}
	if state == "" {
		t.Fatalf("helper did not open its session:\n%s", buf)
	}
	root := filepath.Join(state, "runsc")
	if left := runscProcesses(t, state); len(left) == 0 {
		t.Fatalf("no runsc process of the helper's session under %s", state)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	// Nothing of the dead plugin keeps running.
	deadline = time.Now().Add(10 * time.Second)
	for len(runscProcesses(t, state)) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if left := runscProcesses(t, state); len(left) > 0 {
		t.Fatalf("runsc processes outlived their plugin: %v", left)
	}
	listed := runscList(t, root)
	t.Logf("runsc list of the dead plugin's root before the reaper: %q", listed)

	n, err := SweepStale(filepath.Dir(state), "")
	if err != nil || n < 1 {
		t.Fatalf("SweepStale = %d, %v; want the dead plugin's directory removed", n, err)
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Fatalf("state directory %s kept: %v", state, err)
	}
	if got := runscList(t, root); got != "" {
		t.Fatalf("runsc --root=%s list after the reaper: %q", root, got)
	}
	if left := runscProcesses(t, state); len(left) > 0 {
		t.Fatalf("runsc processes left after the reaper: %v", left)
	}
}

// runscList returns the container ids `runsc --root=root list -quiet`
// prints ("" for none or a root that no longer exists).
func runscList(t *testing.T, root string) string {
	t.Helper()
	runsc, err := lookRunsc("")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root); os.IsNotExist(err) {
		return ""
	}
	out, err := exec.Command(runsc, "--root="+root, "list", "--quiet").CombinedOutput()
	if err != nil {
		t.Fatalf("runsc list: %v: %s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestSessionMemoryCap: session_memory_mb caps the whole sandbox (the
// spec's linux.resources): a call allowed 2000 MB by its own limit that
// touches 600 MB kills a 200 MB session's sandbox, an infrastructure
// error; in a 1500 MB session the same call succeeds.
func TestSessionMemoryCap(t *testing.T) {
	code := "x = bytearray(600 * 1024 * 1024)\nfor i in range(0, len(x), 4096):\n    x[i] = 1\nreturn len(x)"
	for _, tc := range []struct {
		mb   int
		fits bool
	}{{200, false}, {1500, true}} {
		b, _ := newSessionBackend(t, map[string]any{"session_memory_mb": tc.mb})
		id := openSession(t, b, "mem")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		resp, err := b.Execute(ctx, shared.ExecuteRequest{SessionID: id, Code: code, MemoryMB: 2000, Timeout: 30 * time.Second})
		cancel()
		switch {
		case tc.fits && (err != nil || !resp.Result.Success):
			t.Errorf("session of %d MB: %+v, %v; want success", tc.mb, resp.Result, err)
		case !tc.fits && !errors.Is(err, shared.ErrUnavailable):
			t.Errorf("session of %d MB: %+v, %v; want ErrUnavailable (the sandbox killed)", tc.mb, resp.Result, err)
		default:
			t.Logf("session of %d MB: success=%v err=%v", tc.mb, resp.Result.Success, err)
		}
	}
}

// TestDefaultDataDirWithoutHome: a plugin started with the host's narrowed
// environment (no HOME, no XDG_CACHE_HOME) still finds a default data_dir,
// under the user's home directory from the user database.
func TestDefaultDataDirWithoutHome(t *testing.T) {
	t.Setenv("HOME", "")
	t.Setenv("XDG_CACHE_HOME", "")
	d, err := defaultDataDir()
	if err != nil || !filepath.IsAbs(d) || !strings.HasSuffix(d, filepath.Join(".cache", "orqest-sandbox", "gvisor-users")) {
		t.Fatalf("defaultDataDir() = %q, %v", d, err)
	}
}

// TestSessionUserCodeCannotReachData: /data (the user's directory: the
// tool library) is the runtime's; user code, on uid 65534, cannot list it.
func TestSessionUserCodeCannotReachData(t *testing.T) {
	b, _ := newSessionBackend(t, nil)
	id := openSession(t, b, "dave")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := b.Execute(ctx, shared.ExecuteRequest{SessionID: id, Code: "import os\nreturn os.listdir('/data')", AllowedImports: []string{"os"}})
	if err != nil {
		t.Fatal(err)
	}
	res := resp.Result
	if res.Success || res.ErrorKind == shared.KindValidation || !strings.Contains(res.Error+res.Stderr, "Permission") {
		t.Fatalf("user code listing /data: %+v; want a PermissionError at run time", res)
	}
	t.Logf("listing /data: %s: %s", res.ErrorKind, res.Error)
}

// Stateful calls in a tier-3 session keep their globals (the runtime's
// notebook interpreter, inside the gVisor sandbox); a stateless call does
// not see them; a stateful call without a session is refused.
func TestSessionStateful(t *testing.T) {
	b, _ := newSessionBackend(t, nil)
	info, _ := b.Info(context.Background(), shared.InfoRequest{})
	if !info.Has(shared.CapStatefulSessions) {
		t.Fatalf("Info lacks %s: %v", shared.CapStatefulSessions, info.Capabilities)
	}
	id := openSession(t, b, "alice")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := func(code string, stateful bool) shared.ExecutionResult {
		t.Helper()
		resp, err := b.Execute(ctx, shared.ExecuteRequest{SessionID: id, UserID: "alice", Code: code, Stateful: stateful})
		if err != nil {
			t.Fatalf("%q: %v", code, err)
		}
		return resp.Result
	}
	run("counter = 41", true)
	run("counter += 1", true)
	if r := run("return counter", true); !r.Success || string(r.Output) != "42" {
		t.Fatalf("state across three calls: %+v", r)
	}
	if r := run("return counter", false); r.Success || r.ErrorKind != shared.KindRuntime {
		t.Errorf("a stateless call saw the session's globals: %+v", r)
	}
	var fe *shared.FieldError
	if _, err := b.Execute(ctx, shared.ExecuteRequest{Code: "return 1", Stateful: true}); !errors.As(err, &fe) || fe.Field != "stateful" {
		t.Errorf("stateful without a session: %v", err)
	}
}

// Files in a tier-3 session, through the same runtime as tier 2: an
// upload the code reads, the file the code wrote downloaded and listed,
// unclean paths refused before the sandbox, a missing file ErrNotFound,
// and a file call on no session ErrNotFound. Inside gVisor there is no
// Landlock, so the runner keeps the plain seccomp programs: code writes
// files into its workspace but makes no directory (EPERM), as documented.
func TestSessionFiles(t *testing.T) {
	b, _ := newSessionBackend(t, nil)
	info, _ := b.Info(context.Background(), shared.InfoRequest{})
	if !info.Has(shared.CapFiles) {
		t.Fatalf("Info lacks %s: %v", shared.CapFiles, info.Capabilities)
	}
	id := openSession(t, b, "erin")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := b.PutFile(ctx, shared.PutFileRequest{SessionID: id, Path: "in.csv", Data: []byte("a\n1\n2\n")}); err != nil {
		t.Fatalf("PutFile: %v", err)
	}
	resp, err := b.Execute(ctx, shared.ExecuteRequest{SessionID: id, UserID: "erin", Code: "rows = workspace.read_text('in.csv').splitlines()\n" +
		"workspace.write_text('n.txt', str(len(rows)))\n" +
		"try:\n    workspace.mkdir('d')\n    made = 'made'\nexcept Exception as e:\n    made = type(e).__name__\n" +
		"return [len(rows), made]"})
	if err != nil || !resp.Result.Success {
		t.Fatalf("code reading the upload: %v %+v", err, resp.Result)
	}
	t.Logf("tier 3: %s (mkdir in the workspace)", resp.Result.Output)
	if !strings.HasPrefix(string(resp.Result.Output), "[3,") {
		t.Errorf("output %s", resp.Result.Output)
	}
	got, err := b.GetFile(ctx, shared.GetFileRequest{SessionID: id, Path: "n.txt"})
	if err != nil || string(got.Data) != "3" {
		t.Errorf("GetFile n.txt: %q %v", got.Data, err)
	}
	list, err := b.ListFiles(ctx, shared.ListFilesRequest{SessionID: id})
	if err != nil || !slices.ContainsFunc(list.Files, func(f shared.FileInfo) bool { return f.Name == "n.txt" }) {
		t.Errorf("ListFiles: %+v %v", list, err)
	}
	var fe *shared.FieldError
	if _, err := b.GetFile(ctx, shared.GetFileRequest{SessionID: id, Path: "../etc/passwd"}); !errors.As(err, &fe) || fe.Field != "path" {
		t.Errorf("GetFile ../etc/passwd: %v, want a FieldError on path", err)
	}
	if _, err := b.GetFile(ctx, shared.GetFileRequest{SessionID: id, Path: "nope.txt"}); !errors.Is(err, shared.ErrNotFound) {
		t.Errorf("GetFile of a missing file: %v, want ErrNotFound", err)
	}
	if _, err := b.ListFiles(ctx, shared.ListFilesRequest{SessionID: "nosuch"}); !errors.Is(err, shared.ErrNotFound) {
		t.Errorf("ListFiles of no session: %v, want ErrNotFound", err)
	}
}

// TestSessionPreparedAndResidentMemory: the runtime flags reach a gVisor
// session as they reach a container (the policy's modules and a stateful
// sandbox sent at Configure). Its Python processes run with
// single-threaded native pools and matplotlib's cache outside the
// workspace. (A call's memory_mb stays an address-space limit here: a
// call past a cgroup limit would kill the whole sandbox; the conformance
// case MemoryLimit checks that it ends as a memory error.)
func TestSessionPreparedAndResidentMemory(t *testing.T) {
	needRunsc(t)
	raw := sessionConfig(t, map[string]any{"session_memory_mb": 512})
	b := NewBackend(testLogger(t))
	t.Cleanup(func() {
		b.Shutdown()
		assertNoSandboxes(t)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := b.Configure(ctx, shared.ConfigureRequest{Config: raw, Classes: true, AllowedImports: []string{"json", "os"}, Stateful: true}); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	id := openSession(t, b, "erin")
	run := func(code string, mem int, allowed ...string) shared.ExecutionResult {
		t.Helper()
		resp, err := b.Execute(ctx, shared.ExecuteRequest{SessionID: id, UserID: "erin", Code: code, Stateful: true, MemoryMB: mem, AllowedImports: allowed, Timeout: 30 * time.Second})
		if err != nil {
			t.Fatalf("%q: %v", code, err)
		}
		return resp.Result
	}
	if r := run("import os\nreturn [os.environ.get('OPENBLAS_NUM_THREADS'), os.environ.get('OMP_NUM_THREADS'), os.environ.get('MPLCONFIGDIR')]", 128, "os"); !r.Success || string(r.Output) != `["1","1","/workspace/cache/matplotlib"]` {
		t.Fatalf("the interpreter's environment: %+v", r)
	}
}

// TestSessionForkServer: a session's stateless calls run in children of
// the runtime's fork-server inside the Sentry (which has no pidfds: the
// zygote keeps them by pid), not in one interpreter spawned per call: every
// call's parent is the same zygote, not the runtime (the sandbox's pid 1).
// A runaway call is killed at its wall clock and the next call runs in
// the same zygote; the per-call memory limit holds; the zygote's children
// are reaped (a hundred calls later it still serves, within the sandbox's
// pids).
func TestSessionForkServer(t *testing.T) {
	b, _ := newSessionBackend(t, nil)
	id := openSession(t, b, "forker")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	exec := func(code string, timeout time.Duration, mb int) shared.ExecutionResult {
		t.Helper()
		resp, err := b.Execute(ctx, shared.ExecuteRequest{SessionID: id, Code: code, AllowedImports: []string{"os"}, Timeout: timeout, MemoryMB: mb})
		if err != nil {
			t.Fatalf("%q: %v", code, err)
		}
		return resp.Result
	}
	parent := func() string {
		t.Helper()
		res := exec("import os\nreturn [os.getppid(), os.getpid()]", 30*time.Second, 128)
		var pids []int
		if err := json.Unmarshal(res.Output, &pids); !res.Success || err != nil || len(pids) != 2 {
			t.Fatalf("pids: %+v (%v)", res, err)
		}
		if pids[0] == 1 {
			t.Fatalf("the call's parent is the runtime (pid 1): spawned, not forked by a zygote")
		}
		return strconv.Itoa(pids[0])
	}
	zygote := parent()
	for range 20 {
		if p := parent(); p != zygote {
			t.Fatalf("a call's parent %s, the first's %s: want the same zygote", p, zygote)
		}
	}
	start := time.Now()
	if res := exec("while True:\n    pass", time.Second, 128); res.ErrorKind != shared.KindTimeout {
		t.Fatalf("runaway: %+v, want a timeout", res)
	}
	t.Logf("runaway with a 1 s wall clock returned after %v", time.Since(start))
	if p := parent(); p != zygote {
		t.Fatalf("after the runaway the parent is %s, was %s: want the same zygote", p, zygote)
	}
	if res := exec("x = bytearray(300 * 1024 * 1024)\nreturn len(x)", 30*time.Second, 128); res.ErrorKind != shared.KindMemory {
		t.Fatalf("300 MB under a 128 MB limit: %+v, want a memory error", res)
	}
	for i := range 100 {
		if res := exec("return 6 * 7", 30*time.Second, 128); string(res.Output) != "42" {
			t.Fatalf("call %d: %+v", i, res)
		}
	}
	if p := parent(); p != zygote {
		t.Fatalf("after 100 calls the parent is %s, was %s: want the same zygote", p, zygote)
	}
}

// TestSessionRunawayFirstCall: a session's first call, sent right after
// Open while its runtime may still be starting the zygote, is a runaway:
// its wall clock counts from the call's start (the wait for the zygote
// included), so it ends with a timeout, and the session serves the next
// call.
func TestSessionRunawayFirstCall(t *testing.T) {
	b, _ := newSessionBackend(t, nil)
	id := openSession(t, b, "runaway-first")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp, err := b.Execute(ctx, shared.ExecuteRequest{SessionID: id, Code: "while True:\n    pass", Timeout: time.Second})
	if err != nil {
		t.Fatalf("runaway first call: %v", err)
	}
	if resp.Result.ErrorKind != shared.KindTimeout {
		t.Fatalf("runaway first call: %+v, want a timeout", resp.Result)
	}
	resp, err = b.Execute(ctx, shared.ExecuteRequest{SessionID: id, Code: "return 6 * 7", Timeout: 30 * time.Second})
	if err != nil || string(resp.Result.Output) != "42" {
		t.Fatalf("the call after the runaway: %+v, %v", resp.Result, err)
	}
}
