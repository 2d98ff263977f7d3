package pyproc_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orqest/sandbox/internal/pyproc"
	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/validator"
)

// startNotebook starts a sealed notebook (every layer this machine has) on
// the real rules table, with the C hook when ORQEST_FORKCORE names it (as
// the agents run theirs).
func startNotebook(t *testing.T, classes bool) *pyproc.Notebook {
	t.Helper()
	ctx := context.Background()
	s, err := pyproc.Probe(ctx, runner.Argv(python), nil, "", nil)
	if err != nil {
		t.Skip(err)
	}
	var core []byte
	if os.Getenv("ORQEST_FORKCORE") != "" {
		core = forkCore(t)
	}
	nb, err := pyproc.StartNotebook(ctx, runner.Argv(python), runner.Request{
		Rules: json.RawMessage(validator.RulesJSON()), Seal: s.Seal(nil), Classes: classes,
	}, pyproc.NotebookOptions{Dir: t.TempDir(), Stderr: os.Stderr, Core: core})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nb.Close)
	return nb
}

func cell(code string, imports ...string) pyproc.Job {
	return pyproc.Job{
		Request: runner.Request{Code: code, AllowedImports: imports},
		Limits:  shared.Resolved{Timeout: 5 * time.Second, MemoryMB: 256, MaxOutputBytes: 1 << 16},
	}
}

func runCell(t *testing.T, nb *pyproc.Notebook, j pyproc.Job) shared.ExecutionResult {
	t.Helper()
	res, lost, err := nb.Run(context.Background(), j)
	if err != nil {
		t.Fatalf("%q: %v", j.Request.Code, err)
	}
	if lost {
		t.Fatalf("%q: state lost: %+v", j.Request.Code, res)
	}
	return res
}

// Globals persist across calls: assignments, augmented assignments, loop
// variables, imports, functions (which see later globals and run with the
// current call's builtins), and each call's stdout is its own.
func TestNotebookState(t *testing.T) {
	nb := startNotebook(t, true)
	runCell(t, nb, cell("counter = 41\nprint('one')"))
	res := runCell(t, nb, cell("counter += 1\nprint('two')"))
	if !res.Success || res.Stdout != "two\n" {
		t.Fatalf("call 2: %+v", res)
	}
	res = runCell(t, nb, cell("return counter"))
	if !res.Success || string(res.Output) != "42" || res.Stdout != "" {
		t.Fatalf("call 3: %+v", res)
	}
	j := cell("import math\ndef area(r):\n    return math.pi * r * r * scale\nfor i in range(3):\n    pass\nclass P:\n    def __init__(self):\n        self.n = 1\np = P()", "math")
	j.Request.Classes = true
	if res := runCell(t, nb, j); !res.Success {
		t.Fatalf("defining: %+v", res)
	}
	res = runCell(t, nb, cell("scale = 2\np.n += i\nreturn [round(area(1), 3), p.n, [x for x in range(2)]]"))
	if !res.Success || string(res.Output) != "[6.283,3,[0,1]]" && string(res.Output) != "[6.283, 3, [0, 1]]" {
		t.Fatalf("functions, classes and loops across calls: %+v", res)
	}
	// args stays the call's own.
	res = runCell(t, nb, pyproc.Job{Request: runner.Request{Code: "return args['v'] + counter", Args: json.RawMessage(`{"v": 1}`)}, Limits: shared.Resolved{Timeout: 5 * time.Second, MemoryMB: 256, MaxOutputBytes: 1 << 16}})
	if string(res.Output) != "43" {
		t.Fatalf("args: %+v", res)
	}
	// The checker runs on every call: a rejected body changes nothing.
	res = runCell(t, nb, cell("counter = 0\n__import__('os')"))
	if res.Success || res.ErrorKind != shared.KindValidation {
		t.Fatalf("validation: %+v", res)
	}
	res = runCell(t, nb, cell("return counter"))
	if string(res.Output) != "42" {
		t.Fatalf("after a rejected call: %+v", res)
	}
	// A user exception leaves the state in place.
	res = runCell(t, nb, cell("counter = 7\nraise ValueError('x')"))
	if res.ErrorKind != shared.KindRuntime {
		t.Fatalf("runtime error: %+v", res)
	}
	if res = runCell(t, nb, cell("return counter")); string(res.Output) != "7" {
		t.Fatalf("after an exception: %+v", res)
	}
}

