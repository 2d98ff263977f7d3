package subprocess

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/plugin"
	"github.com/orqest/sandbox/validator"
)

func newTestBackend(t *testing.T) *Backend {
	t.Helper()
	if _, err := os.Stat(DefaultPython); err != nil {
		t.Skipf("%s not available: %v", DefaultPython, err)
	}
	b := NewBackend(nil)
	t.Cleanup(b.Shutdown)
	return b
}

// spawned records the children a backend starts.
type spawned struct {
	mu   sync.Mutex
	pids []int
	dirs []string
}

func (s *spawned) hook(pid int, dir string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pids = append(s.pids, pid)
	s.dirs = append(s.dirs, dir)
}

func execute(t *testing.T, b *Backend, req shared.ExecuteRequest) shared.ExecutionResult {
	t.Helper()
	resp, err := b.Execute(context.Background(), req)
	if err != nil {
		t.Fatalf("Execute(%q): %v", req.Code, err)
	}
	return resp.Result
}

func wantSuccess(t *testing.T, res shared.ExecutionResult, want string) {
	t.Helper()
	if !res.Success {
		t.Fatalf("success=false kind=%s error=%s stderr=%s", res.ErrorKind, res.Error, res.Stderr)
	}
	var g, w any
	if err := json.Unmarshal(res.Output, &g); err != nil {
		t.Fatalf("output %q: %v", res.Output, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if string(gb) != string(wb) {
		t.Fatalf("output = %s, want %s", gb, wb)
	}
}

func wantKind(t *testing.T, res shared.ExecutionResult, kind shared.ErrorKind) {
	t.Helper()
	if res.Success || res.ErrorKind != kind {
		t.Fatalf("success=%v kind=%q error=%q stderr=%q, want kind %q", res.Success, res.ErrorKind, res.Error, res.Stderr, kind)
	}
}

// processGone reports whether pid no longer exists (not even as a zombie)
// and no process remains in its process group.
//
// A fork-server child whose execution ended with a response has been sent
// SIGKILL when Execute returns and its zygote reaps it right after: an
// exiting child or a zombie (which run nothing) may be seen for a moment; a
// child that can still run user code never.
func processGone(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		// Killed but still tearing down its memory shows state R with
		// PF_EXITING or SIGKILL pending: it can never run code again.
		if ok, why := killedOrGone(pid); !ok {
			t.Errorf("child %d still runs (%s)", pid, why)
		}
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if err = syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
				break
			}
		}
		if !errors.Is(err, syscall.ESRCH) {
			t.Errorf("child %d still exists (kill 0: %v)", pid, err)
		}
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 2 && f[2] == strconv.Itoa(pid) {
			t.Errorf("process %s is still in the child's process group %d", e.Name(), pid)
		}
	}
}

