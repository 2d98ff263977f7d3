package agent

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orqest/sandbox/rules"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/internal/wheeltest"
	"github.com/orqest/sandbox/shared"
)

// These tests install wheels the test builds itself into per-agent venvs,
// in-process with the host's python3 (which needs the venv module). The
// same path against the real container is TestDependencies in
// plugins/docker.

func demoWheels(t *testing.T, dir string) {
	t.Helper()
	for _, w := range []wheeltest.Wheel{
		{Name: "orqdemo", Version: "1.0.0", Files: map[string]string{"orqdemo/__init__.py": "from orqhelper import shout\n\ndef greet(n):\n    return shout('hello ' + n)\n"},
			Requires: []string{"orqhelper>=1", "orqextra; extra == 'more'", "orqold; python_version < '3'"}},
		{Name: "orqdemo", Version: "0.9.0", Files: map[string]string{"orqdemo/__init__.py": "def greet(n):\n    return 'old'\n"}},
		{Name: "orqhelper", Version: "1.2.0", Files: map[string]string{"orqhelper.py": "def shout(s):\n    return s.upper()\n"}},
		{Name: "orqneedy", Version: "1.0", Files: map[string]string{"orqneedy.py": "X = 1\n"}, Requires: []string{"forbiddenpkg"}},
		{Name: "orqtamper", Version: "1.0", Files: map[string]string{"orqtamper.py": "X = 1\n"},
			Tamper: func(m map[string]string) { m["orqtamper.py"] = "X = 2\n" }},
		{Name: "orqslip", Version: "1.0", Files: map[string]string{"orqslip.py": "X = 1\n", "../../evil.py": "BAD = 1\n"}},
	} {
		if _, err := wheeltest.Build(dir, w); err != nil {
			t.Fatal(err)
		}
	}
}

// startRuntimeWithPackages starts a runtime in-process with the package
// policy; native, when given, is its directory of native wheels
// (rtproto.Hello.NativeDir).
func startRuntimeWithPackages(t *testing.T, allowed []string, wheelDir string, native ...string) (*mcp.ClientSession, string, string) {
	t.Helper()
	py, err := findPython("")
	if err != nil {
		t.Skipf("SKIPPING: no python3: %v", err)
	}
	table := rules.JSON()
	secret := []byte(strings.Repeat("k", 32))
	work := containerWorkdir(t)
	hello := rtproto.Hello{Secret: secret, User: testUser, Session: testSession, AllowedPackages: allowed, WheelDir: wheelDir}
	if len(native) > 0 {
		hello.NativeDir = native[0]
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rt := &runtime{
		hello:   hello,
		started: time.Now(),
		exec:    &executor{python: py, rules: table, workdir: work, envs: newEnvManager(py, work, hello, log)},
		log:     log,
	}
	t.Cleanup(rt.exec.shutdown)
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := rt.server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Close() })
	tok, _ := rtproto.Mint(secret, testUser, testSession, "", 5*time.Minute)
	return cs, tok, work
}

