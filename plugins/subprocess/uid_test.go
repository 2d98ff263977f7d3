package subprocess

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/orqest/sandbox/internal/pyproc"
	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
)

// The account TestSeparateUIDNotRoot runs the plugin as, and the
// environment variable that tells the re-executed test binary it is that
// run (its value: the directory the files are in).
const (
	notRootUID = 4242
	notRootEnv = "ORQEST_TEST_NOT_ROOT_DIR"
)

// TestSeparateUIDNotRoot runs the backend as a non-root account (uid 4242,
// created with a subordinate id range when absent) and, with the Python
// layers bypassed, has user code try to read, write and chmod files that
// account owns with mode 0600: one outside Landlock's view, one in a
// directory Landlock lets the child read. Both must be refused, the second
// by the kernel's permission check alone: the child's user namespace maps
// it to a subordinate uid, not to 4242. Every sealed process's kernel uid,
// read from /proc/<pid>/status outside, is that subordinate uid. Then, as
// a uid with no range, the plugin falls back to its own uid and says so.
// Needs root to set up (as CI runs); skips loudly otherwise.
func TestSeparateUIDNotRoot(t *testing.T) {
	if dir := os.Getenv(notRootEnv); dir != "" {
		notRootBody(t, dir)
		return
	}
	if os.Getuid() != 0 {
		t.Skip("SKIP: needs root to create the non-root account and its files (CI runs as root)")
	}
	files := pyproc.DefaultSubIDFiles()
	for _, h := range []string{files.NewUIDMap, files.NewGIDMap} {
		if _, err := os.Stat(h); err != nil {
			t.Skipf("SKIP: %s missing: install Debian's uidmap (scripts/setup.sh does): %v", h, err)
		}
	}
	name := ensureNotRootAccount(t)
	dir, err := os.MkdirTemp("", "orqest-notroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, d := range []string{"outside", "readable"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(dir, d, "secret")
		if err := os.WriteFile(f, []byte("ACCOUNT-SECRET-"+d), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{filepath.Join(dir, d), f} {
			if err := os.Chown(p, notRootUID, notRootUID); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The test binary and the fork-server's C loop, where the account can
	// run and read them.
	bin := filepath.Join(dir, "subprocess.test")
	copyFile(t, os.Args[0], bin, 0o755)
	env := []string{notRootEnv + "=" + dir, "PATH=/usr/bin:/bin", "HOME=" + dir, "TMPDIR=/tmp"}
	if core := os.Getenv(forkCoreEnv); core != "" {
		copyFile(t, core, filepath.Join(dir, "forkcore.so"), 0o644)
		env = append(env, forkCoreEnv+"="+filepath.Join(dir, "forkcore.so"))
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// As 4242 (a subordinate range), then as noSubIDsUID (no account, no
	// range: the fallback).
	for _, uid := range []uint32{notRootUID, noSubIDsUID} {
		cmd := exec.Command(bin, "-test.run=^TestSeparateUIDNotRoot$", "-test.v", "-test.count=1")
		cmd.Dir = dir
		cmd.Env = env
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}}
		out, err := cmd.CombinedOutput()
		t.Logf("as uid %d (%s has the range):\n%s", uid, name, out)
		if err != nil {
			t.Fatalf("the run as uid %d failed: %v", uid, err)
		}
		if !strings.Contains(string(out), "--- PASS: TestSeparateUIDNotRoot") || strings.Contains(string(out), "--- SKIP") {
			t.Fatalf("the run as uid %d did not pass", uid)
		}
	}
}

// noSubIDsUID is a uid with no account and no subordinate ids.
const noSubIDsUID = 4243

// noSubIDsBody: without subordinate ids the plugin still runs code, does
// not declare separate_uid, refuses a policy that requires it, and logs
// one WARNING naming it and why.
func noSubIDsBody(t *testing.T) {
	ctx := context.Background()
	var logs bytes.Buffer
	var lmu sync.Mutex
	b := NewBackend(hclog.New(&hclog.LoggerOptions{Output: lockedWriter{&lmu, &logs}, Level: hclog.Warn}))
	t.Cleanup(b.Shutdown)
	info, err := b.Info(ctx, shared.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Has(shared.CapSeparateUID) {
		t.Errorf("Info declares %s without subordinate ids", shared.CapSeparateUID)
	}
	_, err = b.Configure(ctx, shared.ConfigureRequest{Config: json.RawMessage(`{"require":["separate_uid"]}`)})
	if !errors.Is(err, shared.ErrFailedPrecondition) {
		t.Errorf("require separate_uid: %v", err)
	}
	configure(t, b, `{}`)
	wantSuccess(t, execute(t, b, shared.ExecuteRequest{Code: "return 5"}), "5")
	lmu.Lock()
	out := logs.String()
	lmu.Unlock()
	want := fmt.Sprintf("separate_uid (no subordinate id range for uid %d in /etc/subuid)", noSubIDsUID)
	if strings.Count(out, "NOT enforced") != 1 || !strings.Contains(out, want) || !strings.Contains(out, "[WARN]") {
		t.Errorf("want one WARNING naming %q, got:\n%s", want, out)
	}
	t.Logf("logged: %s", strings.TrimSpace(out))
}

// ensureNotRootAccount makes uid notRootUID exist with a subordinate uid
// and gid range, and returns its name.
func ensureNotRootAccount(t *testing.T) string {
	t.Helper()
	u, err := user.LookupId(strconv.Itoa(notRootUID))
	if err != nil {
		if out, err := exec.Command("useradd", "-u", strconv.Itoa(notRootUID), "-U", "-M", "-s", "/usr/sbin/nologin",
			"orqest"+strconv.Itoa(notRootUID)).CombinedOutput(); err != nil {
			t.Fatalf("useradd: %v: %s", err, out)
		}
		if u, err = user.LookupId(strconv.Itoa(notRootUID)); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []struct{ path, flag string }{{"/etc/subuid", "--add-subuids"}, {"/etc/subgid", "--add-subgids"}} {
		b, _ := os.ReadFile(f.path)
		has := false
		for _, line := range strings.Split(string(b), "\n") {
			if owner, _, ok := strings.Cut(line, ":"); ok && (owner == u.Username || owner == u.Uid) {
				has = true
			}
		}
		if !has {
			if out, err := exec.Command("usermod", f.flag, "3042000-3107535", u.Username).CombinedOutput(); err != nil {
				t.Fatalf("usermod %s: %v: %s", f.flag, err, out)
			}
		}
	}
	return u.Username
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// notRootBody is TestSeparateUIDNotRoot as the non-root account.
func notRootBody(t *testing.T, dir string) {
	if os.Getuid() == noSubIDsUID {
		noSubIDsBody(t)
		return
	}
	if os.Getuid() != notRootUID {
		t.Fatalf("running as uid %d, not %d", os.Getuid(), notRootUID)
	}
	sub, err := pyproc.SubordinateIDs(pyproc.DefaultSubIDFiles())
	if err != nil {
		t.Fatalf("no subordinate ids: %v", err)
	}
	modes(t, func(t *testing.T, b *Backend) {
		s, err := b.probeSeal(context.Background(), DefaultPython, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range []string{runner.LayerSeparateUID, runner.LayerLandlockFS, runner.LayerSeccomp} {
			if !slices.Contains(s.Layers, l) {
				t.Fatalf("layer %s not in force: %s", l, s.missingText())
			}
		}
		if !slices.Contains(s.caps(), shared.CapSeparateUID) {
			t.Errorf("capabilities %v lack %s", s.caps(), shared.CapSeparateUID)
		}
		h := bypassValidation()
		h.readPaths = []string{filepath.Join(dir, "readable")}
		b.test = h
		code := `import os
r = {}
def attempt(name, f):
    try:
        r[name] = "ALLOWED: " + repr(f())
    except BaseException as e:
        r[name] = "denied: " + type(e).__name__ + ": " + str(e)
for d in ("outside", "readable"):
    p = args["dir"] + "/" + d + "/secret"
    attempt(d + " read", lambda: open(p).read())
    attempt(d + " os.open", lambda: os.read(os.open(p, os.O_RDONLY), 100))
    attempt(d + " write", lambda: open(p, "a").write("x"))
    attempt(d + " chmod", lambda: os.chmod(p, 0o644))
    attempt(d + " listdir", lambda: os.listdir(args["dir"] + "/" + d))
return r`
		argsJSON, _ := json.Marshal(map[string]any{"dir": dir})
		res := execute(t, b, shared.ExecuteRequest{Code: code, Args: argsJSON, Timeout: 10 * time.Second,
			AllowedImports: []string{"os"}})
		if !res.Success {
			t.Fatalf("%s: %s\nstderr: %s", res.ErrorKind, res.Error, res.Stderr)
		}
		var r map[string]string
		if err := json.Unmarshal(res.Output, &r); err != nil {
			t.Fatal(err)
		}
		if len(r) != 10 {
			t.Fatalf("not every attempt reported: %v", r)
		}
		for name, outcome := range r {
			if !strings.HasPrefix(outcome, "denied: ") {
				t.Errorf("%s: %s", name, outcome)
			} else {
				t.Logf("%-18s %s", name, outcome)
			}
		}
		// Inside Landlock's view only the kernel's permission check stands
		// in the way: it must be that check (EACCES), not another layer.
		for _, n := range []string{"readable read", "readable os.open"} {
			if !strings.HasPrefix(r[n], "denied: PermissionError") {
				t.Errorf("%s: %s, want a PermissionError from the file's mode", n, r[n])
			}
		}
		for _, d := range []string{"outside", "readable"} {
			if b, _ := os.ReadFile(filepath.Join(dir, d, "secret")); string(b) != "ACCOUNT-SECRET-"+d {
				t.Errorf("%s/secret changed: %q", d, b)
			}
		}

		// The kernel uid of every sealed process: a body that sleeps while
		// the test reads the status of this process's python3 descendants.
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			execute(t, b, shared.ExecuteRequest{Code: "import time\ntime.sleep(1.5)\nreturn 1",
				AllowedImports: []string{"time"}, Timeout: 10 * time.Second})
		}()
		time.Sleep(700 * time.Millisecond)
		ids := pythonDescendantIDs(t)
		wg.Wait()
		if len(ids) == 0 {
			t.Fatal("no python3 descendant found")
		}
		want := fmt.Sprintf("Uid: %d %d %d %d; Gid: %d %d %d %d; Groups: ", sub.UID, sub.UID, sub.UID, sub.UID,
			sub.GID, sub.GID, sub.GID, sub.GID)
		for pid, got := range ids {
			if got != want {
				t.Errorf("pid %d: %q, want %q", pid, got, want)
			}
		}
		t.Logf("%d sealed processes, each %q (the plugin is uid %d)", len(ids), want, os.Getuid())
	})
}

// pythonDescendantIDs returns "Uid: r e s f; Gid: r e s f; Groups: ..."
// from /proc/<pid>/status of every python3 process descended from this one.
func pythonDescendantIDs(t *testing.T) map[int]string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	type proc struct {
		ppid int
		name string
		ids  string
	}
	procs := map[int]proc{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, err := os.Open(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		var p proc
		var ids []string
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, _ := strings.Cut(sc.Text(), ":")
			v = strings.Join(strings.Fields(v), " ")
			switch k {
			case "Name":
				p.name = v
			case "PPid":
				p.ppid, _ = strconv.Atoi(v)
			case "Uid", "Gid", "Groups":
				ids = append(ids, k+": "+v)
			}
		}
		f.Close()
		p.ids = strings.Join(ids, "; ")
		procs[pid] = p
	}
	out := map[int]string{}
	me := os.Getpid()
	for pid, p := range procs {
		if !strings.HasPrefix(p.name, "python3") {
			continue
		}
		for a, n := p.ppid, 0; a > 1 && n < 16; a, n = procs[a].ppid, n+1 {
			if a == me {
				out[pid] = p.ids
				break
			}
		}
	}
	return out
}