func TestInfo(t *testing.T) {
	info, err := NewBackend(nil).Info(context.Background(), shared.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "subprocess" || info.Tier != 1 || len(info.APIVersions) != 1 || info.APIVersions[0] != shared.APIVersion {
		t.Fatalf("info: %+v", info)
	}
	for _, c := range []shared.Capability{shared.CapMemoryLimit, shared.CapCPULimit, shared.CapWallClockTimeout,
		shared.CapProcessIsolation, shared.CapFreshProcess, shared.CapOutputLimit} {
		if !info.Has(c) {
			t.Errorf("capability %s missing", c)
		}
	}
	// Isolation is declared exactly when the probe found the layer in force.
	s, err := NewBackend(nil).probeSeal(context.Background(), DefaultPython, nil)
	if err != nil {
		t.Fatal(err)
	}
	has := func(l string) bool { return slices.Contains(s.Layers, l) }
	if info.Has(shared.CapFilesystemIsolation) != has(runner.LayerLandlockFS) ||
		info.Has(shared.CapNetworkIsolation) != (has(runner.LayerNetNamespace) || has(runner.LayerSeccomp)) ||
		info.Has(shared.CapSeccomp) != has(runner.LayerSeccomp) {
		t.Errorf("capabilities %v do not match the layers in force %v", info.Capabilities, s.Layers)
	}
}

func TestConfigure(t *testing.T) {
	b := newTestBackend(t)
	ctx := context.Background()
	if _, err := b.Configure(ctx, shared.ConfigureRequest{}); err != nil {
		t.Fatalf("default config: %v", err)
	}
	if _, err := b.Configure(ctx, shared.ConfigureRequest{Config: json.RawMessage(`{"python":"/usr/bin/python3","mode":"spawn"}`)}); err != nil {
		t.Fatalf("explicit config: %v", err)
	}
	if _, err := b.Configure(ctx, shared.ConfigureRequest{Config: json.RawMessage(`{"mode":"forkserver","preload":["re","json"]}`)}); err != nil {
		t.Fatalf("forkserver config: %v", err)
	}
	plain := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(plain, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "python3")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexec /usr/bin/python3 \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Each refusal of an attribute names it (a shared.FieldError: the host
	// points at the attribute in the policy).
	for _, c := range []struct {
		config string
		class  error
		text   string
		field  string
	}{
		{`{"require":["teleportation"]}`, shared.ErrInvalidArgument, "unknown capability", "require"},
		{`{"preload":["os; import x"]}`, shared.ErrInvalidArgument, "not a module name", "preload"},
		{`{"mode":"turbo"}`, shared.ErrInvalidArgument, "unknown mode", "mode"},
		{`{"tenants":5000}`, shared.ErrInvalidArgument, "want 1 to 1024", "tenants"},
		{`{"pyhton":"/usr/bin/python3"}`, shared.ErrInvalidArgument, "pyhton", ""},
		{`{"python":"/nonexistent/python3"}`, shared.ErrUnavailable, "not found", "python"},
		{`{"python":` + strconv.Quote(plain) + `}`, shared.ErrInvalidArgument, "not executable", "python"},
		{`{"python":"/usr/bin"}`, shared.ErrInvalidArgument, "not a regular file", "python"},
		{`{"python":` + strconv.Quote(script) + `}`, shared.ErrInvalidArgument, "pyenv shim", "python"},
		{`{"python":"/bin/true"}`, shared.ErrUnavailable, "self-test", "python"},
		{`{"forkcore":"/nonexistent/forkcore.so"}`, shared.ErrUnavailable, "forkcore", "forkcore"},
	} {
		_, err := b.Configure(ctx, shared.ConfigureRequest{Config: json.RawMessage(c.config)})
		if !errors.Is(err, c.class) || !strings.Contains(err.Error(), c.text) {
			t.Errorf("config %s: err = %v, want %v containing %q", c.config, err, c.class, c.text)
		}
		var fe *shared.FieldError
		if c.field != "" && (!errors.As(err, &fe) || fe.Field != c.field) {
			t.Errorf("config %s: err = %v, want a FieldError on %s", c.config, err, c.field)
		}
	}
	// A rejected config leaves the previous one in force.
	wantSuccess(t, execute(t, b, shared.ExecuteRequest{Code: "return 1+1"}), "2")
}

func TestReturn(t *testing.T) {
	b := newTestBackend(t)
	res := execute(t, b, shared.ExecuteRequest{Code: "return 1+1"})
	wantSuccess(t, res, "2")
	if res.Limits.TimeoutMS != shared.DefaultTimeout.Milliseconds() || res.Limits.MemoryMB != shared.DefaultMemoryMB || res.Limits.MaxOutputBytes != shared.DefaultMaxOutputBytes {
		t.Errorf("limits: %+v", res.Limits)
	}
	if res.DurationMS <= 0 {
		t.Errorf("duration_ms = %v", res.DurationMS)
	}
}

func TestArgsAndImport(t *testing.T) {
	b := newTestBackend(t)
	res := execute(t, b, shared.ExecuteRequest{
		Code:           "import re\nreturn re.findall(r'\\d+', args['text'])",
		Args:           json.RawMessage(`{"text":"a1 b22 c333"}`),
		AllowedImports: []string{"re"},
		Timeout:        2 * time.Second,
		MemoryMB:       64,
	})
	wantSuccess(t, res, `["1","22","333"]`)
}

func TestDeniedImportIsValidation(t *testing.T) {
	if len(validator.New().Check(context.Background(), "import os\nreturn 1", nil)) == 0 {
		t.Skip("validator not implemented yet (stub accepts everything)")
	}
	b := newTestBackend(t)
	res := execute(t, b, shared.ExecuteRequest{Code: "import os\nreturn os.getcwd()"})
	wantKind(t, res, shared.KindValidation)
	if len(res.Findings) == 0 || !strings.Contains(res.Error, res.Findings[0].Rule) {
		t.Fatalf("findings %+v, error %q", res.Findings, res.Error)
	}
}

func TestDeniedImportNeverRuns(t *testing.T) {
	// Whichever layer catches it (Go validator, in-child checker, import
	// shim), a denied import does not succeed.
	b := newTestBackend(t)
	res := execute(t, b, shared.ExecuteRequest{Code: "import os\nreturn os.getcwd()"})
	if res.Success {
		t.Fatalf("denied import ran: %s", res.Output)
	}
}

func TestRuntimeErrorTraceback(t *testing.T) {
	b := newTestBackend(t)
	res := execute(t, b, shared.ExecuteRequest{Code: "x = [1, 2]\nreturn x[5]"})
	wantKind(t, res, shared.KindRuntime)
	for _, s := range []string{"Traceback", `File "<sandbox>", line 2`, "IndexError: list index out of range"} {
		if !strings.Contains(res.Error, s) {
			t.Errorf("error lacks %q:\n%s", s, res.Error)
		}
	}
}

func TestTimeoutKillsEverything(t *testing.T) {
	b := newTestBackend(t)
	var sp spawned
	b.onSpawn = sp.hook
	start := time.Now()
	res := execute(t, b, shared.ExecuteRequest{Code: "while True:\n    pass", Timeout: 500 * time.Millisecond})
	elapsed := time.Since(start)
	wantKind(t, res, shared.KindTimeout)
	if res.Error != "sandbox execution timed out after 0.50s" {
		t.Errorf("error = %q", res.Error)
	}
	if elapsed >= 1500*time.Millisecond {
		t.Errorf("took %v", elapsed)
	}
	if len(sp.pids) != 1 {
		t.Fatalf("pids: %v", sp.pids)
	}
	processGone(t, sp.pids[0])
}

func TestContextCancelKillsChild(t *testing.T) {
	b := newTestBackend(t)
	var sp spawned
	b.onSpawn = sp.hook
	// A first call starts the zygote (slow on a loaded machine): the
	// deadline below is for the call, not for the start.
	execute(t, b, shared.ExecuteRequest{Code: "return 1"})
	sp.mu.Lock()
	before := len(sp.pids)
	sp.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := b.Execute(ctx, shared.ExecuteRequest{Code: "while True:\n    pass", Timeout: 10 * time.Second})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Errorf("took %v", time.Since(start))
	}
	sp.mu.Lock()
	pids := append([]int(nil), sp.pids[before:]...)
	sp.mu.Unlock()
	if len(pids) == 0 {
		t.Fatal("no child ran the call before its deadline")
	}
	processGone(t, pids[0])
}

func TestMemoryLimit(t *testing.T) {
	b := newTestBackend(t)
	var sp spawned
	b.onSpawn = sp.hook
	codes := []string{"x = ' ' * (2*1024**3)\nreturn len(x)", "x = [0] * (2*1024**3)\nreturn len(x)"}
	var rules struct {
		Safe []string `json:"safe_builtins"`
	}
	_ = json.Unmarshal(validator.RulesJSON(), &rules)
	for _, n := range rules.Safe {
		if n == "bytearray" {
			codes = append(codes, "x = bytearray(2*1024**3)\nreturn len(x)")
		}
	}
	for _, code := range codes {
		res := execute(t, b, shared.ExecuteRequest{Code: code, MemoryMB: 64})
		wantKind(t, res, shared.KindMemory)
	}
	for _, pid := range sp.pids {
		processGone(t, pid)
	}
	// Normal code works at 64 MB.
	res := execute(t, b, shared.ExecuteRequest{Code: "import json\nreturn len(json.dumps(list(range(100000))))",
		AllowedImports: []string{"json"}, MemoryMB: 64})
	if !res.Success {
		t.Fatalf("normal code at 64 MB: %s: %s", res.ErrorKind, res.Error)
	}
}

func TestOutputLimit(t *testing.T) {
	b := newTestBackend(t)
	res := execute(t, b, shared.ExecuteRequest{Code: "return 'x' * 2000", MaxOutputBytes: 1000})
	wantKind(t, res, shared.KindOutputLimit)
	res = execute(t, b, shared.ExecuteRequest{Code: "return 'x' * 500", MaxOutputBytes: 1000})
	wantSuccess(t, res, `"`+strings.Repeat("x", 500)+`"`)
}

func TestStdoutCaptureAndTruncation(t *testing.T) {
	b := newTestBackend(t)
	res := execute(t, b, shared.ExecuteRequest{Code: "print('hello')\nreturn 1"})
	wantSuccess(t, res, "1")
	if res.Stdout != "hello\n" || res.StdoutTruncated || res.Stderr != "" {
		t.Fatalf("stdout %q truncated %v stderr %q", res.Stdout, res.StdoutTruncated, res.Stderr)
	}
	// More than the cap, and more than a pipe buffer: the child must not
	// block, and the result keeps exactly the cap.
	res = execute(t, b, shared.ExecuteRequest{Code: "for i in range(2000):\n    print('y' * 99)\nreturn 2", MaxOutputBytes: 1000})
	wantSuccess(t, res, "2")
	if len(res.Stdout) != 1000 || !res.StdoutTruncated {
		t.Fatalf("stdout len %d truncated %v", len(res.Stdout), res.StdoutTruncated)
	}
	// Multi-byte output is cut on a rune boundary.
	res = execute(t, b, shared.ExecuteRequest{Code: "print('é' * 1000)\nreturn 3", MaxOutputBytes: 1001})
	wantSuccess(t, res, "3")
	if len(res.Stdout) != 1000 || !res.StdoutTruncated || strings.ContainsRune(res.Stdout, '\uFFFD') {
		t.Fatalf("stdout len %d truncated %v", len(res.Stdout), res.StdoutTruncated)
	}
}

func TestNotSerializable(t *testing.T) {
	b := newTestBackend(t)
	res := execute(t, b, shared.ExecuteRequest{Code: "return {1, 2}"})
	wantKind(t, res, shared.KindNotSerializable)
}

func TestTempDirRemoved(t *testing.T) {
	b := newTestBackend(t)
	var sp spawned
	b.onSpawn = sp.hook
	wantSuccess(t, execute(t, b, shared.ExecuteRequest{Code: "return 1"}), "1")
	wantKind(t, execute(t, b, shared.ExecuteRequest{Code: "while True:\n    pass", Timeout: 200 * time.Millisecond}), shared.KindTimeout)
	if len(sp.dirs) != 2 {
		t.Fatalf("dirs: %v", sp.dirs)
	}
	for _, d := range sp.dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("working directory %s still exists (%v)", d, err)
		}
	}
}

