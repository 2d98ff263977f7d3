package pyproc_test

import (
	"strings"
	"syscall"
	"testing"

	"github.com/orqest/sandbox/internal/pyproc"
	"github.com/orqest/sandbox/shared"
)

// TestClassifyDeathNamesExitCodes: a child that exits with one of the
// runner's exit codes is reported by what the code means, not a bare
// number; any other status keeps its number.
func TestClassifyDeathNamesExitCodes(t *testing.T) {
	kind, msg := pyproc.ClassifyDeath(syscall.WaitStatus(76<<8), 0, 0, 0, "")
	if kind != shared.KindRuntime || !strings.Contains(msg, "status 76 (Landlock could not be applied") {
		t.Errorf("status 76: %s %q", kind, msg)
	}
	_, msg = pyproc.ClassifyDeath(syscall.WaitStatus(79<<8), 0, 0, 0, "")
	if !strings.Contains(msg, "memory or CPU limit could not be applied") {
		t.Errorf("status 79: %q", msg)
	}
	// A child with no memory left for its response exits with ExitMemory:
	// a memory kill by its code, whatever stderr says.
	kind, msg = pyproc.ClassifyDeath(syscall.WaitStatus(72<<8), 0, 64, 5, "")
	if kind != shared.KindMemory || !strings.Contains(msg, "64 MB") {
		t.Errorf("status 72: %s %q", kind, msg)
	}
	// User output that merely mentions MemoryError decides nothing.
	kind, _ = pyproc.ClassifyDeath(syscall.WaitStatus(1<<8), 0, 64, 5, "print: MemoryError")
	if kind != shared.KindRuntime {
		t.Errorf("status 1 with MemoryError on stderr: %s, want %s", kind, shared.KindRuntime)
	}
	_, msg = pyproc.ClassifyDeath(syscall.WaitStatus(3<<8), 0, 0, 0, "")
	if !strings.Contains(msg, "status 3 without a result") {
		t.Errorf("status 3: %q", msg)
	}
}
