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
// them. The Go programs take the same action on every system call number
// 0..600, through every ABI, with every argument value the programs tell
// apart — except that they also refuse changeCalls (metadata writes,
// links, renames, inotify), which the Python programs let through.
func TestSameAsPythonPrograms(t *testing.T) {
	for _, k := range Kinds() {
		t.Run(k.String(), func(t *testing.T) {
			text, err := os.ReadFile(filepath.Join("testdata", k.String()+"_amd64.hex"))
			if err != nil {
				t.Fatal(err)
			}
			old, err := hex.DecodeString(string(bytes.TrimSpace(text)))
			if err != nil {
				t.Fatal(err)
			}
			prog, err := Program(k)
			if err != nil {
				t.Fatal(err)
			}
			was, now := load(t, old), load(t, prog)
			added := map[uint32]bool{}
			for _, c := range changeCalls() {
				added[c.nr] = true
			}
			n, newly := 0, 0
			for _, arch := range []uint32{auditArch, unix.AUDIT_ARCH_I386, unix.AUDIT_ARCH_AARCH64} {
				for _, d := range sweep(arch) {
					n++
					got, want := now.run(t, d), was.run(t, d)
					if arch == auditArch && added[d.nr] && want == unix.SECCOMP_RET_ALLOW && got == unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM) {
						newly++
						continue
					}
					if got != want {
						t.Errorf("arch %#x nr %d args %#x: %s, was %s", arch, d.nr, d.args, actionName(got), actionName(want))
					}
				}
			}
			t.Logf("%d system calls compared, %d newly refused; %d instructions, was %d",
				n, newly, len(prog)/8, len(old)/8)
			if newly == 0 && k != Child { // the child program stacks on the zygote's
				t.Error("none of changeCalls is newly refused")
			}
		})
	}
}
