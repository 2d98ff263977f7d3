package subprocess

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/orqest/sandbox/internal/runnertest"
	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
)

// modes runs f once per execution mode, on a backend configured for it:
// the fork-server with its C loop (forkcore; ORQEST_FORKCORE names it, as
// `make test` does), the fork-server looping in Python, and spawn.
func modes(t *testing.T, f func(t *testing.T, b *Backend)) {
	for _, m := range []struct{ name, cfg string }{
		{"forkserver-c", `{"mode":"forkserver"}`},
		{"forkserver-python", `{"mode":"forkserver","forkcore":"none"}`},
		{ModeSpawn, `{"mode":"spawn"}`},
	} {
		t.Run(m.name, func(t *testing.T) {
			b := newTestBackend(t)
			configure(t, b, m.cfg)
			if m.name == "forkserver-c" {
				requireCore(t, b)
			}
			f(t, b)
		})
	}
}

// requireCore skips, loudly, where the fork-server's C loop is not built,
// and fails if it was offered but the zygote does not run it.
func requireCore(t *testing.T, b *Backend) {
	t.Helper()
	b.fsMu.Lock()
	offered, why := len(b.core) > 0, b.coreWhy
	b.fsMu.Unlock()
	if !offered {
		t.Skipf("SKIP: the fork-server's C loop is not available (%s); run `make test`, which builds it and sets %s", why, forkCoreEnv)
	}
	if _, err := b.Execute(context.Background(), shared.ExecuteRequest{Code: "return 1"}); err != nil {
		t.Fatal(err)
	}
	inC, coreErr := b.zygotes.Peek("").Core()
	if !inC {
		t.Fatalf("the zygote was offered the C loop but loops in Python: %s", coreErr)
	}
}

func configure(t *testing.T, b *Backend, cfg string) {
	t.Helper()
	if _, err := b.Configure(context.Background(), shared.ConfigureRequest{Config: json.RawMessage(cfg)}); err != nil {
		t.Fatalf("Configure(%s): %v", cfg, err)
	}
}

func zygotePID(t *testing.T, b *Backend) int {
	t.Helper()
	fs := b.zygotes.Peek("")
	if fs == nil {
		t.Fatal("no fork-server running")
	}
	return fs.PID()
}

func TestForkServerIsDefault(t *testing.T) {
	b := newTestBackend(t)
	wantSuccess(t, execute(t, b, shared.ExecuteRequest{Code: "return 1+1"}), "2")
	zygotePID(t, b)
}

// Nothing one execution does to modules, builtins or globals is seen by
// the next: every child is a fresh copy of the zygote.
func TestForkServerNothingLeaksBetweenExecutions(t *testing.T) {
	b := newTestBackend(t)
	// Hostile mutations need the validator out of the way.
	b.test = bypassValidation()
	// (setattr, not o.a = v: the runner's write guard would refuse those.)
	mutate := `import sys, builtins, json
S = builtins.setattr
S(json, 'LEAK', 1)
S(sys.modules['string'], 'ascii_letters', 'MUTATED')
S(sys.modules['builtins'], 'LEAK', 2)
sys.modules['__main__'].__dict__['LEAK'] = 3
sys.setrecursionlimit(50)
def f(): pass
f.__builtins__['LEAK'] = 4
return 'mutated'`
	check := `import sys, builtins, json
def f(): pass
return [hasattr(json, 'LEAK'), sys.modules['string'].ascii_letters == 'MUTATED', hasattr(builtins, 'LEAK'),
        'LEAK' in sys.modules['__main__'].__dict__, sys.getrecursionlimit() == 50, 'LEAK' in f.__builtins__]`
	// Enough rounds that both bodies are warm (their builtins and import
	// shim prepared by the zygote) and children forked after that run them.
	for i := 0; i < 8; i++ {
		wantSuccess(t, execute(t, b, shared.ExecuteRequest{Code: mutate, AllowedImports: []string{"sys", "builtins", "json"}}), `"mutated"`)
		wantSuccess(t, execute(t, b, shared.ExecuteRequest{Code: check, AllowedImports: []string{"sys", "builtins", "json"}}), `[false,false,false,false,false,false]`)
	}
	// And with the validator on: random state is reseeded in every child
	// (children of one zygote must not replay the same sequence).
	b.test = testHooks{}
	seen := map[string]bool{}
	for i := 0; i < 5; i++ {
		res := execute(t, b, shared.ExecuteRequest{Code: "import random\nreturn random.random()", AllowedImports: []string{"random"}})
		if !res.Success {
			t.Fatalf("%s: %s", res.ErrorKind, res.Error)
		}
		seen[string(res.Output)] = true
	}
	if len(seen) != 5 {
		t.Errorf("children repeated random state: %v", seen)
	}
}

