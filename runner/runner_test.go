package runner_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/validator"
)

const python = "/usr/bin/python3"

// run executes req with the real interpreter over the child protocol and
// returns the decoded response and what the child printed.
func run(t *testing.T, req runner.Request) (runner.Response, string, string) {
	t.Helper()
	if req.Rules == nil {
		req.Rules = validator.RulesJSON()
	}
	core := testCore(t)
	if core != nil {
		req.CoreFD = 4
	}
	data, err := req.Encode()
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	return runRawCore(t, data, core)
}

// testCore opens the C audit hook (forkcore.c built as a shared object)
// that ORQEST_FORKCORE names, for the child's fd 4; nil without it (the
// runner's Python hook then runs). ORQEST_NO_CORE=1 runs the Python hook.
func testCore(t *testing.T) *os.File {
	t.Helper()
	path := os.Getenv("ORQEST_FORKCORE")
	if path == "" || os.Getenv("ORQEST_NO_CORE") == "1" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("ORQEST_FORKCORE: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// runRaw is run with the request already encoded.
func runRaw(t *testing.T, data []byte) (runner.Response, string, string) {
	t.Helper()
	return runRawCore(t, data, nil)
}

// runRawCore is runRaw with core (if not nil) as the child's fd 4.
func runRawCore(t *testing.T, data []byte, core *os.File) (runner.Response, string, string) {
	t.Helper()
	if _, err := os.Stat(python); err != nil {
		t.Skipf("%s not available: %v", python, err)
	}
	argv := runner.Argv(python)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{}
	cmd.Dir = t.TempDir()
	cmd.Stdin = bytes.NewReader(data)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.ExtraFiles = []*os.File{pw}
	if core != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, core)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	raw, _ := io.ReadAll(pr)
	pr.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("python exited: %v\nstderr: %s", err, stderr.String())
	}
	resp, err := runner.ParseResponse(raw)
	if err != nil {
		t.Fatalf("%v (raw %q, stderr %s)", err, raw, stderr.String())
	}
	return resp, stdout.String(), stderr.String()
}

func wantOutput(t *testing.T, resp runner.Response, want string) {
	t.Helper()
	if !resp.Success {
		t.Fatalf("success=false: %s: %s", resp.ErrorKind, resp.Error)
	}
	var got, exp any
	if err := json.Unmarshal(resp.Output, &got); err != nil {
		t.Fatalf("output %q: %v", resp.Output, err)
	}
	if err := json.Unmarshal([]byte(want), &exp); err != nil {
		t.Fatal(err)
	}
	g, _ := json.Marshal(got)
	e, _ := json.Marshal(exp)
	if !bytes.Equal(g, e) {
		t.Fatalf("output = %s, want %s", g, e)
	}
}

func wantKind(t *testing.T, resp runner.Response, kind string) {
	t.Helper()
	if resp.Success || resp.ErrorKind != kind {
		t.Fatalf("success=%v kind=%q error=%q, want kind %q", resp.Success, resp.ErrorKind, resp.Error, kind)
	}
}

func TestProgramDefinesOnlyOrqNames(t *testing.T) {
	p := runner.Program()
	for _, s := range []string{"def _orq_check", "def _orq_execute", "def _orq_main"} {
		if !strings.Contains(p, s) {
			t.Errorf("program lacks %q", s)
		}
	}
	// Every top-level def in the runner is _orq_-prefixed.
	for _, line := range strings.Split(runner.Program(), "\n") {
		if strings.HasPrefix(line, "def ") && !strings.HasPrefix(line, "def _orq_") {
			t.Errorf("top-level definition without _orq_ prefix: %q", line)
		}
	}
}

func TestReturn(t *testing.T) {
	resp, _, _ := run(t, runner.Request{Code: "return 1+1"})
	wantOutput(t, resp, "2")
}

func TestReturnNoneAndEmptyBody(t *testing.T) {
	resp, _, _ := run(t, runner.Request{Code: "# nothing\n"})
	wantOutput(t, resp, "null")
}

