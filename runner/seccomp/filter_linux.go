//go:build linux && (amd64 || arm64)

package seccomp

import (
	"cmp"
	"slices"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Offsets into struct seccomp_data { int nr; __u32 arch; __u64
// instruction_pointer; __u64 args[6]; }. A BPF word load reads the 32-bit
// word at the offset in the host's byte order; args are loaded as their low
// half (the little-endian arches here: the word at the offset) and their
// high half (the word after it).
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

// argLow and argHigh are the offsets of the low and high 32-bit halves of
// system call argument i.
func argLow(i int) uint32  { return uint32(offArgs + 8*i) }
func argHigh(i int) uint32 { return uint32(offArgs + 8*i + 4) }

// call is a system call by name and by number on this architecture.
type call struct {
	name string
	nr   uint32
}

// deniedCalls are the system calls no runner process needs, on every
// supported architecture (legacyCalls adds those only some have).
func deniedCalls() []call {
	return []call{
		// Networking.
		{"socket", unix.SYS_SOCKET},
		{"connect", unix.SYS_CONNECT},
		{"accept", unix.SYS_ACCEPT},
		{"bind", unix.SYS_BIND},
		{"listen", unix.SYS_LISTEN},
		{"socketpair", unix.SYS_SOCKETPAIR},
		{"accept4", unix.SYS_ACCEPT4},
		// Running programs.
		{"execve", unix.SYS_EXECVE},
		{"execveat", unix.SYS_EXECVEAT},
		// Reaching into other processes.
		{"ptrace", unix.SYS_PTRACE},
		{"process_vm_readv", unix.SYS_PROCESS_VM_READV},
		{"process_vm_writev", unix.SYS_PROCESS_VM_WRITEV},
		{"kcmp", unix.SYS_KCMP},
		{"pidfd_getfd", unix.SYS_PIDFD_GETFD},
		// Mounts and the root directory.
		{"mount", unix.SYS_MOUNT},
		{"umount2", unix.SYS_UMOUNT2},
		{"pivot_root", unix.SYS_PIVOT_ROOT},
		{"chroot", unix.SYS_CHROOT},
		{"open_tree", unix.SYS_OPEN_TREE},
		{"move_mount", unix.SYS_MOVE_MOUNT},
		{"fsopen", unix.SYS_FSOPEN},
		{"fsconfig", unix.SYS_FSCONFIG},
		{"fsmount", unix.SYS_FSMOUNT},
		{"fspick", unix.SYS_FSPICK},
		{"mount_setattr", unix.SYS_MOUNT_SETATTR},
		// Namespaces.
		{"unshare", unix.SYS_UNSHARE},
		{"setns", unix.SYS_SETNS},
		// Large kernel attack surface.
		{"bpf", unix.SYS_BPF},
		{"perf_event_open", unix.SYS_PERF_EVENT_OPEN},
		{"userfaultfd", unix.SYS_USERFAULTFD},
		{"io_uring_setup", unix.SYS_IO_URING_SETUP},
		{"io_uring_enter", unix.SYS_IO_URING_ENTER},
		{"io_uring_register", unix.SYS_IO_URING_REGISTER},
		// Kernel keyrings.
		{"add_key", unix.SYS_ADD_KEY},
		{"request_key", unix.SYS_REQUEST_KEY},
		{"keyctl", unix.SYS_KEYCTL},
		// Replacing or extending the kernel.
		{"kexec_load", unix.SYS_KEXEC_LOAD},
		{"kexec_file_load", unix.SYS_KEXEC_FILE_LOAD},
		{"init_module", unix.SYS_INIT_MODULE},
		{"finit_module", unix.SYS_FINIT_MODULE},
		{"delete_module", unix.SYS_DELETE_MODULE},
		{"reboot", unix.SYS_REBOOT},
		// Administering the host: swap, accounting, clocks, names, quotas,
		// the kernel log, the execution domain, the terminal.
		{"swapon", unix.SYS_SWAPON},
		{"swapoff", unix.SYS_SWAPOFF},
		{"acct", unix.SYS_ACCT},
		{"settimeofday", unix.SYS_SETTIMEOFDAY},
		{"clock_settime", unix.SYS_CLOCK_SETTIME},
		{"clock_adjtime", unix.SYS_CLOCK_ADJTIME},
		{"adjtimex", unix.SYS_ADJTIMEX},
		{"sethostname", unix.SYS_SETHOSTNAME},
		{"setdomainname", unix.SYS_SETDOMAINNAME},
		{"quotactl", unix.SYS_QUOTACTL},
		{"quotactl_fd", unix.SYS_QUOTACTL_FD},
		{"lookup_dcookie", unix.SYS_LOOKUP_DCOOKIE},
		{"syslog", unix.SYS_SYSLOG},
		{"personality", unix.SYS_PERSONALITY},
		{"vhangup", unix.SYS_VHANGUP},
		// Files by handle, bypassing path checks; filesystem-wide
		// notification.
		{"name_to_handle_at", unix.SYS_NAME_TO_HANDLE_AT},
		{"open_by_handle_at", unix.SYS_OPEN_BY_HANDLE_AT},
		{"fanotify_init", unix.SYS_FANOTIFY_INIT},
		// Identity and capabilities.
		{"setuid", unix.SYS_SETUID},
		{"setgid", unix.SYS_SETGID},
		{"setreuid", unix.SYS_SETREUID},
		{"setregid", unix.SYS_SETREGID},
		{"setresuid", unix.SYS_SETRESUID},
		{"setresgid", unix.SYS_SETRESGID},
		{"setfsuid", unix.SYS_SETFSUID},
		{"setfsgid", unix.SYS_SETFSGID},
		{"setgroups", unix.SYS_SETGROUPS},
		{"capset", unix.SYS_CAPSET},
		// Scheduling and memory of other processes.
		{"setpriority", unix.SYS_SETPRIORITY},
		{"sched_setparam", unix.SYS_SCHED_SETPARAM},
		{"sched_setscheduler", unix.SYS_SCHED_SETSCHEDULER},
		{"sched_setaffinity", unix.SYS_SCHED_SETAFFINITY},
		{"sched_setattr", unix.SYS_SCHED_SETATTR},
		{"ioprio_set", unix.SYS_IOPRIO_SET},
		{"migrate_pages", unix.SYS_MIGRATE_PAGES},
		{"move_pages", unix.SYS_MOVE_PAGES},
		{"process_madvise", unix.SYS_PROCESS_MADVISE},
		{"process_mrelease", unix.SYS_PROCESS_MRELEASE},
		// Anonymous executable memory and device nodes.
		{"memfd_create", unix.SYS_MEMFD_CREATE},
		{"memfd_secret", unix.SYS_MEMFD_SECRET},
		{"mknodat", unix.SYS_MKNODAT},
	}
}

// changeCalls change files' metadata and names, which Landlock does not
// mediate (mode, owner, times, extended attributes) or mediates only where
// its ABI is new enough (links, renames), and watch directories (inotify
// tells a child the names of files other tenants create in /tmp). The child
// writes nothing, so it changes and watches nothing either. Every program
// refuses them, with legacyChangeCalls.
func changeCalls() []call {
	return append([]call{
		{"fchmod", unix.SYS_FCHMOD},
		{"fchmodat", unix.SYS_FCHMODAT},
		{"fchmodat2", unix.SYS_FCHMODAT2},
		{"fchown", unix.SYS_FCHOWN},
		{"fchownat", unix.SYS_FCHOWNAT},
		{"utimensat", unix.SYS_UTIMENSAT},
		{"setxattr", unix.SYS_SETXATTR},
		{"lsetxattr", unix.SYS_LSETXATTR},
		{"fsetxattr", unix.SYS_FSETXATTR},
		{"setxattrat", unix.SYS_SETXATTRAT},
		{"removexattr", unix.SYS_REMOVEXATTR},
		{"lremovexattr", unix.SYS_LREMOVEXATTR},
		{"fremovexattr", unix.SYS_FREMOVEXATTR},
		{"removexattrat", unix.SYS_REMOVEXATTRAT},
		{"linkat", unix.SYS_LINKAT},
		{"symlinkat", unix.SYS_SYMLINKAT},
		{"renameat", unix.SYS_RENAMEAT},
		{"renameat2", unix.SYS_RENAMEAT2},
		{"inotify_init1", unix.SYS_INOTIFY_INIT1},
		{"inotify_add_watch", unix.SYS_INOTIFY_ADD_WATCH},
		{"fanotify_mark", unix.SYS_FANOTIFY_MARK},
	}, legacyChangeCalls()...)
}

// processCalls are what the fork-server zygote needs and its children do
// not: signals to other processes, pidfds, and the private socketpair of
// each pre-forked child. Full and Child refuse them, Zygote allows them.
func processCalls() []call {
	return []call{
		{"kill", unix.SYS_KILL},
		{"tkill", unix.SYS_TKILL},
		{"tgkill", unix.SYS_TGKILL},
		{"rt_sigqueueinfo", unix.SYS_RT_SIGQUEUEINFO},
		{"rt_tgsigqueueinfo", unix.SYS_RT_TGSIGQUEUEINFO},
		{"pidfd_send_signal", unix.SYS_PIDFD_SEND_SIGNAL},
		{"pidfd_open", unix.SYS_PIDFD_OPEN},
		{"socketpair", unix.SYS_SOCKETPAIR},
	}
}

// cloneNamespaces are the clone flags that create namespaces.
const cloneNamespaces = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWTIME

// unconditional returns the system calls the program of kind k refuses
// with EPERM whatever their arguments, sorted by number, without
// duplicates.
func unconditional(k Kind) []call {
	deny := append(append(deniedCalls(), legacyCalls()...), changeCalls()...)
	procs := processCalls()
	switch k {
	case Full:
		deny = append(deny, procs...)
	case Zygote:
		deny = slices.DeleteFunc(deny, func(c call) bool {
			return slices.ContainsFunc(procs, func(p call) bool { return p.nr == c.nr })
		})
	case Child:
		deny = procs
	}
	slices.SortFunc(deny, func(a, b call) int { return cmp.Compare(a.nr, b.nr) })
	return slices.CompactFunc(deny, func(a, b call) bool { return a.nr == b.nr })
}

// errno is the action that fails the system call with e.
func errno(e unix.Errno) bpf.Instruction {
	return bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(e)&unix.SECCOMP_RET_DATA}
}

// allow is the action that lets the system call run.
func allow() bpf.Instruction { return bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW} }