func TestForkServerConcurrentCallers(t *testing.T) {
	b := newTestBackend(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8*25)
	for c := 0; c < 8; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				n := c*1000 + i
				resp, err := b.Execute(context.Background(), shared.ExecuteRequest{
					Code: "print(args['n'])\nreturn args['n'] + 1", Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))})
				if err != nil {
					errs <- err
				} else if r := resp.Result; !r.Success || string(r.Output) != strconv.Itoa(n+1) || r.Stdout != fmt.Sprintf("%d\n", n) {
					errs <- fmt.Errorf("call %d: %+v", n, r)
				}
			}
		}(c)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A dead zygote is restarted by the next call; a call running when it
// dies fails with ErrUnavailable and its child does not survive.
func TestForkServerRestart(t *testing.T) {
	b := newTestBackend(t)
	var sp spawned
	b.onSpawn = sp.hook
	wantSuccess(t, execute(t, b, shared.ExecuteRequest{Code: "return 1"}), "1")
	old := zygotePID(t, b)

	done := make(chan error, 1)
	go func() {
		_, err := b.Execute(context.Background(), shared.ExecuteRequest{Code: "while True:\n    pass", Timeout: 10 * time.Second})
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		sp.mu.Lock()
		n := len(sp.pids)
		sp.mu.Unlock()
		if n == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, shared.ErrUnavailable) {
			t.Fatalf("running call when the zygote died: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("running call not released when the zygote died")
	}
	wantSuccess(t, execute(t, b, shared.ExecuteRequest{Code: "return 2"}), "2")
	if now := zygotePID(t, b); now == old {
		t.Fatalf("zygote not restarted (pid %d)", now)
	}
	time.Sleep(100 * time.Millisecond) // the orphan's SIGKILL (pidfd + PDEATHSIG) and reaping
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for _, pid := range sp.pids[:2] {
		if err := syscall.Kill(pid, 0); err == nil {
			if st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); !strings.Contains(string(st), ") Z") {
				t.Errorf("child %d survived its zygote: %s", pid, st)
			}
		}
	}
}

func TestShutdownLeavesNothing(t *testing.T) {
	b := newTestBackend(t)
	wantSuccess(t, execute(t, b, shared.ExecuteRequest{Code: "return 1"}), "1")
	pid := zygotePID(t, b)
	b.Shutdown()
	processGone(t, pid)
	// Usable again afterwards.
	wantSuccess(t, execute(t, b, shared.ExecuteRequest{Code: "return 3"}), "3")
}