func TestArgs(t *testing.T) {
	resp, _, _ := run(t, runner.Request{
		Code: "return {'sum': args['x'] + args['y'], 'name': args['n'].upper()}",
		Args: json.RawMessage(`{"x": 3, "y": 4, "n": "é"}`),
	})
	wantOutput(t, resp, `{"sum": 7, "name": "É"}`)
}

func TestStdoutAndStderrGoToRealFDs(t *testing.T) {
	resp, stdout, _ := run(t, runner.Request{Code: "print('hello', 42)\nreturn 'ok'"})
	wantOutput(t, resp, `"ok"`)
	if stdout != "hello 42\n" {
		t.Fatalf("stdout = %q", stdout)
	}
}

func TestRuntimeErrorTraceback(t *testing.T) {
	code := "x = 1\ny = args['missing']\nreturn y"
	resp, _, _ := run(t, runner.Request{Code: code})
	wantKind(t, resp, "runtime")
	for _, s := range []string{"Traceback (most recent call last)", `File "<sandbox>", line 2`, "y = args['missing']", "KeyError: 'missing'"} {
		if !strings.Contains(resp.Error, s) {
			t.Errorf("traceback lacks %q:\n%s", s, resp.Error)
		}
	}
	// Only user frames: nothing from the runner.
	for _, s := range []string{"_orq_", "runner", "<string>"} {
		if strings.Contains(resp.Error, s) {
			t.Errorf("traceback leaks runner frame %q:\n%s", s, resp.Error)
		}
	}
}

func TestTracebackLineNumbersOfNestedCalls(t *testing.T) {
	code := "def f(n):\n    return 10 // n\n\nreturn f(0)\n"
	resp, _, _ := run(t, runner.Request{Code: code})
	wantKind(t, resp, "runtime")
	for _, s := range []string{`line 4, in <module>`, `line 2, in f`, "ZeroDivisionError"} {
		if !strings.Contains(resp.Error, s) {
			t.Errorf("traceback lacks %q:\n%s", s, resp.Error)
		}
	}
}

func TestMultilineStringNotReindented(t *testing.T) {
	code := "s = '''a\nb'''\nreturn s"
	resp, _, _ := run(t, runner.Request{Code: code})
	wantOutput(t, resp, `"a\nb"`)
}

func TestRecursionErrorIsRuntime(t *testing.T) {
	resp, _, _ := run(t, runner.Request{Code: "def f(n):\n    return f(n+1)\nreturn f(0)"})
	wantKind(t, resp, "runtime")
	if !strings.Contains(resp.Error, "RecursionError") {
		t.Fatalf("error: %s", resp.Error)
	}
}

func TestNotSerializable(t *testing.T) {
	resp, _, _ := run(t, runner.Request{Code: "return {1, 2}"})
	wantKind(t, resp, "not_serializable")
	resp, _, _ = run(t, runner.Request{Code: "return float('nan')"})
	wantKind(t, resp, "not_serializable")
}

func TestOutputLimit(t *testing.T) {
	resp, _, _ := run(t, runner.Request{Code: "return 'x' * 1000", MaxOutputBytes: 100})
	wantKind(t, resp, "output_limit")
	resp, _, _ = run(t, runner.Request{Code: "return 'x' * 10", MaxOutputBytes: 100})
	wantOutput(t, resp, `"xxxxxxxxxx"`)
}

func TestImportAllowedAtRuntime(t *testing.T) {
	resp, _, _ := run(t, runner.Request{
		Code:           "import re\nreturn re.findall(r'\\d+', args['text'])",
		Args:           json.RawMessage(`{"text": "a1 b22 c333"}`),
		AllowedImports: []string{"re"},
	})
	wantOutput(t, resp, `["1", "22", "333"]`)
}

func TestFromImportAllowed(t *testing.T) {
	resp, _, _ := run(t, runner.Request{
		Code:           "from math import sqrt\nimport json\nreturn json.dumps([sqrt(16)])",
		AllowedImports: []string{"math", "json"},
	})
	wantOutput(t, resp, `"[4.0]"`)
}

// rulesWith returns the real rules table with safe_builtins replaced.
func rulesWith(t *testing.T, safe ...string) json.RawMessage {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(validator.RulesJSON(), &m); err != nil {
		t.Fatal(err)
	}
	if safe == nil {
		safe = []string{}
	}
	m["safe_builtins"] = safe
	b, _ := json.Marshal(m)
	return b
}

