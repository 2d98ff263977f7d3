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

// processGone reports whether pid has ended or is ending: it exited (a
// zombie not reaped by go-plugin yet, or gone), the kernel is tearing it
// down, or a SIGKILL is pending for it. A process in any of these states
// runs no code of its own again, so a request sent to it now could never be
// served: the host relaunches the plugin first. Right after kill(2) only
// the pending signal shows (the process is still running in the kernel,
// its socket may still accept bytes), which is why it is checked too.
func processGone(pid int) bool {
	if pid <= 0 {
		return false
	}
	st, err := procfs.ReadStat(pid)
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	if st.Gone() || st.Exiting() {
		return true
	}
	pending, err := procfs.KillPending(pid)
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	return pending
}
