package seccomp

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// testdata/<kind>_amd64.hex holds the programs the runner's Python code
// assembled by hand from bare x86_64 numbers before this package built
// them: denylists, as every program was then.
func oldProgram(t *testing.T, k Kind) filter {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("testdata", k.String()+"_amd64.hex"))
	if err != nil {
		t.Fatal(err)
	}
	old, err := hex.DecodeString(string(bytes.TrimSpace(text)))
	if err != nil {
		t.Fatal(err)
	}
	return load(t, old)
}

// The zygote's program takes the old one's action on every system call
// number 0..600, through every ABI, with every argument value the programs
// tell apart, except that it also refuses changeCalls (metadata writes,
// links, renames, inotify), which the old one let through.
func TestZygoteSameAsPythonProgram(t *testing.T) {
	was, now := oldProgram(t, Zygote), loadKind(t, Zygote)
	added := map[uint32]bool{}
	for _, c := range changeCalls() {
		added[c.nr] = true
	}
	n, newly := 0, 0
	for _, arch := range []uint32{auditArch, unix.AUDIT_ARCH_I386, unix.AUDIT_ARCH_AARCH64} {
		for _, d := range sweep(arch) {
			n++
			got, want := now.run(t, d), was.run(t, d)
			if arch == auditArch && added[d.nr] && want == retAllow && got == retEPERM {
				newly++
				continue
			}
			if got != want {
				t.Errorf("arch %#x nr %d args %#x: %s, was %s", arch, d.nr, d.args, actionName(got), actionName(want))
			}
		}
	}
	t.Logf("%d system calls compared, %d newly refused", n, newly)
	if newly == 0 {
		t.Error("none of changeCalls is newly refused")
	}
}

// The allowlists are never more permissive than the old denylists, a
// process sealed on its own (Full) and a fork-server child (the zygote's
// program with the child's stacked on it) alike: on every system call
// number 0..600, through every ABI, with every argument value the programs
// tell apart, they take the old action, or refuse with EPERM what the old
// one allowed and the allowlist does not name (sysinfo with ENOSYS). What they newly refuse is
// most of the table.
func TestAllowlistsNarrowThePythonPrograms(t *testing.T) {
	named := map[uint32]bool{}
	for _, c := range allowedCalls() {
		named[c.nr] = true
	}
	named[unix.SYS_CLONE], named[unix.SYS_PRLIMIT64], named[unix.SYS_IOCTL] = true, true, true
	oldZygote, oldChild, oldFull := oldProgram(t, Zygote), oldProgram(t, Child), oldProgram(t, Full)
	zygote, child, full := loadKind(t, Zygote), loadKind(t, Child), loadKind(t, Full)
	for _, c := range []struct {
		name     string
		was, now func(seccompData) uint32
	}{
		{"full", func(d seccompData) uint32 { return oldFull.run(t, d) }, func(d seccompData) uint32 { return full.run(t, d) }},
		{"zygote+child", func(d seccompData) uint32 { return stacked(t, d, oldZygote, oldChild) },
			func(d seccompData) uint32 { return stacked(t, d, zygote, child) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, same := 0, 0
			newly := map[uint32]bool{}
			for _, arch := range []uint32{auditArch, unix.AUDIT_ARCH_I386, unix.AUDIT_ARCH_AARCH64} {
				for _, d := range sweep(arch) {
					n++
					got, want := c.now(d), c.was(d)
					switch {
					case got == want:
						same++
					case arch == auditArch && want == retAllow && got == retEPERM && !named[d.nr]:
						newly[d.nr] = true
					case arch == auditArch && want == retAllow && got == retNOSYS && d.nr == unix.SYS_SYSINFO:
						newly[d.nr] = true // the host's figures: ENOSYS
					default:
						t.Errorf("arch %#x nr %d args %#x: %s, was %s", arch, d.nr, d.args, actionName(got), actionName(want))
					}
				}
			}
			t.Logf("%d system calls compared, %d alike; %d numbers newly refused", n, same, len(newly))
			if len(newly) < 200 {
				t.Errorf("only %d numbers newly refused", len(newly))
			}
		})
	}
}