func resultOf(t *testing.T, out *mcp.CallToolResult) shared.ExecutionResult {
	t.Helper()
	if out.IsError {
		t.Fatalf("tool error: %+v", out.Content[0])
	}
	var res shared.ExecutionResult
	raw, _ := json.Marshal(out.StructuredContent)
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

func errText(out *mcp.CallToolResult) string {
	if len(out.Content) == 0 {
		return ""
	}
	if tc, ok := out.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

func TestDependenciesInstallIntoAgentVenv(t *testing.T) {
	wheels := t.TempDir()
	demoWheels(t, wheels)
	cs, tok, work := startRuntimeWithPackages(t, []string{"orqdemo", "orqhelper", "orqneedy", "orqtamper", "orqslip"}, wheels)

	// Agent A: newest orqdemo (1.0.0) plus its unconditional requirement
	// orqhelper; the marked requirements (extra, python_version) are skipped.
	start := time.Now()
	res := resultOf(t, callTool(t, cs, rtproto.ToolExecute, tok, rtproto.ExecuteArgs{
		Code: "import orqdemo\nreturn orqdemo.greet('a')", AllowedImports: []string{"orqdemo"},
		AgentID: "agentA", Dependencies: []string{"orqdemo"}}))
	if !res.Success || string(res.Output) != `"HELLO A"` {
		t.Fatalf("agent A: %+v", res)
	}
	t.Logf("first call with venv creation and 2 wheels: %v", time.Since(start))
	site, _ := filepath.Glob(filepath.Join(work, "venvs", "agentA", "lib", "python3*", "site-packages"))
	if len(site) != 1 {
		t.Fatalf("no venv site-packages under %s", work)
	}
	for _, f := range []string{"orqdemo/__init__.py", "orqhelper.py", "orqdemo-1.0.0.dist-info/RECORD", "orqdemo-1.0.0.dist-info/INSTALLER"} {
		if _, err := os.Stat(filepath.Join(site[0], f)); err != nil {
			t.Errorf("%s not installed: %v", f, err)
		}
	}
	// Later calls of A see the venv without naming dependencies again.
	start = time.Now()
	res = resultOf(t, callTool(t, cs, rtproto.ToolExecute, tok, rtproto.ExecuteArgs{
		Code: "import orqdemo\nreturn orqdemo.greet('b')", AllowedImports: []string{"orqdemo"}, AgentID: "agentA"}))
	if !res.Success || string(res.Output) != `"HELLO B"` {
		t.Fatalf("agent A again: %+v", res)
	}
	t.Logf("warm call in the venv: %v", time.Since(start))

	// Installed but not in allowed_imports: the runner refuses the import.
	res = resultOf(t, callTool(t, cs, rtproto.ToolExecute, tok, rtproto.ExecuteArgs{
		Code: "import orqdemo\nreturn 1", AgentID: "agentA", Dependencies: []string{"orqdemo"}}))
	if res.Success || res.ErrorKind != shared.KindValidation || !strings.Contains(res.Error, "orqdemo") {
		t.Fatalf("import without allowed_imports: %+v", res)
	}

	// Agent B does not see A's venv.
	res = resultOf(t, callTool(t, cs, rtproto.ToolExecute, tok, rtproto.ExecuteArgs{
		Code: "import orqdemo\nreturn 1", AllowedImports: []string{"orqdemo"}, AgentID: "agentB"}))
	if res.Success || !strings.Contains(res.Error, "orqdemo") {
		t.Fatalf("agent B imported agent A's package: %+v", res)
	}
	// A pinned older version for B, in B's own venv.
	res = resultOf(t, callTool(t, cs, rtproto.ToolExecute, tok, rtproto.ExecuteArgs{
		Code: "import orqdemo\nreturn orqdemo.greet('b')", AllowedImports: []string{"orqdemo"}, AgentID: "agentB", Dependencies: []string{"orqdemo==0.9.0"}}))
	if !res.Success || string(res.Output) != `"old"` {
		t.Fatalf("agent B pinned: %+v", res)
	}
	// ... and A still has 1.0.0; asking A for 0.9.0 now is refused.
	out := callTool(t, cs, rtproto.ToolExecute, tok, rtproto.ExecuteArgs{Code: "return 1", AgentID: "agentA", Dependencies: []string{"orqdemo==0.9.0"}})
	if !out.IsError || errClass(out) != classFailedPrecondition || !strings.Contains(errText(out), "already installed") {
		t.Fatalf("conflicting pin: %+v", out)
	}
}

func TestDependenciesFailClosed(t *testing.T) {
	wheels := t.TempDir()
	demoWheels(t, wheels)
	cs, tok, work := startRuntimeWithPackages(t, []string{"orqdemo", "orqhelper", "orqneedy", "orqtamper", "orqslip", "ghost"}, wheels)
	call := func(agent string, deps ...string) *mcp.CallToolResult {
		return callTool(t, cs, rtproto.ToolExecute, tok, rtproto.ExecuteArgs{Code: "return 1", AgentID: agent, Dependencies: deps})
	}
	// The refusals that must touch no file come first (a slice: in order).
	for _, c := range []struct {
		name, agent, dep, class, text string
		noFS                          bool
	}{
		{"not allowed", "a1", "requests", classPermissionDenied, `"requests" is not in the policy's allowed_packages`, true},
		{"range", "a2", "orqdemo>=1", classInvalidArgument, "no ranges", true},
		{"escape agent", "../escape", "orqdemo", classInvalidArgument, "agent_id", true},
		{"missing wheel", "a3", "ghost", classFailedPrecondition, "no pure-Python", false},
		{"missing version", "a4", "orqdemo==3.0", classFailedPrecondition, "have", false},
		{"requirement denied", "a5", "orqneedy", classPermissionDenied, `"forbiddenpkg"`, false},
		{"digest mismatch", "a6", "orqtamper", classFailedPrecondition, "digest does not match RECORD", false},
		{"zip slip", "a7", "orqslip", classFailedPrecondition, "unsafe member path", false},
	} {
		out := call(c.agent, c.dep)
		if !out.IsError || errClass(out) != c.class || !strings.Contains(errText(out), c.text) {
			t.Errorf("%s: want %s containing %q, got %+v", c.name, c.class, c.text, errText(out))
		}
		if c.noFS {
			if _, err := os.Stat(filepath.Join(work, "venvs")); err == nil {
				t.Errorf("%s: refused call created %s/venvs", c.name, work)
			}
			if _, err := os.Stat(filepath.Join(work, "agents", c.agent)); err == nil && c.agent != "../escape" {
				t.Errorf("%s: refused call created the agent directory", c.name)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(work, "evil.py")); err == nil {
		t.Fatal("zip slip wrote outside site-packages")
	}
	matches, _ := filepath.Glob(filepath.Join(work, "venvs", "*", "lib", "*", "site-packages", "orqtamper.py"))
	if len(matches) > 0 {
		t.Fatalf("a refused wheel left files: %v", matches)
	}

	// No package source configured: fail closed even for an allowed package.
	cs2, tok2, _ := startRuntimeWithPackages(t, []string{"orqdemo"}, "")
	out := callTool(t, cs2, rtproto.ToolExecute, tok2, rtproto.ExecuteArgs{Code: "return 1", Dependencies: []string{"orqdemo"}})
	if !out.IsError || errClass(out) != classFailedPrecondition || !strings.Contains(errText(out), "wheel_dir") {
		t.Fatalf("no wheel dir: %+v", errText(out))
	}
	// No allowed_packages at all: everything refused.
	cs3, tok3, _ := startRuntimeWithPackages(t, nil, wheels)
	out = callTool(t, cs3, rtproto.ToolExecute, tok3, rtproto.ExecuteArgs{Code: "return 1", Dependencies: []string{"orqdemo"}})
	if !out.IsError || errClass(out) != classPermissionDenied || !strings.Contains(errText(out), "allowed_packages is empty") {
		t.Fatalf("empty allowlist: %+v", errText(out))
	}
}

func TestWheelNames(t *testing.T) {
	for name, ok := range map[string]bool{
		"orqdemo-1.0-py3-none-any.whl":           true,
		"six-1.16.0-py2.py3-none-any.whl":        true,
		"orq_demo-1.0-1-py3-none-any.whl":        true,
		"numpy-1.26.4-cp311-cp311-manylinux.whl": false,
		"old-1.0-py2-none-any.whl":               false,
		"x-1.0-py3-abi3-any.whl":                 false,
		"x-1.0.tar.gz":                           false,
	} {
		if _, got := parseWheelName(name, ""); got != ok {
			t.Errorf("%s: got %v want %v", name, got, ok)
		}
	}
	// Native wheels, for CPython 3.11 on this architecture only.
	arch := wheelArch()
	for name, ok := range map[string]bool{
		"n-1.0-cp311-cp311-linux_" + arch + ".whl":                                     true,
		"n-1.0-cp311-cp311-manylinux_2_17_" + arch + ".manylinux2014_" + arch + ".whl": true,
		"n-1.0-cp39-abi3-manylinux2014_" + arch + ".whl":                               true,
		"n-1.0-py3-none-manylinux1_" + arch + ".whl":                                   true,
		"n-1.0-cp312-cp312-linux_" + arch + ".whl":                                     false,
		"n-1.0-cp312-abi3-linux_" + arch + ".whl":                                      false,
		"n-1.0-cp311-cp311-win_amd64.whl":                                              false,
		"n-1.0-cp311-cp311-macosx_11_0_arm64.whl":                                      false,
		"n-1.0-cp311-cp311-musllinux_1_1_" + arch + ".whl":                             false,
		"n-1.0-cp311-cp311-linux_riscv64.whl":                                          false,
		"n-1.0-cp311-cp311-manylinux_2_x_" + arch + ".whl":                             false,
		"n-1.0-pp310-pypy310_pp73-manylinux_2_17_" + arch + ".whl":                     false,
	} {
		w, got := parseWheelName(name, "cp311")
		if got != ok || !w.native {
			t.Errorf("%s: got %v (native %v) want %v", name, got, w.native, ok)
		}
		if _, got := parseWheelName(name, ""); got {
			t.Errorf("%s accepted without a native directory", name)
		}
	}
	// PEP 440 order, with the spec's own examples: a final release beats
	// its pre-releases and loses to its post-releases; pre-releases only
	// when nothing else is there.
	for _, c := range []struct {
		best, cand string
		want       bool
	}{
		{"1.9", "1.10", true},
		{"2.0", "1.99", false},
		{"1.0", "1.0.1", true},
		{"2.0", "2.0rc1", false},
		{"2.0rc1", "2.0", true},
		{"1.0", "1.0.post1", true},
		{"1.0a1", "1.0b2", true},
		{"1.0.dev4", "1.0a1", true},
		{"1.1", "2.0rc1", false}, // a final 1.1 beats a pre-release 2.0
		{"1!1.0", "2.0", false},  // epochs come first
		{"1.0", "not-a-version", false},
	} {
		if got := pickVersion(c.best, true, c.cand); got != c.want {
			t.Errorf("pickVersion(%q, %q) = %v, want %v", c.best, c.cand, got, c.want)
		}
	}
	if !sameVersion("1.0.0", "1.0") || sameVersion("1.0", "1.0.post1") {
		t.Error("sameVersion: 1.0.0 == 1.0 and 1.0 != 1.0.post1 under PEP 440")
	}
	for m, ok := range map[string]bool{"a/b.py": true, "../x": false, "/abs": false, "a/../b": false, "a\\b": false, "./a": false, "a//b": false} {
		if safeMember(m) != ok {
			t.Errorf("safeMember(%q) != %v", m, ok)
		}
	}
}

// nativeWheel writes wheeltest.NativeWheel into dir; it skips (loudly)
// where gcc or the Python headers are missing.
func nativeWheel(t *testing.T, dir string) wheeltest.Extension {
	t.Helper()
	ext, err := wheeltest.NativeWheel(t.TempDir(), dir)
	if err != nil {
		t.Skipf("SKIPPING: cannot build a C extension here: %v", err)
	}
	return ext
}

// A native wheel (a C extension the test compiles) is installed into the
// agent's directory of the native root, not the venv, and imports and
// runs under the seal; another agent does not see it; a runtime without a
// native directory refuses it with a message that says why.
func TestNativeWheel(t *testing.T) {
	wheels, native := t.TempDir(), t.TempDir()
	if err := os.Chmod(native, 0o755); err != nil {
		t.Fatal(err)
	}
	ext := nativeWheel(t, wheels)
	cs, tok, work := startRuntimeWithPackages(t, []string{"orqnative"}, wheels, native)
	res := resultOf(t, callTool(t, cs, rtproto.ToolExecute, tok, rtproto.ExecuteArgs{
		Code: "import orqnative\nreturn orqnative.add(40, 2)", AllowedImports: []string{"orqnative"},
		AgentID: "agentN", Dependencies: []string{"orqnative"}}))
	if !res.Success || string(res.Output) != "42" {
		t.Fatalf("native import: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(native, "agentN", ext.File)); err != nil {
		t.Errorf("the extension is not in the native directory: %v", err)
	}
	if m, _ := filepath.Glob(filepath.Join(work, "venvs", "agentN", "lib", "python3*", "site-packages", ext.File)); len(m) > 0 {
		t.Errorf("the extension landed in the venv: %v", m)
	}
	res = resultOf(t, callTool(t, cs, rtproto.ToolExecute, tok, rtproto.ExecuteArgs{
		Code: "import orqnative\nreturn 1", AllowedImports: []string{"orqnative"}, AgentID: "agentM"}))
	if res.Success {
		t.Errorf("agent M imported agent N's native package: %+v", res)
	}

	cs, tok, _ = startRuntimeWithPackages(t, []string{"orqnative"}, wheels)
	out := callTool(t, cs, rtproto.ToolExecute, tok, rtproto.ExecuteArgs{
		Code: "return 1", AgentID: "agentN", Dependencies: []string{"orqnative"}})
	if !out.IsError || !strings.Contains(errText(out), "no exec-allowed directory") {
		t.Errorf("native wheel without a native directory: %s", errText(out))
	}
}
