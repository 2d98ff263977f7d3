package subprocess

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orqest/sandbox/rules"
	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
)

// TestContainmentMetadataAndWatches runs, with the Python layers bypassed,
// what Landlock does not mediate: changing a file's mode, times and extended
// attributes, and watching a directory with inotify (which reveals the names
// of files other tenants create). Every attempt must be refused by the
// kernel layers; the target file is one the child's uid owns, so ordinary
// permissions would let it through.
func TestContainmentMetadataAndWatches(t *testing.T) {
	modes(t, func(t *testing.T, b *Backend) {
		s, err := b.probeSeal(context.Background(), DefaultPython, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(s.Layers, runner.LayerSeccomp) {
			t.Skipf("SKIP: seccomp not in force here (%s)", s.missingText())
		}
		b.test = bypassValidation()

		dir, err := os.MkdirTemp("", "orqest-meta-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		target := filepath.Join(dir, "owned")
		if err := os.WriteFile(target, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		// As root the child drops to nobody: make it the owner, so only the
		// sandbox layers stand between it and the file.
		if os.Getuid() == 0 {
			for _, p := range []string{dir, target} {
				if err := os.Chown(p, 65534, 65534); err != nil {
					t.Fatal(err)
				}
			}
		}
		before, err := os.Stat(target)
		if err != nil {
			t.Fatal(err)
		}

		code := `import os, ctypes
r = {}
def attempt(name, f):
    try:
        r[name] = "ALLOWED: " + repr(f())
    except BaseException as e:
        r[name] = "denied: " + type(e).__name__ + ": " + str(e)
libc = ctypes.CDLL(None, use_errno=True)
def nonneg(v):
    if v >= 0:
        return v
    raise OSError("returned %r (errno %d)" % (v, ctypes.get_errno()))
t = args["target"]
d = args["dir"]
attempt("chmod", lambda: os.chmod(t, 0o4777))
attempt("fchmodat", lambda: nonneg(libc.fchmodat(-100, t.encode(), 0o666, 0)))
attempt("fchmod_opath", lambda: os.chmod(os.open(t, os.O_PATH), 0o666))
attempt("utime", lambda: os.utime(t, (1, 1)))
attempt("utimensat", lambda: nonneg(libc.utimensat(-100, t.encode(), None, 0)))
attempt("setxattr", lambda: os.setxattr(t, "user.orqest", b"1"))
attempt("removexattr", lambda: os.removexattr(t, "user.orqest"))
attempt("link", lambda: os.link(t, d + "/hard"))
attempt("symlink", lambda: os.symlink(t, d + "/soft"))
attempt("rename", lambda: os.rename(t, d + "/moved"))
attempt("chown", lambda: os.chown(t, os.getuid(), os.getgid()))
attempt("inotify_init1", lambda: nonneg(libc.inotify_init1(0)))
attempt("inotify_init", lambda: nonneg(libc.syscall(253)))
return r`
		argsJSON, _ := json.Marshal(map[string]any{"target": target, "dir": dir})
		res := execute(t, b, shared.ExecuteRequest{Code: code, Args: argsJSON, Timeout: 10 * time.Second,
			AllowedImports: []string{"os", "ctypes"}})
		if !res.Success {
			t.Fatalf("%s: %s\nstderr: %s", res.ErrorKind, res.Error, res.Stderr)
		}
		var r map[string]string
		if err := json.Unmarshal(res.Output, &r); err != nil {
			t.Fatal(err)
		}
		if len(r) != 13 {
			t.Fatalf("not every attempt reported: %v", r)
		}
		for name, outcome := range r {
			if !strings.HasPrefix(outcome, "denied: ") {
				t.Errorf("%s: %s", name, outcome)
			} else {
				t.Logf("%-14s %s", name, outcome)
			}
		}
		after, err := os.Stat(target)
		if err != nil {
			t.Fatalf("the target is gone: %v", err)
		}
		if after.Mode() != before.Mode() || !after.ModTime().Equal(before.ModTime()) {
			t.Errorf("the target changed: mode %v -> %v, mtime %v -> %v", before.Mode(), after.Mode(), before.ModTime(), after.ModTime())
		}
		for _, f := range []string{"hard", "soft", "moved"} {
			if _, err := os.Lstat(filepath.Join(dir, f)); err == nil {
				t.Errorf("%s exists", f)
			}
		}
	})
}

// TestForgedResponses: a child that escaped the Python layers can write
// anything to its response descriptor. What the runner never writes (a
// forged error kind, invented findings, duplicate keys, data after the
// object) is an infrastructure error naming the child, never a result; a
// result no client should be handed (9000 levels deep, a number out of
// float64's range, repeated keys) is not_serializable.
func TestForgedResponses(t *testing.T) {
	modes(t, func(t *testing.T, b *Backend) {
		b.test = bypassValidation()
		forge := func(resp string) (shared.ExecutionResult, error) {
			code := "import os\nos.write(3, " + strconv.Quote(resp) + ".encode())\nos.close(3)\nos._exit(0)"
			r, err := b.Execute(context.Background(), shared.ExecuteRequest{Code: code, AllowedImports: []string{"os"}, Timeout: 10 * time.Second})
			return r.Result, err
		}
		for _, resp := range []string{
			`{"success": false, "error_kind": "validation", "error": "forged", "findings": [{"rule": "made-up", "message": "x"}]}`,
			`{"success": false, "error_kind": "timeout", "error": "forged"}`,
			`{"success": true, "output": 1, "success": false}`,
			`{"success": true, "output": 1} trailing`,
			`{"success": true, "output": 1, "note": "extra"}`,
		} {
			res, err := forge(resp)
			if !errors.Is(err, shared.ErrInternal) || !strings.Contains(err.Error(), "sandbox child") {
				t.Errorf("%.60s: result %+v, error %v; want an internal error naming the child", resp, res, err)
			}
		}
		for _, out := range []string{strings.Repeat("[", 9000) + strings.Repeat("]", 9000), "1e999999", `{"a": 1, "a": 2}`} {
			res, err := forge(`{"success": true, "output": ` + out + `}`)
			if err != nil || res.Success || res.ErrorKind != shared.KindNotSerializable || res.Output != nil {
				t.Errorf("output %.30s: result %+v, error %v; want not_serializable", out, res, err)
			}
		}
		// What the runner writes still comes through.
		res, err := forge(`{"success": true, "output": {"ok": [1, 2.5, "x"]}}`)
		var compact bytes.Buffer
		_ = json.Compact(&compact, res.Output)
		if err != nil || !res.Success || compact.String() != `{"ok":[1,2.5,"x"]}` {
			t.Errorf("a well-formed response: %+v %v", res, err)
		}
	})
}

// TestThreadCap: code that escaped the Python layers cannot start threads
// without bound (RLIMIT_NPROC in the child's user namespace, Seal.MaxProcs):
// one call once started 905.
func TestThreadCap(t *testing.T) {
	modes(t, func(t *testing.T, b *Backend) {
		b.test = bypassValidation()
		code := `import threading
stop = threading.Event()
n = 0
err = ""
try:
    for i in range(2000):
        threading.Thread(target=stop.wait, daemon=True).start()
        n += 1
except BaseException as e:
    err = type(e).__name__ + ": " + str(e)
stop.set()
return [n, err]`
		// Memory enough for 2000 thread stacks: only the process cap stops it.
		res := execute(t, b, shared.ExecuteRequest{Code: code, AllowedImports: []string{"threading"}, Timeout: 20 * time.Second, MemoryMB: 20000})
		if !res.Success {
			t.Fatalf("%s: %s\nstderr: %s", res.ErrorKind, res.Error, res.Stderr)
		}
		var out []any
		if err := json.Unmarshal(res.Output, &out); err != nil || len(out) != 2 {
			t.Fatalf("output %s: %v", res.Output, err)
		}
		n := int(out[0].(float64))
		t.Logf("started %d threads, then: %v", n, out[1])
		if n >= runner.DefaultMaxProcs || out[1] == "" {
			t.Errorf("started %d threads (cap %d), stopped by %q", n, runner.DefaultMaxProcs, out[1])
		}
	})
	// Ordinary code that starts a few threads still works.
	b := newTestBackend(t)
	b.test = bypassValidation()
	res := execute(t, b, shared.ExecuteRequest{Code: "import threading\nr = []\nts = [threading.Thread(target=r.append, args=(i,)) for i in range(8)]\nfor t in ts:\n    t.start()\nfor t in ts:\n    t.join()\nreturn sorted(r)",
		AllowedImports: []string{"threading"}, Timeout: 10 * time.Second})
	if !res.Success || string(res.Output) != "[0, 1, 2, 3, 4, 5, 6, 7]" && string(res.Output) != "[0,1,2,3,4,5,6,7]" {
		t.Errorf("8 threads: %+v", res)
	}
}

// TestCopyCollectionsEscape: the escape a lint-clean policy allowing copy
// and collections once allowed. copy.dispatch_table takes a user reducer
// that makes copy.copy setattr __match_args__ = ('__globals__',) on
// collections.abc.Callable; a positional class pattern then reads a
// function's globals. With the validator on, the pattern and the name
// outside copy's surface are refused; with it bypassed, copy's view has no
// dispatch_table.
func TestCopyCollectionsEscape(t *testing.T) {
	code := `import copy, collections.abc
D = "_" * 2
def reducer(x):
    return (lambda: collections.abc.Callable, (), (None, {D + "match_args" + D: (D + "globals" + D,)}))
copy.dispatch_table[int] = reducer
copy.copy(1)
def f():
    pass
match f:
    case collections.abc.Callable(g):
        return sorted(g)[:3]
return "no globals"`
	imports := []string{"copy", "collections"}
	b := newTestBackend(t)
	res := execute(t, b, shared.ExecuteRequest{Code: code, AllowedImports: imports, Timeout: 10 * time.Second})
	rulesFound := map[string]bool{}
	for _, f := range res.Findings {
		rulesFound[f.Rule] = true
	}
	if res.Success || res.ErrorKind != shared.KindValidation || len(res.Findings) != 2 || !rulesFound["positional-class-pattern"] || !rulesFound["not-in-surface"] {
		t.Errorf("validator on: %+v, want positional-class-pattern and not-in-surface (copy.dispatch_table) rejections", res)
	}
	// The checkers bypassed, the module views as the real table makes them.
	b.test = bypassValidation()
	var tbl map[string]any
	if err := json.Unmarshal(b.test.rules, &tbl); err != nil {
		t.Fatal(err)
	}
	tbl["module_surfaces"] = rules.Default().ModuleSurfaces
	b.test.rules, _ = json.Marshal(tbl)
	res = execute(t, b, shared.ExecuteRequest{Code: code, AllowedImports: imports, Timeout: 10 * time.Second})
	if res.Success || !strings.Contains(res.Error, "dispatch_table") {
		t.Errorf("validator bypassed: %+v, want an AttributeError on dispatch_table", res)
	}
}
