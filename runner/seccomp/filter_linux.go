//go:build linux && (amd64 || arm64)

package seccomp

import (
	"cmp"
	"fmt"
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
// supported architecture (legacyCalls adds those only some have): the
// zygote's denylist refuses them, and none is in the allowlist.
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
// refuses them, with legacyChangeCalls (the allowlists by not naming them).
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

// workspaceCalls make and remove directories, remove files and rename:
// what code changing its workspace needs besides creating and writing
// files. The workspace kinds allow them (Landlock confines them to the
// workspace: MAKE_DIR, REMOVE_DIR, REMOVE_FILE, REFER are granted there
// only); every other program refuses them. linkat and symlinkat are not
// among them: a link could point out of the workspace.
func workspaceCalls() []call {
	return append([]call{
		{"mkdirat", unix.SYS_MKDIRAT},
		{"unlinkat", unix.SYS_UNLINKAT},
		{"renameat", unix.SYS_RENAMEAT},
		{"renameat2", unix.SYS_RENAMEAT2},
	}, legacyWorkspaceCalls()...)
}

// allowedCalls are the system calls the allowlists (Full, Child) let
// through whatever their arguments, on every supported architecture, with
// legacyAllowedCalls (the older forms only some architectures have). They
// are what CPython running its standard library needs once sealed:
// measured by tracing sealed children that run the held-out corpus and a
// body exercising every module the sandbox offers (and threads), and
// reasoned for what numerical libraries add (affinity, memory advice,
// system memory size). clone (threads only), prlimit64 (the calling
// process only) and ioctl (no terminal injection) are allowed by argument
// (see allowlist); clone3 is refused with ENOSYS so the C library falls
// back to clone, and sysinfo with ENOSYS (it would tell the host's memory,
// uptime and process count; the C library's sysconf(_SC_PHYS_PAGES) then
// fails, as on a kernel without it); every other call is refused with
// EPERM.
func allowedCalls() []call {
	return append([]call{
		// Memory: the allocators (pymalloc arenas, glibc malloc) and the
		// dynamic loader mapping extension modules; madvise for freed thread
		// stacks and huge-page hints. Every mapping counts against
		// RLIMIT_AS.
		{"brk", unix.SYS_BRK},
		{"mmap", unix.SYS_MMAP},
		{"munmap", unix.SYS_MUNMAP},
		{"mremap", unix.SYS_MREMAP},
		{"mprotect", unix.SYS_MPROTECT},
		{"madvise", unix.SYS_MADVISE},
		// Threads and their synchronisation (threading, locks, conditions,
		// events; the C library's per-thread registration), and leaving.
		{"futex", unix.SYS_FUTEX},
		{"set_robust_list", unix.SYS_SET_ROBUST_LIST},
		{"set_tid_address", unix.SYS_SET_TID_ADDRESS},
		{"rseq", unix.SYS_RSEQ},
		{"gettid", unix.SYS_GETTID},
		{"sched_yield", unix.SYS_SCHED_YIELD},
		{"sched_getaffinity", unix.SYS_SCHED_GETAFFINITY},
		{"exit", unix.SYS_EXIT},
		{"exit_group", unix.SYS_EXIT_GROUP},
		// Signals, to this process only: handlers and masks, the return
		// from a handler, the restart of an interrupted sleep. Nothing
		// that sends a signal (kill, tgkill, rt_sigqueueinfo) is listed.
		{"rt_sigaction", unix.SYS_RT_SIGACTION},
		{"rt_sigprocmask", unix.SYS_RT_SIGPROCMASK},
		{"rt_sigreturn", unix.SYS_RT_SIGRETURN},
		{"sigaltstack", unix.SYS_SIGALTSTACK},
		{"restart_syscall", unix.SYS_RESTART_SYSCALL},
		// Time: reading clocks (when the vDSO does not answer) and
		// sleeping (time.sleep, timed waits).
		{"clock_gettime", unix.SYS_CLOCK_GETTIME},
		{"clock_getres", unix.SYS_CLOCK_GETRES},
		{"gettimeofday", unix.SYS_GETTIMEOFDAY},
		{"clock_nanosleep", unix.SYS_CLOCK_NANOSLEEP},
		{"nanosleep", unix.SYS_NANOSLEEP},
		// Files, read-only through Landlock (which decides what may be
		// opened: the stdlib and the interpreter's libraries) and
		// RLIMIT_FSIZE 0: imports open, stat, list and read modules. Metadata
		// is readable (stat), never changeable (nothing of changeCalls is
		// listed).
		{"openat", unix.SYS_OPENAT},
		{"read", unix.SYS_READ},
		{"pread64", unix.SYS_PREAD64},
		{"readv", unix.SYS_READV},
		{"lseek", unix.SYS_LSEEK},
		{"close", unix.SYS_CLOSE},
		{"close_range", unix.SYS_CLOSE_RANGE},
		{"fstat", unix.SYS_FSTAT},
		{"newfstatat", unix.SYS_NEWFSTATAT},
		{"statx", unix.SYS_STATX},
		{"getdents64", unix.SYS_GETDENTS64},
		{"readlinkat", unix.SYS_READLINKAT},
		{"faccessat", unix.SYS_FACCESSAT},
		{"faccessat2", unix.SYS_FACCESSAT2},
		{"getcwd", unix.SYS_GETCWD},
		// Descriptors the process holds: the response pipe and stdio are
		// written; descriptors are duplicated into place and flagged.
		{"write", unix.SYS_WRITE},
		{"writev", unix.SYS_WRITEV},
		{"fcntl", unix.SYS_FCNTL},
		{"dup", unix.SYS_DUP},
		{"dup3", unix.SYS_DUP3},
		// The fork-server child's private socket, over which the plugin
		// hands it the execution's descriptors: received, and inspected by
		// Python's socket(fileno=). No socket is created, connected or sent
		// on.
		{"recvmsg", unix.SYS_RECVMSG},
		{"getsockopt", unix.SYS_GETSOCKOPT},
		{"getsockname", unix.SYS_GETSOCKNAME},
		// This process's own identity, limits and usage, the kernel's name
		// and the machine's size (os.cpu_count, SC_PHYS_PAGES), and random
		// bytes (os.urandom, random's seed, uuid4, secrets).
		{"getpid", unix.SYS_GETPID},
		{"getppid", unix.SYS_GETPPID},
		{"getuid", unix.SYS_GETUID},
		{"geteuid", unix.SYS_GETEUID},
		{"getgid", unix.SYS_GETGID},
		{"getegid", unix.SYS_GETEGID},
		{"getresuid", unix.SYS_GETRESUID},
		{"getresgid", unix.SYS_GETRESGID},
		{"getgroups", unix.SYS_GETGROUPS},
		{"getrlimit", unix.SYS_GETRLIMIT},
		{"getrusage", unix.SYS_GETRUSAGE},
		{"times", unix.SYS_TIMES},
		{"umask", unix.SYS_UMASK},
		{"uname", unix.SYS_UNAME},
		{"getrandom", unix.SYS_GETRANDOM},
	}, legacyAllowedCalls()...)
}

// netCalls are what a TCP client needs besides socket (which the net
// kinds allow by argument: socketCheck), measured by tracing
// urllib.request through a proxy (connect, poll, setsockopt TCP_NODELAY,
// sendto, recvfrom; getsockopt SO_ERROR, ioctl FIONBIO and close are
// allowed already) and reasoned for ssl (getpeername: an SSLSocket checks
// it is connected) and arm64 (ppoll: no poll there). The net kinds allow
// them with legacyNetCalls; every other program refuses them. bind,
// listen, accept, accept4 and socketpair are not among them; setsockopt
// is allowed by argument (setsockoptCheck).
func netCalls() []call {
	return append([]call{
		{"connect", unix.SYS_CONNECT},
		{"sendto", unix.SYS_SENDTO},
		{"recvfrom", unix.SYS_RECVFROM},
		{"getpeername", unix.SYS_GETPEERNAME},
		{"ppoll", unix.SYS_PPOLL},
	}, legacyNetCalls()...)
}

// NetCalls returns the names of the system calls the net kinds add to
// their base kind, besides socket and setsockopt (allowed by argument:
// socketCheck, setsockoptCheck).
func NetCalls() []string {
	var names []string
	for _, c := range netCalls() {
		names = append(names, c.name)
	}
	return names
}

// processCalls are what the fork-server zygote needs and its children do
// not: signals to other processes, pidfds, and the private socketpair of
// each pre-forked child. Zygote allows them; the allowlists (Full, Child)
// do not name them.
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

// unconditional returns the system calls the zygote's program refuses
// with EPERM whatever their arguments, sorted by number, without
// duplicates: deniedCalls, legacyCalls and changeCalls, but not
// processCalls, which the zygote needs, nor, with ws, workspaceCalls, nor,
// with net, netCalls and socket (checked by argument: socketCheck).
func unconditional(ws, net bool) []call {
	deny := append(append(deniedCalls(), legacyCalls()...), changeCalls()...)
	keep := processCalls()
	if ws {
		keep = append(keep, workspaceCalls()...)
	}
	if net {
		keep = append(append(keep, netCalls()...), call{"socket", unix.SYS_SOCKET})
	}
	deny = slices.DeleteFunc(deny, func(c call) bool {
		return slices.ContainsFunc(keep, func(p call) bool { return p.nr == c.nr })
	})
	slices.SortFunc(deny, func(a, b call) int { return cmp.Compare(a.nr, b.nr) })
	return slices.CompactFunc(deny, func(a, b call) bool { return a.nr == b.nr })
}

// errno is the action that fails the system call with e.
func errno(e unix.Errno) bpf.Instruction {
	return bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(e)&unix.SECCOMP_RET_DATA}
}