func TestEmptyEnvironmentAndPrivateCwd(t *testing.T) {
	b := newTestBackend(t)
	var sp spawned
	b.onSpawn = sp.hook
	t.Setenv("ORQEST_SECRET_FOR_TEST", "leak")
	res := execute(t, b, shared.ExecuteRequest{Code: "import os\nreturn [dict(os.environ), os.getcwd()]", AllowedImports: []string{"os"}})
	if !res.Success {
		t.Fatalf("%s: %s", res.ErrorKind, res.Error)
	}
	var got []any
	if err := json.Unmarshal(res.Output, &got); err != nil {
		t.Fatal(err)
	}
	// Python's own PEP 538 locale coercion sets LC_CTYPE in the child; nothing
	// comes from the parent.
	env, _ := got[0].(map[string]any)
	for k := range env {
		if k != "LC_CTYPE" {
			t.Errorf("environment not empty: %v", env)
		}
	}
	// Spawn mode runs in a private temporary directory; fork-server
	// children in the zygote's "/" (unreadable under Landlock either way).
	if want := sp.dirs[0]; want != "" && got[1] != want || want == "" && got[1] != "/" {
		t.Errorf("cwd %v, want %q", got[1], want)
	}
}

func TestSizeLimits(t *testing.T) {
	b := newTestBackend(t)
	ctx := context.Background()
	big := "return 1\n" + strings.Repeat("#", b.maxCodeBytes)
	if _, err := b.Execute(ctx, shared.ExecuteRequest{Code: big}); !errors.Is(err, shared.ErrInvalidArgument) {
		t.Errorf("oversize code: %v", err)
	}
	if _, err := b.Validate(ctx, shared.ValidateRequest{Code: big}); !errors.Is(err, shared.ErrInvalidArgument) {
		t.Errorf("oversize code (validate): %v", err)
	}
	bigArgs := json.RawMessage(`{"s":"` + strings.Repeat("a", shared.DefaultMaxArgsBytes) + `"}`)
	if _, err := b.Execute(ctx, shared.ExecuteRequest{Code: "return 1", Args: bigArgs}); !errors.Is(err, shared.ErrInvalidArgument) {
		t.Errorf("oversize args: %v", err)
	}
	for _, a := range []string{`[1]`, `{"a":`, `7`} {
		if _, err := b.Execute(ctx, shared.ExecuteRequest{Code: "return 1", Args: json.RawMessage(a)}); !errors.Is(err, shared.ErrInvalidArgument) {
			t.Errorf("args %s: %v", a, err)
		}
	}
	// Args just under the cap are fine.
	okArgs := json.RawMessage(`{"s":"` + strings.Repeat("a", shared.DefaultMaxArgsBytes-20) + `"}`)
	wantSuccess(t, execute(t, b, shared.ExecuteRequest{Code: "return len(args['s'])", Args: okArgs}), fmt.Sprint(shared.DefaultMaxArgsBytes-20))
}

