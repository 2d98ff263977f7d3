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
	_, msg = pyproc.ClassifyDeath(syscall.WaitStatus(3<<8), 0, 0, 0, "")
	if !strings.Contains(msg, "status 3 without a result") {
		t.Errorf("status 3: %q", msg)
	}
}