// allow is the action that lets the system call run.
func allow() bpf.Instruction { return bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW} }

// prologue is the start of every program: any other ABI is killed (its
// system call numbers mean other calls), the system call number is loaded
// into A, and on x86_64 an x32 call is refused.
func prologue() []bpf.Instruction {
	prog := []bpf.Instruction{
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
	return prog
}

// cloneCheck lets clone make threads only, never with namespace flags (the
// flags are the low half of args[0]; the kernel ignores the high half).
func cloneCheck() []bpf.Instruction {
	return []bpf.Instruction{
		bpf.LoadAbsolute{Off: argLow(0), Size: 4},
		bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: unix.CLONE_THREAD | cloneNamespaces},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.CLONE_THREAD, SkipFalse: 1},
		allow(),
		errno(unix.EPERM),
	}
}

// prlimitCheck lets prlimit64 act on the calling process only (pid 0,
// both halves).
func prlimitCheck() []bpf.Instruction {
	return []bpf.Instruction{
		bpf.LoadAbsolute{Off: argLow(0), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipFalse: 3},
		bpf.LoadAbsolute{Off: argHigh(0), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipFalse: 1},
		allow(),
		errno(unix.EPERM),
	}
}

// ioctlCheck refuses terminal input injection (the request is the low
// half of args[1], an unsigned int to the kernel).
func ioctlCheck() []bpf.Instruction {
	return []bpf.Instruction{
		bpf.LoadAbsolute{Off: argLow(1), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.TIOCSTI, SkipTrue: 1},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.TIOCLINUX, SkipFalse: 1},
		errno(unix.EPERM),
		allow(),
	}
}

