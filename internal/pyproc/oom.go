package pyproc

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// cgroupRoot is where the cgroup hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// oomFile is the file whose "oom_kill" line counts the processes of this
// process's memory cgroup (and its descendants) that an OOM killer ended:
// memory.events on cgroup v2, memory.oom_control on v1. "" when there is
// none to read (no cgroup filesystem, a kernel that does not count). The
// children this process starts run in the same cgroup.
var oomFile = sync.OnceValue(func() string {
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return ""
	}
	for _, f := range oomFileCandidates(cgroupRoot, self) {
		if _, ok := readOOMKills(f); ok {
			return f
		}
	}
	return ""
})

// oomFileCandidates lists, best first, the files that may count the OOM
// kills of the memory cgroup /proc/self/cgroup (self) names, under the
// cgroup mount root. A container without its own cgroup namespace sees the
// host's path of its cgroup in /proc/self/cgroup, while its own cgroup is
// mounted at the root: the root's file comes after the named one.
func oomFileCandidates(root string, self []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(self))
	for sc.Scan() {
		// hierarchy-ID:controller-list:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		path := filepath.Clean("/" + parts[2])
		switch {
		case parts[0] == "0" && parts[1] == "":
			out = append(out, filepath.Join(root, path, "memory.events"), filepath.Join(root, "memory.events"))
		case hasController(parts[1], "memory"):
			out = append(out, filepath.Join(root, "memory", path, "memory.oom_control"), filepath.Join(root, "memory", "memory.oom_control"))
		}
	}
	return out
}

func hasController(list, name string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// readOOMKills reads the oom_kill counter of file; false when it cannot.
func readOOMKills(file string) (uint64, bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	return parseOOMKills(b)
}

// parseOOMKills finds the "oom_kill N" line of a memory.events or
// memory.oom_control file.
func parseOOMKills(b []byte) (uint64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok || k != "oom_kill" {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		return n, err == nil
	}
	return 0, false
}

// oomWatch is the OOM-kill count of this process's cgroup when a child
// started: a count that grew by the time the child died is the evidence of
// a memory kill by the cgroup's limit (or the kernel's OOM killer). With
// children of the same cgroup dying at once, one killed from outside could
// be taken for the OOM victim; without a cgroup to read, no SIGKILL is
// taken for a memory kill.
type oomWatch struct {
	file  string
	count uint64
}

// watchOOM reads the count now (call it before the child may run code).
func watchOOM() oomWatch {
	f := oomFile()
	if f == "" {
		return oomWatch{}
	}
	n, ok := readOOMKills(f)
	if !ok {
		return oomWatch{}
	}
	return oomWatch{file: f, count: n}
}

// fired reports whether the count grew since watchOOM.
func (w oomWatch) fired() bool {
	if w.file == "" {
		return false
	}
	n, ok := readOOMKills(w.file)
	return ok && n > w.count
}
