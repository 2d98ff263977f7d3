package runner_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/runner/seccomp"
)

// An encoded Seal carries this architecture's kernel table, with the
// programs of package seccomp; the Seal's own fields are unchanged.
func TestSealCarriesKernelTable(t *testing.T) {
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skip("no seccomp programs on", runtime.GOARCH)
	}
	req := runner.Request{Code: "return 1", Seal: &runner.Seal{UID: 7, Require: []string{runner.LayerSeccomp}}}
	data, err := req.Encode()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Seal struct {
			UID     int                 `json:"uid"`
			Require []string            `json:"require"`
			Kernel  *runner.KernelTable `json:"kernel"`
		} `json:"seal"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Seal.UID != 7 || len(doc.Seal.Require) != 1 {
		t.Errorf("seal fields lost: %s", data)
	}
	k := doc.Seal.Kernel
	if k == nil {
		t.Fatalf("no kernel table in %s", data)
	}
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		t.Fatal(err)
	}
	if m := unix.ByteSliceToString(uts.Machine[:]); k.Machine != m {
		t.Errorf("machine %q, uname says %q", k.Machine, m)
	}
	if k.Sys["capset"] != unix.SYS_CAPSET || k.Const["PR_SET_SECCOMP"] != unix.PR_SET_SECCOMP {
		t.Errorf("numbers: %v %v", k.Sys, k.Const)
	}
	for _, kind := range seccomp.Kinds() {
		want, err := seccomp.Program(kind)
		if err != nil {
			t.Fatal(err)
		}
		got, err := hex.DecodeString(k.Seccomp[kind.String()])
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s program: %x (%v), want %x", kind, got, err, want)
		}
	}
	// Decoding ignores the table; encoding adds it again.
	var back runner.Seal
	if err := json.Unmarshal(mustJSON(t, doc.Seal), &back); err != nil {
		t.Fatal(err)
	}
	if back.UID != 7 {
		t.Errorf("round trip: %+v", back)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A seal config without a usable kernel table (an older sender, another
// machine's table) leaves the layers that need one missing: required, they
// fail the request closed before any code runs.
func TestSealWithoutKernelTableFailsClosed(t *testing.T) {
	for name, seal := range map[string]string{
		"no table":      `{"require":["seccomp"]}`,
		"other machine": `{"require":["seccomp"],"kernel":{"machine":"pdp11","sys":{},"const":{}}}`,
		"no programs":   `{"require":["seccomp"],"kernel":` + string(kernelTableWithout(t, "seccomp")) + `}`,
		"no_new_privs":  `{"require":["no_new_privs"]}`,
	} {
		t.Run(name, func(t *testing.T) {
			req := `{"op":"execute","code":"return 1","args":{},"allowed_imports":[],"rules":` +
				string(mustRules(t)) + `,"seal":` + seal + `}`
			resp, _, _ := runRaw(t, []byte(req))
			if resp.Success || resp.ErrorKind != runner.KindInternal || !strings.Contains(resp.Error, "required sealing layers") {
				t.Fatalf("did not fail closed: %+v", resp)
			}
			t.Log(resp.Error)
		})
	}
}

// kernelTableWithout returns this architecture's kernel table, encoded,
// without the member named drop.
func kernelTableWithout(t *testing.T, drop string) json.RawMessage {
	t.Helper()
	var doc struct {
		Kernel map[string]json.RawMessage `json:"kernel"`
	}
	if err := json.Unmarshal(mustJSON(t, runner.Seal{}), &doc); err != nil {
		t.Fatal(err)
	}
	delete(doc.Kernel, drop)
	return mustJSON(t, doc.Kernel)
}

// mustRules returns the rules table as a request carries it.
func mustRules(t *testing.T) json.RawMessage {
	t.Helper()
	data, err := runner.Request{Code: "return 1"}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Rules json.RawMessage `json:"rules"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Rules
}

// sealPrologue is trusted test code run after the runner program: it
// seals the process as the role of argv[1] ("full", "zygote" or "child":
// the zygote's layers, then the child's) from the seal config on stdin,
// with the runner's own functions; st is the seal's state.
const sealPrologue = `
import json, os, sys
cfg = json.loads(sys.stdin.read())
role = sys.argv[1]
st = _orq_seal_prepare(cfg)
if role == "child":
    _orq_seal_apply(st, "zygote")
_orq_seal_apply(st, role)
`

// sealEpilogue ends a probe: it prints out as JSON and exits.
const sealEpilogue = `sys.stdout.write(json.dumps(out))
sys.stdout.flush()
os._exit(0)
`

// needSealProbe skips a test of the sealed kernel layers where there is no
// interpreter or no seccomp program.
func needSealProbe(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(python); err != nil {
		t.Skipf("%s not available: %v", python, err)
	}
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skip("no seccomp programs on", runtime.GOARCH)
	}
}