// A call over its wall clock kills the interpreter: the result says so
// (lost), the process group is empty, and the Notebook refuses further
// calls with ErrNotebookGone.
func TestNotebookTimeoutLosesState(t *testing.T) {
	nb := startNotebook(t, false)
	runCell(t, nb, cell("counter = 41"))
	j := cell("counter += 1\nwhile True:\n    pass")
	j.Limits.Timeout = 500 * time.Millisecond
	res, lost, err := nb.Run(context.Background(), j)
	if err != nil || !lost || res.ErrorKind != shared.KindTimeout {
		t.Fatalf("timeout: lost=%v err=%v %+v", lost, err, res)
	}
	if m := groupMembers(nb.PID()); len(m) > 0 {
		t.Fatalf("process group %d still has %v", nb.PID(), m)
	}
	if _, _, err := nb.Run(context.Background(), cell("return 1")); !errors.Is(err, pyproc.ErrNotebookGone) || !errors.Is(err, shared.ErrNotRun) {
		t.Fatalf("after the kill: want ErrNotebookGone, got %v", err)
	}
}

// Close ends an idle interpreter and its group.
func TestNotebookClose(t *testing.T) {
	nb := startNotebook(t, false)
	runCell(t, nb, cell("x = 1"))
	nb.Close()
	select {
	case <-nb.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("interpreter still running after Close")
	}
	if m := groupMembers(nb.PID()); len(m) > 0 {
		t.Fatalf("process group %d still has %v", nb.PID(), m)
	}
	if !strings.Contains(runner.OpSession, "session") {
		t.Fatal(runner.OpSession)
	}
}

// A call that returns with a thread still running ends the interpreter:
// the thread would otherwise run between calls, outside any wall clock
// and with the audit hook disarmed. The call's own result stands; it says
// the state is lost and why, and the next call starts clean. A call that
// joins its threads keeps the state.
func TestNotebookThreadsLeftEndTheState(t *testing.T) {
	nb := startNotebook(t, false)
	runCell(t, nb, cell("import threading\nt = threading.Thread(target=lambda: None)\nt.start()\nt.join()\nkept = 1", "threading"))
	if res := runCell(t, nb, cell("return kept")); string(res.Output) != "1" {
		t.Fatalf("a joined thread lost the state: %+v", res)
	}
	res, lost, err := nb.Run(context.Background(), cell("import threading, time\nthreading.Thread(target=time.sleep, args=(30,), daemon=True).start()\nreturn 7", "threading", "time"))
	if err != nil {
		t.Fatal(err)
	}
	if !lost || !res.Success || string(res.Output) != "7" || !strings.Contains(res.Stderr, "join your threads") {
		t.Fatalf("a call that left a thread running: lost=%v %+v", lost, res)
	}
	if nb.Alive() {
		t.Fatal("the interpreter still runs after a call left a thread")
	}
}

