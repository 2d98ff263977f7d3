package subprocess

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

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
