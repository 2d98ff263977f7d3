package pyproc_test

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orqest/sandbox/internal/pyproc"
	"github.com/orqest/sandbox/shared"
)

// TestClassifyDeathNamesExitCodes: a child that exits with one of the
// runner's exit codes is reported by what the code means, not a bare
// number; any other status keeps its number.
func TestClassifyDeathNamesExitCodes(t *testing.T) {
	kind, msg := pyproc.ClassifyDeath(syscall.WaitStatus(76<<8), 0, 0, 0, false, "")
	if kind != shared.KindRuntime || !strings.Contains(msg, "status 76 (Landlock could not be applied") {
		t.Errorf("status 76: %s %q", kind, msg)
	}
	_, msg = pyproc.ClassifyDeath(syscall.WaitStatus(79<<8), 0, 0, 0, false, "")
	if !strings.Contains(msg, "memory or CPU limit could not be applied") {
		t.Errorf("status 79: %q", msg)
	}
	// A child with no memory left for its response exits with ExitMemory:
	// a memory kill by its code, whatever stderr says.
	kind, msg = pyproc.ClassifyDeath(syscall.WaitStatus(72<<8), 0, 64, 5, false, "")
	if kind != shared.KindMemory || !strings.Contains(msg, "64 MB") {
		t.Errorf("status 72: %s %q", kind, msg)
	}
	// User output that merely mentions MemoryError decides nothing.
	kind, _ = pyproc.ClassifyDeath(syscall.WaitStatus(1<<8), 0, 64, 5, false, "print: MemoryError")
	if kind != shared.KindRuntime {
		t.Errorf("status 1 with MemoryError on stderr: %s, want %s", kind, shared.KindRuntime)
	}
	_, msg = pyproc.ClassifyDeath(syscall.WaitStatus(3<<8), 0, 0, 0, false, "")
	if !strings.Contains(msg, "status 3 without a result") {
		t.Errorf("status 3: %q", msg)
	}

	// Signals: each limit leaves its trace, and a SIGKILL without one
	// came from outside.
	for _, c := range []struct {
		name      string
		sig       syscall.Signal
		cpu       time.Duration
		oomKilled bool
		kind      shared.ErrorKind
		says      string
	}{
		{"outside SIGKILL", syscall.SIGKILL, 0, false, shared.KindKilled, "killed by SIGKILL from outside the sandbox"},
		{"cgroup OOM kill", syscall.SIGKILL, 0, true, shared.KindMemory, "ran out of memory (an OOM kill"},
		{"RLIMIT_CPU hard limit", syscall.SIGKILL, 5 * time.Second, false, shared.KindTimeout, "CPU time limit of 5s"},
		{"RLIMIT_CPU", syscall.SIGXCPU, time.Second, false, shared.KindTimeout, "CPU time limit of 5s"},
		{"no memory to raise MemoryError", syscall.SIGSEGV, 0, false, shared.KindMemory, "killed by SIGSEGV under a memory limit of 128 MB"},
		{"SIGTERM", syscall.SIGTERM, 0, false, shared.KindKilled, "killed by SIGTERM from outside the sandbox"},
	} {
		kind, msg := pyproc.ClassifyDeath(syscall.WaitStatus(c.sig), c.cpu, 128, 5, c.oomKilled, "")
		if kind != c.kind || !strings.Contains(msg, c.says) {
			t.Errorf("%s: %s %q, want %s saying %q", c.name, kind, msg, c.kind, c.says)
		}
	}
}