// socketCheck lets socket make a TCP socket only: domain AF_INET or
// AF_INET6, type SOCK_STREAM (with SOCK_NONBLOCK and SOCK_CLOEXEC, nothing
// else), protocol 0 or IPPROTO_TCP (not SCTP or MPTCP, which are stream
// sockets too and which Landlock's TCP rules do not cover). The kernel
// reads the three as ints: their low halves.
func socketCheck() []bpf.Instruction {
	return []bpf.Instruction{
		bpf.LoadAbsolute{Off: argLow(0), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.AF_INET, SkipTrue: 1},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.AF_INET6, SkipFalse: 7},
		bpf.LoadAbsolute{Off: argLow(1), Size: 4},
		bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: ^uint32(unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC)},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SOCK_STREAM, SkipFalse: 4},
		bpf.LoadAbsolute{Off: argLow(2), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipTrue: 1},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.IPPROTO_TCP, SkipFalse: 1},
		allow(),
		errno(unix.EPERM),
	}
}

// setsockoptCheck lets setsockopt set the options a TCP client needs
// only: TCP_NODELAY (http.client sets it on every connection) and
// SO_KEEPALIVE. Every other option (upper-layer protocols such as kTLS,
// congestion control, MD5 signatures, IP options, socket filters) is
// kernel code user code has no need of. The allowlists (Full, Child)
// check it; the zygote's denylist never refused setsockopt, and a child's
// allowlist is stacked on it. The kernel reads level and optname as ints:
// their low halves.
func setsockoptCheck() []bpf.Instruction {
	return []bpf.Instruction{
		bpf.LoadAbsolute{Off: argLow(1), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.IPPROTO_TCP, SkipFalse: 2},
		bpf.LoadAbsolute{Off: argLow(2), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.TCP_NODELAY, SkipTrue: 4},
		bpf.LoadAbsolute{Off: argLow(1), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SOL_SOCKET, SkipFalse: 3},
		bpf.LoadAbsolute{Off: argLow(2), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SO_KEEPALIVE, SkipFalse: 1},
		allow(),
		errno(unix.EPERM),
	}
}

