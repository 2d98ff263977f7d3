package host

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/plugin"
)

// pluginDir holds the real subprocess plugin, built by TestMain, and
// inprocessDir the in-process one when it builds here (inprocessSkipMsg
// says why not).
var (
	pluginDir        string
	inprocessDir     string
	pluginSkipMsg    string
	inprocessSkipMsg string
)

// testTmpDir is the package's test directory (TestMain removes it): the
// plugins the tests build go there.
var testTmpDir string

func TestMain(m *testing.M) {
	if onlyFuzzing() {
		os.Exit(m.Run()) // the fuzz targets launch no plugin
	}
	dir, err := os.MkdirTemp("", "orqest-host-test-")
	if err != nil {
		panic(err)
	}
	testTmpDir = dir // the test plugins built on demand go below it, removed with it
	out := filepath.Join(dir, plugin.PluginPrefix+"subprocess")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/orqest-sandbox-plugin-subprocess")
	cmd.Dir = ".."
	if b, err := cmd.CombinedOutput(); err != nil {
		pluginSkipMsg = fmt.Sprintf("SKIP: the subprocess plugin does not build yet (go build ./cmd/orqest-sandbox-plugin-subprocess: %v)\n%s", err, b)
	} else {
		pluginDir = dir
		// The in-process plugin goes in a directory of its own: the
		// catalog tests expect pluginDir to hold subprocess alone.
		inprocessDir = filepath.Join(dir, "inprocess")
		in := exec.Command("go", "build", "-o", filepath.Join(inprocessDir, plugin.PluginPrefix+"inprocess"), "./cmd/orqest-sandbox-plugin-inprocess")
		in.Dir = ".."
		if b, err := in.CombinedOutput(); err != nil {
			inprocessSkipMsg = fmt.Sprintf("SKIPPING: the in-process plugin does not build here (cgo and libpython3.11-dev): %v\n%s", err, b)
		}
		// As an installation would: the package's examples load the
		// embedded default policy, which finds the plugin here.
		os.Setenv(PluginDirEnv, dir)
	}
	code := m.Run()
	CleanupClients()
	os.RemoveAll(dir)
	os.Exit(code)
}

// onlyFuzzing reports whether this run executes a fuzz target and no
// test: a fuzzing worker, or -fuzz with -run '^$'.
func onlyFuzzing() bool {
	flag.Parse()
	get := func(name string) string {
		if f := flag.Lookup(name); f != nil {
			return f.Value.String()
		}
		return ""
	}
	return get("test.fuzzworker") == "true" || (get("test.fuzz") != "" && get("test.run") == "^$")
}

// buildTestPlugin builds the test backend host/testdata/<pkg> as the
// plugin called name into a new directory below tb's temporary one and
// returns that directory (for WithPluginDirs).
func buildTestPlugin(tb testing.TB, name, pkg string) string {
	tb.Helper()
	dir := tb.TempDir()
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, plugin.PluginPrefix+name), "./host/testdata/"+pkg)
	cmd.Dir = ".."
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build the %s test plugin: %v\n%s", name, err, b)
	}
	return dir
}

func needPlugin(t *testing.T) {
	t.Helper()
	if pluginDir == "" {
		t.Skip(pluginSkipMsg)
	}
}

