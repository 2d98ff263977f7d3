package host

import (
	"errors"
	"io/fs"
	"os/exec"
	"syscall"

	"github.com/orqest/sandbox/internal/procfs"
)

// setProcAttrs puts the plugin in its own process group (a terminal's ^C
// goes to the host, which then stops its plugins in order) and asks the
// kernel to SIGKILL it if the host dies, so no plugin outlives its host.
//
// Pdeathsig fires when the OS thread that forked the plugin exits; the Go
// runtime keeps its threads for the life of the process unless a goroutine
// that locked its thread exits, which the host never does.
func setProcAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup SIGKILLs whatever is left in the process group of a plugin that
// has exited or been killed (children that did not start their own group).
func killGroup(pid int) {
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// processGone reports whether pid has exited (or is a zombie not yet reaped
// by go-plugin), so a dead plugin is noticed before a call is sent to it.
func processGone(pid int) bool {
	if pid <= 0 {
		return false
	}
	st, err := procfs.ReadStat(pid)
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	return st.Gone()
}
