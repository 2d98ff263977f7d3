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
// apart.
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
			n := 0
			for _, arch := range []uint32{auditArch, unix.AUDIT_ARCH_I386, unix.AUDIT_ARCH_AARCH64} {
				for _, d := range sweep(arch) {
					n++
					if got, want := now.run(t, d), was.run(t, d); got != want {
						t.Errorf("arch %#x nr %d args %#x: %s, was %s", arch, d.nr, d.args, actionName(got), actionName(want))
					}
				}
			}
			t.Logf("%d system calls compared; %d instructions, was %d; bytes identical: %v",
				n, len(prog)/8, len(old)/8, bytes.Equal(prog, old))
		})
	}
}
