package procfs

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// KillPending reports whether a SIGKILL is pending for pid (in its shared
// or its main thread's pending set, /proc/<pid>/status ShdPnd and SigPnd):
// from the moment kill(2) queues it until the process is reaped, the
// process runs no code of its own again. A process that does not exist is
// an error satisfying errors.Is(err, fs.ErrNotExist).
func KillPending(pid int) (bool, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false, err
	}
	return ParseKillPending(b)
}

// ParseKillPending is KillPending on the text of a status file.
func ParseKillPending(status []byte) (bool, error) {
	const bit = uint64(1) << (syscall.SIGKILL - 1)
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		name, val, ok := bytes.Cut(sc.Bytes(), []byte(":"))
		if !ok || (string(name) != "SigPnd" && string(name) != "ShdPnd") {
			continue
		}
		mask, err := strconv.ParseUint(string(bytes.TrimSpace(val)), 16, 64)
		if err != nil {
			return false, fmt.Errorf("%w: %s: %v", ErrMalformed, name, err)
		}
		if mask&bit != 0 {
			return true, nil
		}
		found++
	}
	if found == 0 {
		return false, fmt.Errorf("%w: no SigPnd or ShdPnd line", ErrMalformed)
	}
	return false, nil
}
