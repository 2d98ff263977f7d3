// Package procfs reads a process's /proc/<pid>/stat: the one parser of it
// (state, parent, process group, flags, start time), shared by the host's
// plugin liveness check, the fork-server's group reaper and the docker
// plugin's container owner records; and the signals pending for it, from
// /proc/<pid>/status.
package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// Stat is what the callers read of /proc/<pid>/stat.
type Stat struct {
	// State is the one-letter state: R, S, D, Z (zombie), X (dead), ...
	State byte
	PPID  int
	PGRP  int
	// Flags is field 9: the kernel's PF_* flags of the process.
	Flags uint64
	// StartTime is field 22: the start time in clock ticks since boot. With
	// the pid it names a process for good (a reused pid starts later).
	StartTime uint64
}

// Gone reports whether the process has exited: a zombie or dead state.
func (s Stat) Gone() bool { return s.State == 'Z' || s.State == 'X' }

// pfExiting is the kernel's PF_EXITING: set when the process begins to
// exit, before it is a zombie.
const pfExiting = 0x4

// Exiting reports whether the kernel is tearing the process down (it
// began to exit and is not a zombie yet): it runs no more code of its own.
func (s Stat) Exiting() bool { return s.Flags&pfExiting != 0 }

// ErrMalformed is returned for a stat line or a status file that does
// not parse.
var ErrMalformed = errors.New("procfs: malformed /proc data")

// ReadStat reads /proc/<pid>/stat. A process that does not exist is an
// error satisfying errors.Is(err, fs.ErrNotExist).
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, err
	}
	return ParseStat(b)
}

// ParseStat parses one stat line. The command name (field 2) is in
// parentheses and may itself contain spaces and parentheses: the fields
// after it start after the last ')'.
func ParseStat(b []byte) (Stat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Stat{}, ErrMalformed
	}
	f := bytes.Fields(b[i+1:]) // state ppid pgrp session tty tpgid flags ... starttime
	if len(f) < 20 || len(f[0]) != 1 {
		return Stat{}, fmt.Errorf("%w: %d fields after the command", ErrMalformed, len(f))
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgrp, err2 := strconv.Atoi(string(f[2]))
	flags, err3 := strconv.ParseUint(string(f[6]), 10, 64)
	start, err4 := strconv.ParseUint(string(f[19]), 10, 64)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return Stat{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return Stat{State: f[0][0], PPID: ppid, PGRP: pgrp, Flags: flags, StartTime: start}, nil
}
