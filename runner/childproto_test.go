package runner_test

import (
	"os"
	"strings"
	"testing"

	"github.com/orqest/sandbox/runner"
)

// TestGeneratedProtocol: py/protocol.py and forkcore/protocol.h are what
// `go generate ./runner` writes from childproto.go today.
func TestGeneratedProtocol(t *testing.T) {
	for path, want := range map[string]string{
		"py/protocol.py":      runner.GeneratedPython(),
		"forkcore/protocol.h": runner.GeneratedCHeader(),
	} {
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("%s is stale: run `go generate ./runner`", path)
		}
	}
	if !strings.HasPrefix(runner.ProgramWithComments(), runner.GeneratedPython()) {
		t.Error("Program() does not start with the protocol's constants")
	}
}

// TestExitCodesNamed: every exit code the runner's Python and C use is one
// childproto.go names (the sources use the generated constants, never a
// bare number).
func TestExitCodesNamed(t *testing.T) {
	for _, path := range []string{"py/execute.py", "py/zygote.py", "py/seal.py", "forkcore/forkcore.c"} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			i := strings.Index(line, "_exit(")
			if i < 0 {
				continue
			}
			arg := line[i+len("_exit("):]
			if strings.HasPrefix(arg, "0)") || strings.HasPrefix(arg, "_orq_exit_") || strings.HasPrefix(arg, "ORQ_EXIT_") {
				continue
			}
			t.Errorf("%s: exit with a bare code: %s", path, strings.TrimSpace(line))
		}
	}
	for c := runner.ExitCode(0); c < 256; c++ {
		if c.Known() && c.String() == "" {
			t.Errorf("exit code %d has no text", int(c))
		}
	}
	if runner.ExitLandlock.String() != "Landlock could not be applied to the sandbox child" {
		t.Errorf("ExitLandlock = %q", runner.ExitLandlock)
	}
}