// newHost loads src (or the embedded default when src is "") with the real
// plugin directory.
func newHost(t *testing.T, src string) *Host {
	t.Helper()
	needPlugin(t)
	var cfg *Config
	if src == "" {
		cfg = DefaultConfig()
	} else {
		var diags = func() error {
			c, d := ParseConfig(filepath.Join(t.TempDir(), "config.hcl"), []byte(src))
			cfg = c
			if d.HasErrors() {
				return &DiagnosticsError{Diagnostics: d, Files: c.Files}
			}
			return nil
		}()
		if diags != nil {
			t.Fatal(render(t, diags))
		}
	}
	h, err := Load(context.Background(), cfg, WithPluginDirs(pluginDir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func defaultSandbox(t *testing.T, h *Host) *Sandbox {
	t.Helper()
	sb, err := h.Sandbox(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

func TestExecuteOnEmbeddedDefault(t *testing.T) {
	h := newHost(t, "")
	sb := defaultSandbox(t, h)
	if sb.Name() != "subprocess" || sb.PluginPID() != 0 {
		t.Fatalf("sandbox %q pid %d before first use", sb.Name(), sb.PluginPID())
	}
	ctx := context.Background()
	res, err := sb.Execute(ctx, shared.ExecuteRequest{Code: "return 1+1"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Success || string(res.Output) != "2" {
		t.Fatalf("result %+v", res)
	}
	if res.Limits.TimeoutMS != 5000 || res.Limits.MemoryMB != 128 {
		t.Errorf("limits %+v", res.Limits)
	}
	res, err = sb.Execute(ctx, shared.ExecuteRequest{
		Code:           "import re\nreturn re.findall(r'\\d+', args['text'])",
		Args:           json.RawMessage(`{"text":"a1 b22 c333"}`),
		AllowedImports: []string{"re"},
	})
	if err != nil || !res.Success || string(res.Output) != `["1","22","333"]` {
		t.Fatalf("re example: %+v %v", res, err)
	}
	info, err := sb.Info(ctx)
	if err != nil || info.Name != "subprocess" || info.Tier != 1 {
		t.Errorf("info %+v %v", info, err)
	}
	// Default deny: the plugin (and the host once its validator lands)
	// rejects an import the policy does not allow.
	res, err = sb.Execute(ctx, shared.ExecuteRequest{Code: "import re\nreturn 1"})
	if err != nil || res.Success || res.ErrorKind != shared.KindValidation {
		t.Errorf("denied import: %+v %v", res, err)
	}
	// Size and argument checks happen in the host.
	if _, err := sb.Execute(ctx, shared.ExecuteRequest{Code: strings.Repeat("x", shared.DefaultMaxCodeBytes+1)}); !errors.Is(err, shared.ErrInvalidArgument) {
		t.Errorf("oversize code: %v", err)
	}
	if _, err := sb.Execute(ctx, shared.ExecuteRequest{Code: "return 1", Args: json.RawMessage(`[1]`)}); !errors.Is(err, shared.ErrInvalidArgument) {
		t.Errorf("non-object args: %v", err)
	}
	if sb.Launches() != 1 {
		t.Errorf("launches %d", sb.Launches())
	}
}

func TestBackendConfigAgainstRealPlugin(t *testing.T) {
	h := newHost(t, "sandbox \"t\" {\n  plugin = \"subprocess\"\n  config {\n    mode = \"spawn\"\n    colour = \"red\"\n  }\n}\n")
	err := h.StartAll(context.Background())
	out := render(t, err)
	if !strings.Contains(out, "config.hcl:5:5: Error: Unsupported argument") || !strings.Contains(out, `Plugin "subprocess" accepts: python (string), mode (string)`) {
		t.Errorf("diagnostic:\n%s", out)
	}
	sb := defaultSandbox(t, h)
	if sb.PluginPID() != 0 {
		t.Error("a plugin with a rejected config block is left running")
	}

	h = newHost(t, "sandbox \"t\" {\n  plugin = \"subprocess\"\n  config {\n    mode = \"spawn\"\n  }\n}\n")
	if err := h.StartAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if pid := defaultSandbox(t, h).PluginPID(); pid == 0 {
		t.Error("StartAll did not launch")
	}
}

func TestRunInSandbox(t *testing.T) {
	h := newHost(t, "policy \"default\" {\n  allowed_imports = [\"math\"]\n}\nsandbox \"s\" { plugin = \"subprocess\" }\n")
	sb := defaultSandbox(t, h)
	ctx := context.Background()

	out, err := RunInSandbox(ctx, sb, "def add(a, b):\n    return a + b", RunOptions{ReturnExpression: "add(2, 3)"})
	if err != nil || string(out) != "5" {
		t.Fatalf("add: %s %v", out, err)
	}
	out, err = RunInSandbox(ctx, sb, "import math\nx = math.sqrt(args['n'])", RunOptions{ReturnExpression: "x", Args: map[string]any{"n": 16}})
	if err != nil || string(out) != "4.0" {
		t.Fatalf("policy import + args: %s %v", out, err)
	}

	// Execution failure.
	_, err = RunInSandbox(ctx, sb, "raise ValueError('boom')", RunOptions{})
	var re *RunError
	if !errors.As(err, &re) || re.Stage != StageExecution || !strings.Contains(err.Error(), "boom") || re.CodeSnippet != "raise ValueError('boom')" {
		t.Fatalf("runtime error: %#v", err)
	}
	var ee *ExecutionError
	if !errors.As(err, &ee) || ee.Result.ErrorKind != shared.KindRuntime {
		t.Errorf("underlying: %#v", re.Err)
	}

	// Validation failure (the plugin rejects it even if the host validator
	// does not yet).
	_, err = RunInSandbox(ctx, sb, "import os", RunOptions{ReturnExpression: "os.getcwd()"})
	if !errors.As(err, &re) || re.Stage != StageValidation || !strings.HasPrefix(err.Error(), "sandbox validation failed: ") {
		t.Fatalf("validation: %v", err)
	}
	if !errors.Is(err, shared.ErrValidation) {
		t.Errorf("errors.Is(ErrValidation) false for %v", err)
	}
	if !strings.Contains(re.CodeSnippet, "return os.getcwd()") {
		t.Errorf("snippet %q", re.CodeSnippet)
	}

	// The timeout message callers match on.
	ok, out, msg := RunInSandboxSafe(ctx, sb, "while True: pass", RunOptions{Timeout: 500 * time.Millisecond})
	if ok || out != nil || msg != "sandbox execution failed: sandbox execution timed out after 0.50s" {
		t.Errorf("safe timeout: %v %s %q", ok, out, msg)
	}
	ok, out, msg = RunInSandboxSafe(ctx, sb, "", RunOptions{ReturnExpression: "[1, 'a']"})
	if !ok || string(out) != `[1,"a"]` || msg != "" {
		t.Errorf("safe ok: %v %s %q", ok, out, msg)
	}

	// Infrastructure failure: a closed host.
	h.Close()
	_, err = RunInSandbox(ctx, sb, "return 1", RunOptions{})
	if !errors.As(err, &re) || re.Stage != StageInfrastructure {
		t.Errorf("closed host: %v", err)
	}
	if len(Snippet(strings.Repeat("é", 300))) != 200*2+len("…") {
		t.Error("snippet length")
	}
}

func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// A zombie is dead for our purposes.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// waitDead waits up to 10 s for pid to be gone.
func waitDead(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); alive(pid); {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still alive", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// childrenOf lists the live children of pid.
func childrenOf(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 2 && f[2] == strconv.Itoa(pid) && alive(c) {
			out = append(out, c)
		}
	}
	return out
}

// pluginProcesses lists live processes running the test's plugin binary.
func pluginProcesses(t *testing.T) []int {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink("/proc/" + e.Name() + "/exe")
		if err == nil && strings.HasPrefix(exe, pluginDir) && alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

func TestRelaunchAfterKillBetweenCalls(t *testing.T) {
	h := newHost(t, "")
	sb := defaultSandbox(t, h)
	ctx := context.Background()
	if _, err := sb.Execute(ctx, shared.ExecuteRequest{Code: "return 1"}); err != nil {
		t.Fatal(err)
	}
	pid := sb.PluginPID()
	if !alive(pid) {
		t.Fatalf("plugin pid %d not alive", pid)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitDead(t, pid)
	res, err := sb.Execute(ctx, shared.ExecuteRequest{Code: "return 2"})
	if err != nil || !res.Success || string(res.Output) != "2" {
		t.Fatalf("after kill: %+v %v", res, err)
	}
	if sb.Launches() != 2 {
		t.Errorf("launches = %d, want 2", sb.Launches())
	}
	name := sb.Name()
	if l, r := testutil.ToFloat64(h.metrics.launches.WithLabelValues(name, "subprocess")), testutil.ToFloat64(h.metrics.relaunches.WithLabelValues(name, "subprocess")); l != 2 || r != 1 {
		t.Errorf("metrics: %v launches, %v relaunches; want 2 and 1", l, r)
	}
	if p2 := sb.PluginPID(); p2 == pid || !alive(p2) {
		t.Errorf("new pid %d (old %d)", p2, pid)
	}
	h.Close()
	if ps := pluginProcesses(t); len(ps) != 0 {
		t.Errorf("plugin processes left after Close: %v", ps)
	}
}

func TestKillDuringCall(t *testing.T) {
	h := newHost(t, "")
	sb := defaultSandbox(t, h)
	ctx := context.Background()
	if err := sb.Start(ctx); err != nil {
		t.Fatal(err)
	}
	pid := sb.PluginPID()
	// The code says when it runs (its first line arrives streamed, before
	// the loop); the plugin is killed then, mid-call.
	running := make(chan struct{})
	var once sync.Once
	onChunk := func(shared.OutputChunk) { once.Do(func() { close(running) }) }
	children := make(chan []int, 1)
	killed := make(chan time.Time, 1)
	go func() {
		<-running
		children <- childrenOf(pid) // the python running the loop
		killed <- time.Now()
		syscall.Kill(pid, syscall.SIGKILL)
	}()
	res, err := sb.ExecuteStream(ctx, shared.ExecuteRequest{Code: "print('looping', flush=True)\nwhile True: pass", Timeout: 5 * time.Second}, onChunk)
	if !errors.Is(err, shared.ErrPluginShutdown) {
		t.Fatalf("want ErrPluginShutdown, got %+v %v", res, err)
	}
	var at time.Time
	select {
	case at = <-killed:
	default:
		t.Fatal("the call ended before its code ran")
	}
	if d := time.Since(at); d > 3*time.Second {
		t.Errorf("the failed call took %v after the kill", d)
	}
	kids := <-children
	if len(kids) == 0 {
		t.Error("the plugin had no child process during the call")
	}
	for _, k := range kids {
		waitDead(t, k) // the child dies with its plugin
	}
	res, err = sb.Execute(ctx, shared.ExecuteRequest{Code: "return 'again'"})
	if err != nil || string(res.Output) != `"again"` {
		t.Fatalf("next call: %+v %v", res, err)
	}
	// Validate relaunches too, and its error class survives.
	if err := sb.Validate(ctx, "return 1"); err != nil {
		t.Errorf("validate: %v", err)
	}
	if err := sb.Validate(ctx, "import os"); !errors.Is(err, shared.ErrValidation) {
		t.Errorf("validate import os: %v", err)
	}
	h.Close()
	if ps := pluginProcesses(t); len(ps) != 0 {
		t.Errorf("plugin processes left after Close: %v", ps)
	}
	if _, err := sb.Execute(ctx, shared.ExecuteRequest{Code: "return 1"}); err == nil {
		t.Error("Execute after Close succeeded")
	}
}

func TestSandboxLookup(t *testing.T) {
	h := newHost(t, goodConfigNoDir)
	if _, err := h.Sandbox(context.Background(), "nope"); !errors.Is(err, shared.ErrNotFound) {
		t.Errorf("unknown sandbox: %v", err)
	}
	sb, err := h.Sandbox(context.Background(), "")
	if err != nil || sb.Name() != "tier1" {
		t.Fatalf("default: %v %v", sb, err)
	}
	if got := sb.AllowedImports("json", "re"); strings.Join(got, ",") != "json,math,re" {
		t.Errorf("allowed imports %v", got)
	}
	if names := h.SandboxNames(); strings.Join(names, ",") != "tier1,other" {
		t.Errorf("names %v", names)
	}
	list := h.Catalog().List()
	if len(list) == 0 || list[0].Name != "subprocess" || len(list[0].SHA256) != 64 {
		t.Errorf("catalog %+v", list)
	}
	info, err := h.ProbePlugin(context.Background(), "subprocess")
	if err != nil || info.Name != "subprocess" {
		t.Errorf("probe %+v %v", info, err)
	}
}

var goodConfigNoDir = strings.Replace(goodConfig, `plugin_dir      = "bin"`, "", 1)
