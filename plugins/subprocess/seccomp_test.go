package subprocess

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/orqest/sandbox/rules"
	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
)

// requireSeccomp skips, loudly, where seccomp is not in force.
func requireSeccomp(t *testing.T, b *Backend) {
	t.Helper()
	s, err := b.probeSeal(context.Background(), DefaultPython, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(s.Layers, runner.LayerSeccomp) {
		t.Skipf("SKIP: seccomp not in force here (%s)", s.missingText())
	}
}

// TestContainmentAllowlist runs, with the Python layers bypassed, raw
// system calls (ctypes' syscall, so no library wrapper stands in the way)
// that no denylist of the past named and that CPython never makes sealed:
// the seccomp allowlist must refuse each with EPERM, in every mode. Each
// would succeed, or fail with another errno, without it. getpid is the
// control: the same path reaches an allowed call.
func TestContainmentAllowlist(t *testing.T) {
	modes(t, func(t *testing.T, b *Backend) {
		requireSeccomp(t, b)
		b.test = bypassValidation()
		calls := map[string][]int64{
			// landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION): the ABI version.
			"landlock_create_ruleset": {unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION},
			// seccomp(SECCOMP_GET_NOTIF_SIZES, 0, buf): three sizes.
			"seccomp":    {unix.SYS_SECCOMP, unix.SECCOMP_GET_NOTIF_SIZES, 0, -1},
			"prctl":      {unix.SYS_PRCTL, unix.PR_GET_DUMPABLE},
			"getpgid":    {unix.SYS_GETPGID, 0},
			"getsid":     {unix.SYS_GETSID, 0},
			"eventfd2":   {unix.SYS_EVENTFD2, 0, 0},
			"timerfd":    {unix.SYS_TIMERFD_CREATE, unix.CLOCK_MONOTONIC, 0},
			"membarrier": {unix.SYS_MEMBARRIER, 0, 0, 0},
			// wait4(-1, NULL, WNOHANG, NULL): ECHILD without the filter.
			"wait4":              {unix.SYS_WAIT4, -1, 0, unix.WNOHANG, 0},
			"sched_getscheduler": {unix.SYS_SCHED_GETSCHEDULER, 0},
			"epoll_create1":      {unix.SYS_EPOLL_CREATE1, 0},
			"pipe2":              {unix.SYS_PIPE2, -1, 0},
			"chdir":              {unix.SYS_CHDIR, -1},
			// A number beyond every table: ENOSYS without the filter.
			"nr_1000": {1000},
			// In the old denylist too.
			"sethostname": {unix.SYS_SETHOSTNAME, -1, 0},
		}
		code := `import ctypes
libc = ctypes.CDLL(None, use_errno=True)
r = {}
buf = ctypes.create_string_buffer(64)
for name, call in args["calls"].items():
    a = [ctypes.addressof(buf) if call[i] == -1 and i > 0 else call[i] for i in range(len(call))]
    if name == "pipe2":
        a[1] = ctypes.addressof(buf)
    ctypes.set_errno(0)
    v = libc.syscall(*[ctypes.c_long(x) for x in a])
    r[name] = [v, ctypes.get_errno()]
ctypes.set_errno(0)
r["getpid (allowed)"] = [libc.syscall(ctypes.c_long(args["getpid"])), ctypes.get_errno()]
return r`
		argsJSON, _ := json.Marshal(map[string]any{"calls": calls, "getpid": unix.SYS_GETPID})
		res := execute(t, b, shared.ExecuteRequest{Code: code, Args: argsJSON, Timeout: 10 * time.Second,
			AllowedImports: []string{"ctypes"}})
		if !res.Success {
			t.Fatalf("%s: %s\nstderr: %s", res.ErrorKind, res.Error, res.Stderr)
		}
		var r map[string][2]int64
		if err := json.Unmarshal(res.Output, &r); err != nil {
			t.Fatalf("%s: %v", res.Output, err)
		}
		if len(r) != len(calls)+1 {
			t.Fatalf("not every call reported: %s", res.Output)
		}
		for name, got := range r {
			if name == "getpid (allowed)" {
				if got[0] <= 0 {
					t.Errorf("getpid through syscall(2) failed: %v", got)
				}
				continue
			}
			if got[0] != -1 || got[1] != int64(unix.EPERM) {
				t.Errorf("%s: returned %d, errno %d; want -1, EPERM", name, got[0], got[1])
			} else {
				t.Logf("%-20s refused: EPERM", name)
			}
		}
	})
}

// TestStdlibUnderAllowlist runs, sealed in every mode, a body that uses
// every standard library module the allowlist was derived for (threads,
// sleeps, clocks, random bytes, timezone files, uuid1 included), with the
// Python layers bypassed so that threading and io import: its result must
// be exactly what the same body returns in an unsealed python3.
func TestStdlibUnderAllowlist(t *testing.T) {
	src, err := os.ReadFile("testdata/stdlib.py")
	if err != nil {
		t.Fatal(err)
	}
	body := string(src)
	mods := []string{}
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, "import "); ok {
			for _, m := range strings.Split(rest, ",") {
				mods = append(mods, strings.TrimSpace(m))
			}
		}
	}
	wrapper := "import json\ndef tool(args):\n    " + strings.ReplaceAll(body, "\n", "\n    ") +
		"\nprint(json.dumps(tool({})))\n"
	plain, err := exec.Command(DefaultPython, "-I", "-S", "-B", "-c", wrapper).Output()
	if err != nil {
		t.Fatalf("unsealed python3: %v", err)
	}
	var want any
	if err := json.Unmarshal(plain, &want); err != nil {
		t.Fatalf("unsealed output %s: %v", plain, err)
	}
	var tbl map[string]any
	if err := json.Unmarshal(rules.JSON(), &tbl); err != nil {
		t.Fatal(err)
	}
	tbl["dangerous_imports"] = []string{}
	tbl["module_surfaces"] = map[string]any{}
	permissive, err := json.Marshal(tbl)
	if err != nil {
		t.Fatal(err)
	}
	modes(t, func(t *testing.T, b *Backend) {
		requireSeccomp(t, b)
		h := bypassValidation()
		h.rules = permissive
		b.test = h
		res := execute(t, b, shared.ExecuteRequest{Code: body, AllowedImports: mods, Timeout: 20 * time.Second})
		if !res.Success {
			t.Fatalf("%s: %s\nstderr: %s", res.ErrorKind, res.Error, res.Stderr)
		}
		var got any
		if err := json.Unmarshal(res.Output, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("sealed:   %s\nunsealed: %s", res.Output, plain)
		}
	})
}
