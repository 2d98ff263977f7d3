package procfs

import (
	"strconv"
	"syscall"
)

// StartTime returns pid's start time (field 22 of /proc/<pid>/stat, clock
// ticks since boot) as a decimal string, or "" if the process does not
// exist. Recorded beside a pid (on a container or pod label), it tells the
// process that held the pid from one that reuses it.
func StartTime(pid int) string {
	st, err := ReadStat(pid)
	if err != nil {
		return ""
	}
	return strconv.FormatUint(st.StartTime, 10)
}

// Alive reports whether the process recorded as pidLabel (decimal) with
// start time startLabel ("" = any) still runs on this machine.
func Alive(pidLabel, startLabel string) bool {
	pid, err := strconv.Atoi(pidLabel)
	if err != nil || pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && err != syscall.EPERM {
		return false
	}
	return startLabel == "" || StartTime(pid) == startLabel
}