// runSealProbe runs the runner program with its entry point replaced by
// probe (sealPrologue and what it does sealed) as role with arg, the seal
// config on stdin, and returns the JSON object it prints; skip is the
// reason to skip when the seal fails for a missing required layer ("":
// fail).
func runSealProbe(t *testing.T, probe, role, arg string, seal []byte, skip string) map[string]json.RawMessage {
	t.Helper()
	prog := runner.Program()
	prog = prog[:strings.LastIndex(prog, `if __name__ == "__main__":`)] + probe
	argv := runner.ArgvFor(python, prog, role, arg)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{}
	cmd.Dir = t.TempDir()
	cmd.Stdin = bytes.NewReader(seal)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if skip != "" && strings.Contains(stderr.String(), "required sealing layers") {
			t.Skipf("%s: %s", skip, stderr.String())
		}
		t.Fatalf("%v: stderr %s", err, stderr.String())
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %q (stderr %s)", err, out, stderr.String())
	}
	return got
}

// sealProbe is trusted test code run after the runner program: it seals
// the process as the role of argv[1] from the seal config on stdin (the
// Go-built programs, installed by the runner's own functions), then makes
// the system calls of argv[2] ([label, nr, args...]) and prints {label:
// errno} (0: the call succeeded).
const sealProbe = sealPrologue + `import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
out = {"layers": st["layers"]}
for call in json.loads(sys.argv[2]):
    args = [os.getpid() if a == "self" else a for a in call[1:]]
    ctypes.set_errno(0)
    r = libc.syscall(*[ctypes.c_long(a) for a in args])
    out[call[0]] = 0 if r >= 0 else ctypes.get_errno()
` + sealEpilogue

// Each program, sent in the Seal and installed by the runner in a real
// interpreter, makes the kernel fail the calls it refuses with its errno
// and lets the others through. Every probe is harmless should it run.
func TestSeccompInKernel(t *testing.T) {
	needSealProbe(t)
	const (
		ok     = 0
		eperm  = int(unix.EPERM)
		enosys = int(unix.ENOSYS)
		einval = int(unix.EINVAL)
		efault = int(unix.EFAULT)
		enotty = int(unix.ENOTTY)
	)
	type probe struct {
		label string
		call  []any
		want  map[string]int // by role
	}
	same := func(full, zygote int) map[string]int {
		return map[string]int{"full": full, "zygote": zygote, "child": full}
	}
	probes := []probe{
		{"getpid", []any{unix.SYS_GETPID}, same(ok, ok)},
		{"socket", []any{unix.SYS_SOCKET, unix.AF_UNIX, unix.SOCK_STREAM, 0}, same(eperm, eperm)},
		{"socketpair", []any{unix.SYS_SOCKETPAIR, unix.AF_UNIX, unix.SOCK_STREAM, 0, 0}, same(eperm, efault)},
		{"kill(self, 0)", []any{unix.SYS_KILL, "self", 0}, same(eperm, ok)},
		{"unshare(0)", []any{unix.SYS_UNSHARE, 0}, same(eperm, eperm)},
		{"execve(NULL)", []any{unix.SYS_EXECVE, 0, 0, 0}, same(eperm, eperm)},
		{"memfd_create(NULL)", []any{unix.SYS_MEMFD_CREATE, 0, 0}, same(eperm, eperm)},
		{"clone3(NULL, 0)", []any{unix.SYS_CLONE3, 0, 0}, same(enosys, einval)},
		// CLONE_THREAD without CLONE_SIGHAND: the kernel refuses it.
		{"clone(CLONE_THREAD)", []any{unix.SYS_CLONE, unix.CLONE_THREAD, 0, 0, 0, 0}, same(einval, einval)},
		{"clone(CLONE_THREAD|CLONE_NEWUSER)", []any{unix.SYS_CLONE, unix.CLONE_THREAD | unix.CLONE_NEWUSER, 0, 0, 0, 0}, same(eperm, einval)},
		{"prlimit64(0)", []any{unix.SYS_PRLIMIT64, 0, unix.RLIMIT_NOFILE, 0, 0}, same(ok, ok)},
		{"prlimit64(self)", []any{unix.SYS_PRLIMIT64, "self", unix.RLIMIT_NOFILE, 0, 0}, same(eperm, eperm)},
		{"ioctl(TIOCSTI)", []any{unix.SYS_IOCTL, 0, unix.TIOCSTI, 0}, same(eperm, eperm)},
		{"ioctl(TCGETS)", []any{unix.SYS_IOCTL, 0, unix.TCGETS, 0}, same(enotty, enotty)},
	}
	if runtime.GOARCH == "amd64" {
		probes = append(probes, probe{"x32 getpid", []any{0x40000000 | unix.SYS_GETPID}, same(eperm, eperm)})
	}
	var calls [][]any
	for _, p := range probes {
		calls = append(calls, append([]any{p.label}, p.call...))
	}
	seal := mustJSON(t, runner.Seal{Require: []string{runner.LayerNoNewPrivs, runner.LayerSeccomp}})
	for _, role := range []string{"full", "zygote", "child"} {
		t.Run(role, func(t *testing.T) {
			got := runSealProbe(t, sealProbe, role, string(mustJSON(t, calls)), seal, "")
			t.Logf("layers: %s", got["layers"])
			for _, p := range probes {
				var e int
				if err := json.Unmarshal(got[p.label], &e); err != nil {
					t.Fatalf("%s: %v", p.label, err)
				}
				if want := p.want[role]; e != want {
					t.Errorf("%s: errno %d (%v), want %d (%v)", p.label, e, unix.Errno(e), want, unix.Errno(want))
				}
			}
		})
	}
}