// build returns the program of kind k: the allowlist for Full and Child,
// the denylist for Zygote.
func build(k Kind) ([]bpf.Instruction, error) {
	if k.Base() == Zygote {
		return denylist(k.Workspace(), k.Net()), nil
	}
	return allowlist(k.Workspace(), k.Net())
}

// denylist returns the zygote's program: the architecture check, the
// unconditional refusals, then the argument checks of prlimit64 and
// ioctl (and, with net, of socket); anything else is allowed (the zygote
// forks, signals and reaps its children; what governs user code is the
// allowlist each child stacks on top).
func denylist(ws, net bool) []bpf.Instruction {
	prog := prologue()
	for _, c := range unconditional(ws, net) {
		prog = append(prog,
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: c.nr, SkipFalse: 1},
			errno(unix.EPERM))
	}
	prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_PRLIMIT64, SkipFalse: uint8(len(prlimitCheck()))})
	prog = append(prog, prlimitCheck()...)
	prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_IOCTL, SkipFalse: uint8(len(ioctlCheck()))})
	prog = append(prog, ioctlCheck()...)
	if net {
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_SOCKET, SkipFalse: uint8(len(socketCheck()))})
		prog = append(prog, socketCheck()...)
	}
	return append(prog, allow())
}

// verdict is what the allowlist does with one system call number.
type verdict int

const (
	vDeny       verdict = iota // EPERM
	vAllow                     // runs
	vNoSys                     // ENOSYS: the C library falls back
	vClone                     // cloneCheck
	vPrlimit                   // prlimitCheck
	vIoctl                     // ioctlCheck
	vSocket                    // socketCheck (net kinds)
	vSetsockopt                // setsockoptCheck (net kinds)
)

// unconditionalAllowed returns what the allowlist lets through whatever
// the arguments: allowedCalls, with ws also workspaceCalls, with net also
// netCalls.
func unconditionalAllowed(ws, net bool) []call {
	calls := allowedCalls()
	if ws {
		calls = append(calls, workspaceCalls()...)
	}
	if net {
		calls = append(calls, netCalls()...)
	}
	return calls
}

// verdicts returns the allowlist's verdict on every number up to the
// highest it names; every higher number is refused.
func verdicts(ws, net bool) []verdict {
	special := map[uint32]verdict{
		unix.SYS_CLONE:     vClone,
		unix.SYS_CLONE3:    vNoSys,
		unix.SYS_SYSINFO:   vNoSys, // the host's memory, uptime and process count
		unix.SYS_PRLIMIT64: vPrlimit,
		unix.SYS_IOCTL:     vIoctl,
	}
	if net {
		special[unix.SYS_SOCKET] = vSocket
		special[unix.SYS_SETSOCKOPT] = vSetsockopt
	}
	max := uint32(0)
	for _, c := range unconditionalAllowed(ws, net) {
		max = maxOf(max, c.nr)
	}
	for nr := range special {
		max = maxOf(max, nr)
	}
	v := make([]verdict, max+1)
	for _, c := range unconditionalAllowed(ws, net) {
		v[c.nr] = vAllow
	}
	for nr, s := range special {
		v[nr] = s
	}
	return v
}

func maxOf(a, b uint32) uint32 {
	if a > b {
		return a
	}
	return b
}

// span is a run of consecutive system call numbers [lo, next span's lo)
// with one verdict.
type span struct {
	lo uint32
	v  verdict
}

