package pyproc

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// TestSweepStaleTempDirs: a directory of a dead plugin is removed; one of a
// live process, and unrelated names, are kept.
func TestSweepStaleTempDirs(t *testing.T) {
	dir := t.TempDir()
	// A pid that certainly is gone: a process we started and reaped.
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := cmd.Process.Pid
	mk := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Join(p, "sub"), 0o700); err != nil {
			t.Fatal(err)
		}
		return p
	}
	stale := mk(tempBase + strconv.Itoa(dead) + "-123")
	live := mk(tempPrefix() + "456")
	other := mk("orqest-sandbox-notapid")
	unrelated := mk("something-else")
	n, err := SweepStaleTempDirs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("removed %d, want 1", n)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale dir still there: %v", err)
	}
	for _, p := range []string{live, other, unrelated} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s removed: %v", p, err)
		}
	}
}