// Honest degradation: a layer that is not in force is not declared, is
// named in one WARNING, and `require` turns its absence into a loud
// Configure failure.
func TestDegradationAndRequire(t *testing.T) {
	if _, err := os.Stat(DefaultPython); err != nil {
		t.Skip(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		disable []string
		lost    shared.Capability
		named   string
	}{
		{[]string{runner.LayerLandlockFS}, shared.CapFilesystemIsolation, string(shared.CapLandlockFS)},
		{[]string{runner.LayerUserNamespace, runner.LayerNetNamespace, runner.LayerSeccomp}, shared.CapNetworkIsolation, string(shared.CapNetworkNamespace)},
	} {
		var logs bytes.Buffer
		var lmu sync.Mutex
		logger := hclog.New(&hclog.LoggerOptions{Output: lockedWriter{&lmu, &logs}, Level: hclog.Warn})
		b := NewBackend(logger)
		t.Cleanup(b.Shutdown)
		b.test.disable = c.disable
		info, err := b.Info(ctx, shared.InfoRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if info.Has(c.lost) {
			t.Errorf("disable %v: Info still declares %s: %v", c.disable, c.lost, info.Capabilities)
		}
		for _, l := range c.disable {
			if info.Has(runner.LayerCapability(l)) {
				t.Errorf("disable %v: Info still declares %s", c.disable, runner.LayerCapability(l))
			}
		}
		_, err = b.Configure(ctx, shared.ConfigureRequest{Config: json.RawMessage(`{"require":["` + string(c.lost) + `"]}`)})
		if !errors.Is(err, shared.ErrFailedPrecondition) || !strings.Contains(err.Error(), string(c.lost)) {
			t.Errorf("disable %v, require %s: err = %v", c.disable, c.lost, err)
		}
		configure(t, b, `{}`)
		configure(t, b, `{"mode":"spawn"}`)
		lmu.Lock()
		out := logs.String()
		lmu.Unlock()
		if n := strings.Count(out, "NOT enforced"); n != 1 || !strings.Contains(out, c.named) || !strings.Contains(out, "[WARN]") {
			t.Errorf("disable %v: want one WARNING naming %s, got %d:\n%s", c.disable, c.named, n, out)
		}
		wantSuccess(t, execute(t, b, shared.ExecuteRequest{Code: "return 5"}), "5")
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestRequireEverythingHere(t *testing.T) {
	b := newTestBackend(t)
	s, err := b.probeSeal(context.Background(), DefaultPython, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Missing) > 0 {
		t.Skipf("this host lacks sealing layers: %s", s.missingText())
	}
	configure(t, b, `{"require":["network_isolation","filesystem_isolation","seccomp","no_new_privs","user_namespace","network_namespace","landlock_filesystem","landlock_network","landlock_scope","unprivileged_uid"]}`)
	wantSuccess(t, execute(t, b, shared.ExecuteRequest{Code: "return 1"}), "1")
}

// Extension modules (and the libraries they link) are readable under
// Landlock: the sandbox can import what policy allows.
func TestSealedImportsOfExtensionModules(t *testing.T) {
	modes(t, func(t *testing.T, b *Backend) {
		mods := []string{"ssl", "hashlib", "sqlite3", "uuid", "decimal", "lzma", "bz2", "zlib", "datetime", "json", "re", "math", "csv", "unicodedata"}
		code := "import " + strings.Join(mods, ", ") + "\nreturn [hashlib.sha256(b'x').hexdigest()[:8], str(decimal.Decimal('1.1') + 1), len(zlib.compress(b'a' * 100)), unicodedata.name('a')]"
		res := execute(t, b, shared.ExecuteRequest{Code: code, AllowedImports: mods})
		wantSuccess(t, res, `["2d711642","2.1",12,"LATIN SMALL LETTER A"]`)
	})
}

// bypassValidation returns test hooks that take every Python-level layer
// out of the way: the Go validator is skipped, the in-child checker is
// replaced by one that accepts everything, the runtime audit hook is not
// armed, and the builtins are generous. What is left are the kernel layers.
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
	return testHooks{skipValidation: true, rules: permissiveRules(), program: prog}
}

// permissiveRules is a rules table with no checks and generous builtins,
// for tests that bypass the validator on purpose.
func permissiveRules() json.RawMessage {
	return json.RawMessage(`{"safe_builtins":["open","print","repr","str","int","len","dict","list","tuple","Exception",
	"BaseException","OSError","isinstance","type","getattr","hasattr","range","sorted","bytes","ValueError","True","False","None"]}`)
}

// TestContainment runs hostile code with the validator bypassed (a test
// seam: Backend.test, unreachable from HCL) and the import shim letting
// os, socket, subprocess and ctypes through: the kernel layers alone must
// stop it from reading a canary, writing, connecting to a local listener,
// seeing the host environment, host pids (stat /proc/N) or the host's
// sysinfo(2) figures, or starting a process.
func TestContainment(t *testing.T) {
	if os.Getuid() != 0 {
		t.Log("not root: files are also protected by ordinary permissions here")
	}
	modes(t, func(t *testing.T, b *Backend) {
		s, err := b.probeSeal(context.Background(), DefaultPython, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range []string{runner.LayerLandlockFS, runner.LayerSeccomp} {
			if !slices.Contains(s.Layers, l) {
				t.Skipf("layer %s not in force here (%s)", l, s.missingText())
			}
		}
		b.test = bypassValidation()

		// World-readable, world-writable: only the sandbox layers stop it.
		dir, err := os.MkdirTemp("", "orqest-canary-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		canary := filepath.Join(dir, "canary")
		if err := os.WriteFile(canary, []byte("CANARY-7d1f"), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Setenv("ORQEST_CANARY_ENV", "secret-env-value")

		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		var accepted atomic.Int32
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				accepted.Add(1)
				c.Close()
			}
		}()
		port := ln.Addr().(*net.TCPAddr).Port

		code := `import os, socket, subprocess, ctypes
r = {}
def attempt(name, f):
    try:
        r[name] = "ALLOWED: " + repr(f())
    except BaseException as e:
        r[name] = "denied: " + type(e).__name__ + ": " + str(e)
def nonzero(v):
    if v == 0:
        return "exit status 0"
    raise OSError("failed with %r" % (v,))
def nonneg(v):
    if v >= 0:
        return v
    raise OSError("returned %r (errno %d)" % (v, ctypes.get_errno()))
libc = ctypes.CDLL(None, use_errno=True)
attempt("read_canary", lambda: open(args["canary"]).read())
attempt("read_passwd", lambda: open("/etc/passwd").read())
attempt("os_open_canary", lambda: os.read(os.open(args["canary"], os.O_RDONLY), 100))
attempt("os_open_write", lambda: os.open(args["dir"] + "/written", os.O_WRONLY | os.O_CREAT, 0o666))
attempt("libc_open_canary", lambda: nonneg(libc.open(args["canary"].encode(), 0)))
attempt("listdir", lambda: os.listdir(args["dir"]))
attempt("write_file", lambda: open(args["dir"] + "/written", "w").write("x"))
attempt("write_tmp", lambda: open("/tmp/orqest-containment-escape", "w").write("x"))
attempt("mkdir", lambda: os.mkdir(args["dir"] + "/made"))
attempt("connect_tcp", lambda: socket.create_connection(("127.0.0.1", args["port"]), timeout=2))
attempt("udp_socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
attempt("unix_socket", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
attempt("raw_socket_syscall", lambda: nonneg(libc.syscall(41, 2, 1, 0)))
attempt("env_var", lambda: os.environ["ORQEST_CANARY_ENV"])
attempt("getenv_libc", lambda: nonneg(-1 if not libc.getenv(b"ORQEST_CANARY_ENV") else 1))
attempt("host_environ", lambda: open("/proc/%d/environ" % args["host_pid"], "rb").read())
attempt("system", lambda: nonzero(os.system("touch " + args["dir"] + "/spawned")))
attempt("subprocess", lambda: subprocess.run(["/bin/touch", args["dir"] + "/spawned"]).returncode)
attempt("fork", lambda: os.fork())
attempt("execv", lambda: os.execv("/bin/touch", ["touch", args["dir"] + "/spawned"]))
attempt("posix_spawn", lambda: os.posix_spawn("/bin/touch", ["touch", args["dir"] + "/spawned"], {}))
attempt("kill_host", lambda: os.kill(args["host_pid"], 0))
attempt("unshare", lambda: nonneg(libc.unshare(0x10000000)))
attempt("ptrace", lambda: nonneg(libc.ptrace(16, args["host_pid"], 0, 0)))
attempt("setuid_root", lambda: os.setuid(0))
attempt("sysinfo", lambda: nonneg(libc.sysinfo(ctypes.create_string_buffer(256))))
if args["proc_hidden"]:
    attempt("stat_host_pid", lambda: os.stat("/proc/%d" % args["host_pid"]))
    attempt("stat_pid_1", lambda: os.stat("/proc/1"))
    attempt("proc_self", lambda: os.stat("/proc/self"))
return r`
		hidden := slices.Contains(s.Layers, runner.LayerProcHidden)
		if !hidden {
			t.Logf("proc_hidden not in force here (%s): host pids are visible", s.missingText())
		}
		argsJSON, _ := json.Marshal(map[string]any{"canary": canary, "dir": dir, "port": port, "host_pid": os.Getpid(), "proc_hidden": hidden})
		res := execute(t, b, shared.ExecuteRequest{Code: code, Args: argsJSON, Timeout: 10 * time.Second,
			AllowedImports: []string{"os", "socket", "subprocess", "ctypes"}})
		if !res.Success {
			t.Fatalf("%s: %s\nstderr: %s", res.ErrorKind, res.Error, res.Stderr)
		}
		var r map[string]string
		if err := json.Unmarshal(res.Output, &r); err != nil {
			t.Fatal(err)
		}
		if len(r) < 20 {
			t.Fatalf("not every attempt reported: %v", r)
		}
		for name, outcome := range r {
			if !strings.HasPrefix(outcome, "denied: ") {
				t.Errorf("%s: %s", name, outcome)
			} else {
				t.Logf("%-20s %s", name, outcome)
			}
		}
		if n := accepted.Load(); n != 0 {
			t.Errorf("the listener accepted %d connections", n)
		}
		for _, f := range []string{"written", "made", "spawned"} {
			if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
				t.Errorf("%s exists", f)
			}
		}
		if _, err := os.Stat("/tmp/orqest-containment-escape"); err == nil {
			os.Remove("/tmp/orqest-containment-escape")
			t.Error("/tmp/orqest-containment-escape was written")
		}
	})
}

// The C loop is what the zygote runs when offered, and not when disabled;
// both serve, and neither leaves a child behind after Shutdown.
func TestForkCoreLoadedOrNot(t *testing.T) {
	b := newTestBackend(t)
	requireCore(t, b)
	wantSuccess(t, execute(t, b, shared.ExecuteRequest{Code: "return 6*7"}), "42")
	configure(t, b, `{"forkcore":"none"}`)
	wantSuccess(t, execute(t, b, shared.ExecuteRequest{Code: "return 6*7"}), "42")
	inC, _ := b.zygotes.Peek("").Core()
	if inC {
		t.Fatal(`forkcore = "none" still runs the C loop`)
	}
}

// A forkcore whose bytes are not the ones this build was made with is
// refused (Configure fails, naming both hashes); a missing explicit path
// fails too, while a missing auto-discovered one only falls back.
func TestForkCoreChecked(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, ForkCoreName)
	if err := os.WriteFile(fake, []byte("\x7fELF not the real thing"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := forkCoreSHA256
	t.Cleanup(func() { forkCoreSHA256 = old })
	forkCoreSHA256 = strings.Repeat("ab", 32)

	b := newTestBackend(t)
	_, err := b.Configure(context.Background(), shared.ConfigureRequest{Config: json.RawMessage(`{"forkcore":"` + fake + `"}`)})
	if !errors.Is(err, shared.ErrFailedPrecondition) || !strings.Contains(err.Error(), forkCoreSHA256) {
		t.Fatalf("tampered forkcore: got %v, want ErrFailedPrecondition naming the expected sha256", err)
	}
	_, err = b.Configure(context.Background(), shared.ConfigureRequest{Config: json.RawMessage(`{"forkcore":"` + filepath.Join(dir, "missing.so") + `"}`)})
	if !errors.Is(err, shared.ErrUnavailable) {
		t.Fatalf("missing explicit forkcore: got %v, want ErrUnavailable", err)
	}
	t.Setenv(forkCoreEnv, "")
	data, why, err := loadForkCore("")
	if err != nil || data != nil || why == "" {
		t.Fatalf("auto-discovery without a core beside the test binary: data=%d bytes why=%q err=%v", len(data), why, err)
	}
}

// A zygote that is offered bytes that are no shared object says why and
// loops in Python: the plugin still serves.
func TestForkCoreUnloadableFallsBack(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.so")
	if err := os.WriteFile(junk, []byte("not an ELF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := forkCoreSHA256
	t.Cleanup(func() { forkCoreSHA256 = old })
	forkCoreSHA256 = ""
	b := newTestBackend(t)
	configure(t, b, `{"forkcore":"`+junk+`"}`)
	wantSuccess(t, execute(t, b, shared.ExecuteRequest{Code: "return 'served'"}), `"served"`)
	inC, why := b.zygotes.Peek("").Core()
	if inC || why == "" {
		t.Fatalf("junk core: in C = %v, reason %q; want the Python loop and a reason", inC, why)
	}
}

// warm = false keeps bodies out of the zygote: every child checks the body
// itself, however often it runs; by default a child forked after the
// second run finds it warm. (The program records which pids ran the
// in-child checker; the body reports whether its own process did.)
func TestWarmConfig(t *testing.T) {
	prog := runnertest.CheckRecordingProgram()
	body := "import sys, os\nreturn os.getpid() in sys.orq_checked_in"
	for _, tc := range []struct {
		cfg      string
		wantWarm bool
	}{{`{"mode":"forkserver"}`, true}, {`{"mode":"forkserver","warm":false}`, false}} {
		t.Run(tc.cfg, func(t *testing.T) {
			b := newTestBackend(t)
			b.test = testHooks{skipValidation: true, rules: permissiveRules(), program: prog}
			configure(t, b, tc.cfg)
			warm := 0
			for n := 0; n < 20; n++ {
				res := execute(t, b, shared.ExecuteRequest{Code: body, AllowedImports: []string{"sys", "os"}})
				if !res.Success {
					t.Fatalf("run %d: %s: %s", n, res.ErrorKind, res.Error)
				}
				if string(res.Output) == "false" {
					warm++
				}
			}
			if tc.wantWarm && warm == 0 {
				t.Error("no child found the body warm in 20 runs")
			}
			if !tc.wantWarm && warm > 0 {
				t.Errorf("warm = false, yet %d of 20 children did not check the body themselves", warm)
			}
		})
	}
}
