package pyproc

// SendKill sends the zygote a kill message for pid, as Run does for a
// child of a zygote without pidfds: the test of what the zygote does with
// a pid that is not (or no longer) its unreaped child.
func (fs *ForkServer) SendKill(pid int) {
	fs.kill(&fsChild{pid: pid, pidfd: -1})
}