// startPrepared starts a sealed notebook that imports module, whose source
// is src, before it is ready (NotebookOptions.Prepare).
func startPrepared(t *testing.T, module, src string) *pyproc.Notebook {
	t.Helper()
	ctx := context.Background()
	s, err := pyproc.Probe(ctx, runner.Argv(python), nil, "", nil)
	if err != nil {
		t.Skip(err)
	}
	lib := t.TempDir()
	for _, d := range []string{filepath.Dir(lib), lib} { // the sealed interpreter may run on another uid
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(lib+"/"+module+".py", []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	nb, err := pyproc.StartNotebook(ctx, runner.Argv(python), runner.Request{
		Rules: json.RawMessage(validator.RulesJSON()), Seal: s.SealWriting(nil, nil, lib), ExtraSysPath: []string{lib},
	}, pyproc.NotebookOptions{Dir: t.TempDir(), Stderr: os.Stderr, Prepare: []string{module}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nb.Close)
	return nb
}

// TestNotebookPreparedNativeThreadsKept: a thread a prepared module's
// native code starts while it is imported (as OpenBLAS starts its pool) is
// the library's: calls keep the state with it running; a thread a call
// starts and leaves running still ends the interpreter.
func TestNotebookPreparedNativeThreadsKept(t *testing.T) {
	// pthread_create(&tid, NULL, sleep, 1000): a native thread, no Python.
	nb := startPrepared(t, "nativepool", `import ctypes
_libc = ctypes.CDLL(None)
_tid = ctypes.c_ulong()
_start = ctypes.cast(_libc.sleep, ctypes.c_void_p)
if _libc.pthread_create(ctypes.byref(_tid), None, _start, ctypes.c_void_p(1000)) != 0:
    raise OSError("pthread_create failed")
`)
	if n := len(tasksOf(t, nb.PID())); n != 2 {
		t.Fatalf("the interpreter has %d threads after the preparation; want 2 (its own and the library's)", n)
	}
	runCell(t, nb, cell("kept = 41"))
	for range 3 {
		runCell(t, nb, cell("kept += 1"))
	}
	if res := runCell(t, nb, cell("return kept")); string(res.Output) != "44" {
		t.Fatalf("state with the library's thread running: %+v", res)
	}
	res, lost, err := nb.Run(context.Background(), cell("import threading, time\nthreading.Thread(target=time.sleep, args=(30,), daemon=True).start()\nreturn 7", "threading", "time"))
	if err != nil {
		t.Fatal(err)
	}
	if !lost || !strings.Contains(res.Stderr, "1 threads still running") {
		t.Fatalf("a call's own thread left running: lost=%v stderr=%q", lost, res.Stderr)
	}
}

// TestNotebookPreparedPythonThreadNotSpared: a Python thread a prepared
// module starts at import runs Python between calls: it is not spared,
// and the first call ends the interpreter as one that left it would.
func TestNotebookPreparedPythonThreadNotSpared(t *testing.T) {
	nb := startPrepared(t, "pypool", "import threading, time\nthreading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n")
	res, lost, err := nb.Run(context.Background(), cell("return 1"))
	if err != nil {
		t.Fatal(err)
	}
	if !lost || !strings.Contains(res.Stderr, "join your threads") {
		t.Fatalf("a prepared module's Python thread: lost=%v stderr=%q", lost, res.Stderr)
	}
}

// tasksOf lists /proc/<pid>/task.
func tasksOf(t *testing.T, pid int) []os.DirEntry {
	t.Helper()
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		t.Fatal(err)
	}
	return ents
}

// rulesWithOpen is the real rules table with open a builtin the checker
// accepts: the layers above the audit hook bypassed.
func rulesWithOpen(t *testing.T) json.RawMessage {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(validator.RulesJSON(), &m); err != nil {
		t.Fatal(err)
	}
	delete(m["forbidden_names"].(map[string]any), "open")
	delete(m["forbidden_attributes"].(map[string]any), "open")
	m["safe_builtins"] = append(m["safe_builtins"].([]any), "open")
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestNotebookHookArmedBetweenCalls: with the C hook, a session's
// interpreter is armed from its first call on, between calls too. Call 1
// leaves generators in cycles whose finally blocks try open(); the collector runs
// them whenever it runs: during call 1, and in the runner's own steps
// before call 2 (reading and checking its request), where the Python hook
// is disarmed. With the C hook every attempt is refused by the hook. With
// the Python hook (the fallback), what is collected in that gap reaches
// the kernel's walls (Landlock refuses the file): that is only logged.
func TestNotebookHookArmedBetweenCalls(t *testing.T) {
	rules := rulesWithOpen(t)
	body := "log = []\ndef g(box):\n    try:\n        yield 1\n    finally:\n        try:\n            open('/etc/hostname').close()\n            log.append('opened')\n        except Exception as e:\n            log.append(type(e).__name__)\nfor i in range(3000):\n    box = []\n    x = g(box)\n    next(x)\n    box.append(x)\ndel x, box\nreturn 1"
	for _, hook := range []string{"c", "python"} {
		t.Run(hook, func(t *testing.T) {
			var core []byte
			if hook == "c" {
				core = forkCore(t)
			}
			ctx := context.Background()
			s, err := pyproc.Probe(ctx, runner.Argv(python), nil, "", nil)
			if err != nil {
				t.Skip(err)
			}
			nb, err := pyproc.StartNotebook(ctx, runner.Argv(python), runner.Request{
				Rules: rules, Seal: s.Seal(nil), Classes: true,
			}, pyproc.NotebookOptions{Dir: t.TempDir(), Stderr: os.Stderr, Core: core})
			if err != nil {
				t.Fatal(err)
			}
			defer nb.Close()
			j := cell(body)
			j.Request.Classes = true
			if res := runCell(t, nb, j); !res.Success {
				t.Fatalf("call 1: %+v", res)
			}
			// Call 2's body is long: checking it allocates enough for a
			// collection before the body runs.
			res := runCell(t, nb, cell("data = ["+strings.Repeat("[0], ", 3000)+"]\nreturn [log.count('opened'), log.count('RuntimeError'), len(log), sorted(set(log))]"))
			var n [4]any
			if !res.Success || json.Unmarshal(res.Output, &n) != nil {
				t.Fatalf("call 2: %+v", res)
			}
			t.Logf("%s hook: of %v finalisers run, %v opened the file and %v were refused by the hook; outcomes %v", hook, n[2], n[0], n[1], n[3])
			if hook == "c" && (n[0] != 0.0 || n[1] == 0.0 || n[1] != n[2]) {
				t.Fatalf("with the C hook, a finaliser ran unarmed: %v", n)
			}
		})
	}
}

// TestNotebookHookKeepsItsPolicy: the C hook a session's first call armed
// serves only calls of that configuration. A later call whose allowlist
// would arm it differently (an OS module: the file checks off) is refused
// with what to do, and the state stays.
func TestNotebookHookKeepsItsPolicy(t *testing.T) {
	forkCore(t)
	nb := startNotebook(t, false)
	runCell(t, nb, cell("x = 5"))
	res := runCell(t, nb, cell("import os\nreturn 1", "os"))
	if res.Success || !strings.Contains(res.Error, "armed for another policy") {
		t.Fatalf("a call of another configuration: want the refusal, got %+v", res)
	}
	if res := runCell(t, nb, cell("return x")); string(res.Output) != "5" {
		t.Fatalf("after the refusal: %+v", res)
	}
}