// spans returns the verdicts as runs, the last one open-ended (refused).
func spans(ws, net bool) []span {
	var out []span
	v := verdicts(ws, net)
	for nr, v := range v {
		if len(out) == 0 || out[len(out)-1].v != v {
			out = append(out, span{uint32(nr), v})
		}
	}
	if out[len(out)-1].v != vDeny {
		out = append(out, span{uint32(len(v)), vDeny})
	}
	return out
}

// allowlist returns the program of Full and Child: the prologue, then a
// binary search over the runs of system call numbers (a handful of
// comparisons per call, and a short walk for the kernel's per-filter cache
// of constant verdicts), whose leaves allow, refuse with EPERM, refuse
// clone3 with ENOSYS, or jump to the argument checks of clone, prlimit64
// and ioctl (and, with net, socket and setsockopt) placed after the tree.
func allowlist(ws, net bool) ([]bpf.Instruction, error) {
	prog := prologue()
	base := len(prog)
	type patch struct {
		at int
		v  verdict
	}
	var patches []patch
	var tree func(s []span) ([]bpf.Instruction, error)
	tree = func(s []span) ([]bpf.Instruction, error) {
		if len(s) == 1 {
			switch s[0].v {
			case vDeny:
				return []bpf.Instruction{errno(unix.EPERM)}, nil
			case vAllow:
				return []bpf.Instruction{allow()}, nil
			case vNoSys:
				return []bpf.Instruction{errno(unix.ENOSYS)}, nil
			}
			// A jump to the check, resolved once the tree is laid out;
			// marked by its verdict in Skip for now.
			return []bpf.Instruction{bpf.Jump{Skip: uint32(s[0].v)}}, nil
		}
		mid := len(s) / 2
		lo, err := tree(s[:mid])
		if err != nil {
			return nil, err
		}
		hi, err := tree(s[mid:])
		if err != nil {
			return nil, err
		}
		if len(lo) > 255 {
			return nil, fmt.Errorf("seccomp: allowlist subtree of %d instructions is out of a conditional jump's reach", len(lo))
		}
		out := append([]bpf.Instruction{bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: s[mid].lo, SkipTrue: uint8(len(lo))}}, lo...)
		return append(out, hi...), nil
	}
	body, err := tree(spans(ws, net))
	if err != nil {
		return nil, err
	}
	for i, in := range body {
		if j, ok := in.(bpf.Jump); ok {
			patches = append(patches, patch{base + i, verdict(j.Skip)})
		}
	}
	prog = append(prog, body...)
	checks := map[verdict]int{}
	for _, c := range []struct {
		v   verdict
		ins []bpf.Instruction
	}{{vClone, cloneCheck()}, {vPrlimit, prlimitCheck()}, {vIoctl, ioctlCheck()}, {vSocket, socketCheck()}, {vSetsockopt, setsockoptCheck()}} {
		checks[c.v] = len(prog)
		prog = append(prog, c.ins...)
	}
	for _, p := range patches {
		prog[p.at] = bpf.Jump{Skip: uint32(checks[p.v] - p.at - 1)}
	}
	return prog, nil
}

// allowedNames returns the names of unconditionalAllowed(ws, net), clone,
// prlimit64 and ioctl (and, with net, socket and setsockopt), sorted by number.
func allowedNames(ws, net bool) []string {
	calls := append(unconditionalAllowed(ws, net), call{"clone", unix.SYS_CLONE}, call{"prlimit64", unix.SYS_PRLIMIT64},
		call{"ioctl", unix.SYS_IOCTL})
	if net {
		calls = append(calls, call{"socket", unix.SYS_SOCKET}, call{"setsockopt", unix.SYS_SETSOCKOPT})
	}
	slices.SortFunc(calls, func(a, b call) int { return cmp.Compare(a.nr, b.nr) })
	names := make([]string, 0, len(calls))
	for _, c := range calls {
		names = append(names, c.name)
	}
	return names
}

// allowed returns what Allowed documents.
func allowed(k Kind) []string {
	if k.Base() == Zygote {
		return nil
	}
	return allowedNames(k.Workspace(), k.Net())
}

// denied returns the names of unconditional(Zygote), nil for the
// allowlists.
func denied(k Kind) []string {
	if k.Base() != Zygote {
		return nil
	}
	var names []string
	for _, c := range unconditional(k.Workspace(), k.Net()) {
		names = append(names, c.name)
	}
	return names
}