// build returns the program of kind k: the architecture check, the
// unconditional refusals, then the argument checks of the kind; anything
// else is allowed.
func build(k Kind) ([]bpf.Instruction, error) {
	prog := []bpf.Instruction{
		// Any other ABI: kill (its system call numbers mean other calls).
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: auditArch, SkipTrue: 1},
		bpf.RetConstant{Val: unix.SECCOMP_RET_KILL_PROCESS},
		// A holds the system call number from here on.
		bpf.LoadAbsolute{Off: offNr, Size: 4},
	}
	if x32SyscallBit != 0 {
		// The x32 ABI shares the arch value and sets this bit in nr.
		prog = append(prog,
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32SyscallBit, SkipFalse: 1},
			errno(unix.EPERM))
	}
	for _, c := range unconditional(k) {
		prog = append(prog,
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: c.nr, SkipFalse: 1},
			errno(unix.EPERM))
	}
	if k != Zygote {
		prog = append(prog,
			// clone: threads only, never with namespace flags (the flags
			// are the low half of args[0]; the kernel ignores the high
			// half).
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_CLONE, SkipFalse: 5},
			bpf.LoadAbsolute{Off: argLow(0), Size: 4},
			bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: unix.CLONE_THREAD | cloneNamespaces},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.CLONE_THREAD, SkipFalse: 1},
			allow(),
			errno(unix.EPERM),
			// clone3 cannot be inspected (its flags are behind a
			// pointer): ENOSYS makes the C library fall back to clone.
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_CLONE3, SkipFalse: 1},
			errno(unix.ENOSYS))
	}
	if k == Child {
		return append(prog, allow()), nil
	}
	return append(prog,
		// prlimit64: only on the calling process (pid 0, both halves).
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_PRLIMIT64, SkipFalse: 6},
		bpf.LoadAbsolute{Off: argLow(0), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipFalse: 3},
		bpf.LoadAbsolute{Off: argHigh(0), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipFalse: 1},
		allow(),
		errno(unix.EPERM),
		// ioctl: no terminal input injection (the request is the low half
		// of args[1], an unsigned int to the kernel).
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_IOCTL, SkipFalse: 4},
		bpf.LoadAbsolute{Off: argLow(1), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.TIOCSTI, SkipTrue: 1},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.TIOCLINUX, SkipFalse: 1},
		errno(unix.EPERM),
		allow()), nil
}

// denied returns the names of unconditional(k), then clone3 where k
// refuses it.
func denied(k Kind) []string {
	var names []string
	for _, c := range unconditional(k) {
		names = append(names, c.name)
	}
	if k != Zygote {
		names = append(names, "clone3")
	}
	return names
}
