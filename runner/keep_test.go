package runner_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orqest/sandbox/runner"
)

// TestKeepEncoding runs testdata/keepcheck.py on runner.KeepProgram(): the
// saved-globals encoding's round trips, its refusals (functions, classes,
// instances, modules, generators, files, subclasses, cycles, the bounds)
// and a brief fuzz of its decoder with mutated nodes. numpy and pandas
// cases run where the interpreter has them (the data-science image's
// test in plugins/docker runs them there).
func TestKeepEncoding(t *testing.T) {
	prog := filepath.Join(t.TempDir(), "runner.py")
	if err := os.WriteFile(prog, []byte(runner.KeepProgram()), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(python, "-I", "-S", "-B", "testdata/keepcheck.py", prog, "7", "3000").CombinedOutput()
	if err != nil {
		t.Fatalf("keepcheck: %v\n%s", err, out)
	}
	if !strings.HasPrefix(string(out), "ok ") {
		t.Fatalf("keepcheck: %s", out)
	}
	t.Logf("%s", out)
}
