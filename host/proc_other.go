//go:build !linux

package host

import "os/exec"

// setProcAttrs is a no-op outside Linux: Setpgid and Pdeathsig are
// Linux-specific here. Plugins are still managed clients, killed on Close
// and by plugin.CleanupClients.
func setProcAttrs(cmd *exec.Cmd) {}

func killGroup(pid int) {}

func processGone(pid int) bool { return false }