func TestConcurrentExecutions(t *testing.T) {
	b := newTestBackend(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			resp, err := b.Execute(context.Background(), shared.ExecuteRequest{
				Code: "print(args['i'])\nreturn args['i'] * 2",
				Args: json.RawMessage(fmt.Sprintf(`{"i": %d}`, i)),
			})
			switch {
			case err != nil:
				errs <- err
			case !resp.Result.Success || string(resp.Result.Output) != strconv.Itoa(i*2) || resp.Result.Stdout != fmt.Sprintf("%d\n", i):
				errs <- fmt.Errorf("call %d: %+v", i, resp.Result)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestOverGRPC runs a few calls through the real go-plugin gRPC path.
func TestOverGRPC(t *testing.T) {
	b := newTestBackend(t)
	client, _ := goplugin.TestPluginGRPCConn(t, false, map[string]goplugin.Plugin{
		plugin.PluginName: &plugin.SandboxPlugin{Impl: b},
	})
	defer client.Close()
	raw, err := client.Dispense(plugin.PluginName)
	if err != nil {
		t.Fatal(err)
	}
	sb := raw.(shared.Sandbox)
	ctx := context.Background()
	if _, err := sb.Configure(ctx, shared.ConfigureRequest{Config: json.RawMessage(`{"mode":"turbo"}`)}); !errors.Is(err, shared.ErrInvalidArgument) {
		t.Errorf("bad mode over gRPC: %v", err)
	}
	resp, err := sb.Execute(ctx, shared.ExecuteRequest{Code: "return 1+1"})
	if err != nil {
		t.Fatal(err)
	}
	wantSuccess(t, resp.Result, "2")
	resp, err = sb.Execute(ctx, shared.ExecuteRequest{Code: "while True:\n    pass", Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	wantKind(t, resp.Result, shared.KindTimeout)
}

func TestBenignCodeAndSyntaxError(t *testing.T) {
	b := newTestBackend(t)
	for code, want := range map[string]string{
		"from collections import Counter\nc = Counter(args['w'])\nreturn sorted(c.items())":              `[["a",2],["b",1]]`,
		"def f(x: int) -> int:\n    return x * 2\nreturn [f(i) for i in range(3) if (j := i) >= 0]":      `[0,2,4]`,
		"try:\n    1/0\nexcept ZeroDivisionError as e:\n    return f'caught {e!s}'":                      `"caught division by zero"`,
		"match args['w']:\n    case [first, *rest]:\n        return {'first': first, 'n': len(rest)}":    `{"first":"a","n":2}`,
		"import math, itertools\nreturn [math.floor(2.5), list(itertools.islice(itertools.count(), 3))]": `[2,[0,1,2]]`,
		"s = '''line1\n  line2'''\nreturn s.splitlines()":                                                `["line1","  line2"]`,
		"return sorted(args['w'], key=lambda c: -ord(c))":                                                `["b","a","a"]`,
	} {
		res := execute(t, b, shared.ExecuteRequest{Code: code, Args: json.RawMessage(`{"w":["a","b","a"]}`),
			AllowedImports: []string{"collections", "math", "itertools"}})
		if !res.Success {
			t.Errorf("%q: %s: %s", code, res.ErrorKind, res.Error)
			continue
		}
		wantSuccess(t, res, want)
	}
	res := execute(t, b, shared.ExecuteRequest{Code: "return (1 +"})
	wantKind(t, res, shared.KindValidation)
	if len(res.Findings) == 0 || res.Findings[0].Line != 1 {
		t.Fatalf("findings: %+v", res.Findings)
	}
}

func TestNoFileDescriptorLeak(t *testing.T) {
	b := newTestBackend(t)
	count := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skip(err)
		}
		return len(ents)
	}
	execute(t, b, shared.ExecuteRequest{Code: "return 1"}) // warm up lazily opened fds
	// The plugin holds two descriptors per ready child: count at a full pool.
	poolFull(t, b)
	before := count()
	for i := 0; i < 5; i++ {
		execute(t, b, shared.ExecuteRequest{Code: "print('x')\nreturn 1"})
		execute(t, b, shared.ExecuteRequest{Code: "while True:\n    pass", Timeout: 50 * time.Millisecond})
		execute(t, b, shared.ExecuteRequest{Code: "return [0] * (2*1024**3)", MemoryMB: 64})
	}
	poolFull(t, b)
	// A child killed after its response finishes dying a moment after
	// Execute returned; so does the plugin's watch on its pidfd (2 s bound).
	after := count()
	for deadline := time.Now().Add(2 * time.Second); after > before && time.Now().Before(deadline); after = count() {
		time.Sleep(5 * time.Millisecond)
	}
	if after > before {
		t.Fatalf("open fds grew from %d to %d", before, after)
	}
}

func TestGradualMemoryGrowthAndDeepNesting(t *testing.T) {
	b := newTestBackend(t)
	res := execute(t, b, shared.ExecuteRequest{Code: "x = []\nwhile True:\n    x.append(' ' * 10000)", MemoryMB: 64})
	wantKind(t, res, shared.KindMemory)
	res = execute(t, b, shared.ExecuteRequest{Code: "x = []\nfor i in range(100000):\n    x = [x]\nreturn x"})
	wantKind(t, res, shared.KindNotSerializable)
}