// pyUnit runs snippet after loading the program as a library (its __name__
// is not "__main__", so _orq_main does not run) and returns stdout.
func pyUnit(t *testing.T, snippet string) string {
	t.Helper()
	if _, err := os.Stat(python); err != nil {
		t.Skipf("%s not available: %v", python, err)
	}
	f := t.TempDir() + "/program.py"
	if err := os.WriteFile(f, []byte(runner.Program()), 0o600); err != nil {
		t.Fatal(err)
	}
	src := "ns = {'__name__': 'orq_test'}\nexec(open(" + strconvQuote(f) + ").read(), ns)\n" + snippet
	out, err := exec.Command(python, "-I", "-S", "-B", "-c", src).CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	return string(out)
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// The shim is exercised directly: the static checkers reject the same
// imports first, so through Execute it is a second line that rarely fires.
func TestImportShim(t *testing.T) {
	out := pyUnit(t, `
shim, real, allowed = ns['_orq_make_import'](['re', 'json'])
def tryimp(*a, **k):
    try:
        m = shim(*a, **k)
        return 'ok:' + m.__name__
    except ImportError as e:
        return 'denied'
print(tryimp('re'))
print(tryimp('json.decoder', None, None, ('JSONDecoder',), 0))
print(tryimp('os'))
print(tryimp('os.path'))
print(tryimp('x', None, None, ('y',), 1))
print(tryimp('re', None, None, (), 1))
m = shim('re')
print(hasattr(m, 'findall'), hasattr(m, 'enum'), hasattr(m, 'functools'), hasattr(m, '_compiler'))
j = shim('json')
print(hasattr(j, 'decoder'), hasattr(j.decoder, 're'), hasattr(j.decoder, 'scanner'))
print(shim.__globals__ is ns, sorted(shim.__globals__))
`)
	want := "ok:re\nok:json.decoder\ndenied\ndenied\ndenied\ndenied\nTrue False False False\nTrue True True\nFalse ['__builtins__']\n"
	if out != want {
		t.Fatalf("got:\n%s\nwant:\n%s", out, want)
	}
}

func TestImportDeniedThroughExecute(t *testing.T) {
	for _, code := range []string{
		"import os\nreturn 1",
		"from os import path\nreturn 1",
		"import os.path\nreturn 1",
		"from . import x\nreturn 1",
	} {
		resp, _, _ := run(t, runner.Request{Code: code, AllowedImports: []string{"re", "x"}})
		// The real checker rejects these statically (validation); were it
		// to miss one, the shim raises ImportError (runtime).
		if resp.Success {
			t.Fatalf("%q: import succeeded", code)
		}
		if resp.ErrorKind == "runtime" && !strings.Contains(resp.Error, "ImportError") {
			t.Fatalf("%q: %s", code, resp.Error)
		}
	}
}

func TestAllowedModuleViewHidesDisallowedSubmodules(t *testing.T) {
	// re imports enum and functools, which import sys: the view the shim
	// hands out drops modules that are not allowed themselves (read through
	// an alias the static not-in-surface rule does not follow).
	resp, _, _ := run(t, runner.Request{
		Code:           "import re\nm = re\ntry:\n    m.enum\n    return 'reachable'\nexcept Exception:\n    return 'hidden'",
		AllowedImports: []string{"re"},
	})
	wantOutput(t, resp, `"hidden"`)
}

func TestCuratedBuiltinsOnly(t *testing.T) {
	// len is left out of the curated list: a NameError at runtime, proving
	// __builtins__ is built from rules["safe_builtins"] and nothing else.
	resp, _, _ := run(t, runner.Request{Code: "return len('abc')", Rules: rulesWith(t, "str")})
	wantKind(t, resp, "runtime")
	if !strings.Contains(resp.Error, "NameError") {
		t.Fatalf("error: %s", resp.Error)
	}
	resp, _, _ = run(t, runner.Request{Code: "return len('abc')", Rules: rulesWith(t, "len")})
	wantOutput(t, resp, "3")
}

func TestUserGlobalsAreFresh(t *testing.T) {
	// The user's globals hold only __builtins__ and __name__; no runner name
	// (_orq_execute, _orq_check, json, ...) resolves.
	for _, name := range []string{"_orq_execute", "_orq_check", "_orq_main", "json", "sys", "os"} {
		resp, _, _ := run(t, runner.Request{Code: "return " + name})
		if resp.Success || (resp.ErrorKind == "runtime" && !strings.Contains(resp.Error, "NameError")) {
			t.Errorf("%s reachable from user code: %+v", name, resp)
		}
	}
}

func TestMemoryErrorUnderAddressSpaceLimit(t *testing.T) {
	resp, _, _ := run(t, runner.Request{Code: "x = ' ' * (2*1024**3)\nreturn len(x)", MemoryMB: 64})
	wantKind(t, resp, "memory")
	resp, _, _ = run(t, runner.Request{Code: "x = bytearray(2*1024**3)\nreturn len(x)", MemoryMB: 64,
		Rules: rulesWith(t, "bytearray", "len")})
	wantKind(t, resp, "memory")
}

func TestNormalCodeWorksAt64MB(t *testing.T) {
	resp, _, _ := run(t, runner.Request{
		Code:           "import re, json\nreturn len(json.dumps([re.findall(r'\\w+', 'a b c')] * 1000))",
		AllowedImports: []string{"re", "json"}, MemoryMB: 64,
	})
	if !resp.Success {
		t.Fatalf("%s: %s", resp.ErrorKind, resp.Error)
	}
}

func TestBadArgsRejectedInGo(t *testing.T) {
	for _, a := range []string{`[1]`, `1`, `{"a":`, `"x"`} {
		if _, err := (runner.Request{Code: "return 1", Args: json.RawMessage(a)}).Encode(); err == nil {
			t.Errorf("args %s accepted", a)
		}
	}
}

func TestResponseApply(t *testing.T) {
	var res shared.ExecutionResult
	if err := (runner.Response{ErrorKind: "internal", Error: "x"}).Apply(&res); err == nil {
		t.Fatal("internal kind not turned into an error")
	}
	if err := (runner.Response{Success: true, Output: json.RawMessage("2")}).Apply(&res); err != nil || !res.Success || string(res.Output) != "2" {
		t.Fatalf("apply: %v %+v", err, res)
	}
}

func TestTruncateUTF8(t *testing.T) {
	if got := runner.TruncateUTF8("aé", 2); got != "a" {
		t.Fatalf("got %q", got)
	}
	if got := runner.TruncateUTF8("abc", 2); got != "ab" {
		t.Fatalf("got %q", got)
	}
}

// runDriver runs the runner's definitions (without its __main__ block)
// followed by driver in one interpreter and returns what it printed.
func runDriver(t *testing.T, driver string) string {
	t.Helper()
	if _, err := os.Stat(python); err != nil {
		t.Skipf("%s not available: %v", python, err)
	}
	prog := runner.Program()
	i := strings.Index(prog, "\nif __name__ == \"__main__\":")
	if i < 0 {
		t.Fatal("runner layout changed: no __main__ block")
	}
	argv := runner.ArgvFor(python, prog[:i]+driver)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// The runner keeps bodies its checker accepted, compiled (a fork-server
// zygote warms them; tier 0 reuses them): a hit must be for the same body,
// the same allowlist and the same rules table, never a verdict given under
// a more generous one. Several executions in one interpreter.
func TestAcceptedBodiesKeyedByAllowlistAndRules(t *testing.T) {
	// The table goes in a file: with it inline the program would pass
	// the kernel's 128 KB limit on one argument.
	path := filepath.Join(t.TempDir(), "rules.json")
	if err := os.WriteFile(path, validator.RulesJSON(), 0o600); err != nil {
		t.Fatal(err)
	}
	pathLit, _ := json.Marshal(path)
	out := runDriver(t, "\nRULES = open("+string(pathLit)+").read()\n"+`
import json as _j
R = _j.loads(RULES)
LAX = {"safe_builtins": ["len", "True", "False", "None"]}
def ex(code, allowed, rules):
    r = _j.loads(_orq_execute({"code": code, "args": {}, "allowed_imports": allowed, "rules": rules}))
    return r.get("error_kind") or "ok"
imp = "import json\nreturn 1"
ref = "return len(globals())"
print(_j.dumps([
    ex(imp, ["json"], R), ex(imp, ["json"], R), ex(imp, [], R), ex(imp, ["json", "re"], R),
    ex(ref, [], LAX), ex(ref, [], LAX), ex(ref, [], R), ex(ref, [], LAX),
]))
`)
	var kinds []string
	if err := json.Unmarshal([]byte(out), &kinds); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// globals is not a safe builtin under LAX: the body runs and fails.
	want := []string{"ok", "ok", "validation", "ok", "runtime", "runtime", "validation", "runtime"}
	if strings.Join(kinds, ",") != strings.Join(want, ",") {
		t.Errorf("kinds = %v, want %v", kinds, want)
	}
}

// A process that runs several executions (tier 0) gives each its own
// builtins dict and import shim, even where a zygote-style prepared
// environment exists (only a one-shot fork-server child uses that as is).
func TestBuiltinsFreshPerExecutionInOneProcess(t *testing.T) {
	got := runDriver(t, `
import json as _j
LAX = {"safe_builtins": ["True", "False", "None"]}
def _orq_check(code, allowed_imports, rules, classes=False):  # the validator out of the way
    return []
_orq_env([], LAX, keep=True)
def ex(code):
    r = _j.loads(_orq_execute({"code": code, "args": {}, "allowed_imports": [], "rules": LAX}))
    return r.get("output") if r.get("success") else r.get("error")
print(_j.dumps([
    ex("def f(): pass\nf.__builtins__['LEAK'] = 1\nreturn 'LEAK' in f.__builtins__"),
    ex("def f(): pass\nreturn 'LEAK' in f.__builtins__"),
]))
`)
	if got != "[true, false]" {
		t.Errorf("got %s, want [true, false] (the second execution must not see the first one's builtins)", got)
	}
}

// TestProgramFitsOneArgument: the program travels as one argv string
// (ProgramArg), and Linux refuses a single argument longer than
// MAX_ARG_STRLEN (32 pages, 128 KB) with E2BIG; every tier would fail to
// start. The encoded argument decodes back to the program, and a program
// whose plain text would not fit one argument still runs through it.
func TestProgramFitsOneArgument(t *testing.T) {
	const maxArgStrlen = 32 * 4096
	arg := runner.ProgramArg(runner.Program())
	if n := len(arg); n > maxArgStrlen/2 {
		t.Fatalf("runner.ProgramArg(runner.Program()) is %d bytes: within half of the kernel's %d-byte limit on one argument; pass it another way (a sealed memfd) before it grows more", n, maxArgStrlen)
	}
	if strings.ContainsRune(arg, 0) {
		t.Fatal("the program argument holds a NUL byte: exec would cut it there")
	}
	if _, err := os.Stat(python); err != nil {
		t.Skipf("%s not available: %v", python, err)
	}
	// A program with 200 KB of padding: more than one plain argument holds.
	big := "_orq_pad = '" + strings.Repeat("x", 200<<10) + "'\nprint(len(_orq_pad), __import__('sys').argv[1:])\n"
	out, err := exec.Command(python, runner.ArgvFor(python, big, "forkserver")[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("a 200 KB program through ProgramArg: %v: %s", err, out)
	}
	if got, want := strings.TrimSpace(string(out)), fmt.Sprintf("%d ['forkserver']", 200<<10); got != want {
		t.Fatalf("got %q, want %q (the program decoded, its argument taken out of sys.argv)", got, want)
	}
}

// TestAuditStateNotAModuleGlobal: after an execution, no module global of
// the runner holds the audit hook's state (a dict with "armed"): code that
// reaches the runner's globals cannot switch the hook off by writing one.
func TestAuditStateNotAModuleGlobal(t *testing.T) {
	out := runDriver(t, `
_orq_execute({"code": "return 1", "args": {}, "allowed_imports": [], "rules": {}})
print(sorted(k for k, v in list(globals().items()) if isinstance(v, dict) and "armed" in v))
`)
	if out != "[]" {
		t.Fatalf("module globals holding the audit state: %s", out)
	}
}
