package pyproc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// tempBase is the prefix of the private working directories spawn mode
// creates; the owning plugin's pid follows it, so a directory left behind by
// a plugin that was killed mid-call (SIGKILL runs no deferred cleanup) can be
// recognised and swept by the next plugin process.
const tempBase = "orqest-sandbox-"

func tempPrefix() string { return fmt.Sprintf("%s%d-", tempBase, os.Getpid()) }

// SweepStaleTempDirs removes spawn-mode working directories in dir (the
// system temp directory when empty) whose owning process no longer exists.
// Plugins call it once at start; it returns how many it removed.
func SweepStaleTempDirs(dir string) (int, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	removed := 0
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || !strings.HasPrefix(name, tempBase) {
			continue
		}
		rest := strings.TrimPrefix(name, tempBase)
		pidStr, _, ok := strings.Cut(rest, "-")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 0 || processAlive(pid) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	return removed, errors.Join(errs...)
}

// processAlive reports whether pid exists (signal 0; EPERM means it exists
// under another user).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
