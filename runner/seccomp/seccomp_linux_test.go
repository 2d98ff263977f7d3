//go:build linux && (amd64 || arm64)

package seccomp

import (
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// The clone flags glibc's pthread_create and fork use.
const (
	threadFlags = unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SYSVSEM | unix.CLONE_SIGHAND |
		unix.CLONE_THREAD | unix.CLONE_SETTLS | unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID
	forkFlags = uint64(unix.SIGCHLD) | unix.CLONE_CHILD_SETTID | unix.CLONE_CHILD_CLEARTID
)

// What pure Python needs is allowed by every program.
var commonAllowed = []struct {
	name string
	nr   uint32
}{
	{"read", unix.SYS_READ}, {"write", unix.SYS_WRITE}, {"openat", unix.SYS_OPENAT},
	{"close", unix.SYS_CLOSE}, {"mmap", unix.SYS_MMAP}, {"munmap", unix.SYS_MUNMAP},
	{"mprotect", unix.SYS_MPROTECT}, {"brk", unix.SYS_BRK}, {"futex", unix.SYS_FUTEX},
	{"rt_sigaction", unix.SYS_RT_SIGACTION}, {"rt_sigprocmask", unix.SYS_RT_SIGPROCMASK},
	{"getpid", unix.SYS_GETPID}, {"getrandom", unix.SYS_GETRANDOM},
	{"clock_gettime", unix.SYS_CLOCK_GETTIME}, {"newfstatat", unix.SYS_NEWFSTATAT},
	{"exit", unix.SYS_EXIT}, {"exit_group", unix.SYS_EXIT_GROUP},
}

// case_ is one system call and the action a program must take on it.
type case_ struct {
	what string
	d    seccompData
	want uint32
}

// argCases are the argument checks every program (or, for clone and
// clone3, every program but Zygote's) makes.
func argCases(k Kind) []case_ {
	fork, thread := uint32(retEPERM), uint32(retAllow)
	clone3, sysinfo := uint32(retNOSYS), uint32(retNOSYS)
	if k.Base() == Zygote {
		fork, clone3, sysinfo = retAllow, retAllow, retAllow
	}
	own, other := uint32(retAllow), uint32(retEPERM)
	ioctlDeny := uint32(retEPERM)
	return []case_{
		{"clone(thread)", native(unix.SYS_CLONE, threadFlags), thread},
		{"clone(thread, high half set)", native(unix.SYS_CLONE, 1<<32|threadFlags), thread},
		{"clone(fork)", native(unix.SYS_CLONE, forkFlags), fork},
		{"clone(0)", native(unix.SYS_CLONE, 0), fork},
		{"clone(thread|CLONE_NEWUSER)", native(unix.SYS_CLONE, threadFlags|unix.CLONE_NEWUSER), fork},
		{"clone(thread|CLONE_NEWNET)", native(unix.SYS_CLONE, threadFlags|unix.CLONE_NEWNET), fork},
		{"clone(thread|CLONE_NEWNS)", native(unix.SYS_CLONE, threadFlags|unix.CLONE_NEWNS), fork},
		{"clone(thread|CLONE_NEWTIME)", native(unix.SYS_CLONE, threadFlags|unix.CLONE_NEWTIME), fork},
		{"clone3", native(unix.SYS_CLONE3, 0x1000, 88), clone3},
		{"sysinfo", native(unix.SYS_SYSINFO, 0x1000), sysinfo},
		{"prlimit64(0)", native(unix.SYS_PRLIMIT64, 0, unix.RLIMIT_NOFILE, 0, 0x1000), own},
		{"prlimit64(1)", native(unix.SYS_PRLIMIT64, 1, unix.RLIMIT_NOFILE, 0x1000, 0), other},
		{"prlimit64(1<<32)", native(unix.SYS_PRLIMIT64, 1<<32, unix.RLIMIT_NOFILE, 0x1000, 0), other},
		{"ioctl(TCGETS)", native(unix.SYS_IOCTL, 0, unix.TCGETS, 0x1000), retAllow},
		{"ioctl(TIOCSTI)", native(unix.SYS_IOCTL, 0, unix.TIOCSTI, 0x1000), ioctlDeny},
		{"ioctl(TIOCLINUX)", native(unix.SYS_IOCTL, 0, unix.TIOCLINUX, 0x1000), ioctlDeny},
		{"ioctl(1<<32|TIOCSTI)", native(unix.SYS_IOCTL, 0, 1<<32|unix.TIOCSTI, 0x1000), ioctlDeny},
		{"ioctl(TIOCSTI<<32)", native(unix.SYS_IOCTL, 0, unix.TIOCSTI<<32, 0x1000), retAllow},
	}
}

// Each program refuses what it names with the errno it documents, allows
// what Python needs, and makes its argument checks; the allowlists allow
// exactly what Allowed names (clone, prlimit64 and ioctl by argument).
func TestPrograms(t *testing.T) {
	named := map[Kind]map[string]uint32{
		Full: {"socket": retEPERM, "execve": retEPERM, "ptrace": retEPERM, "unshare": retEPERM,
			"mount": retEPERM, "bpf": retEPERM, "setuid": retEPERM, "kill": retEPERM, "socketpair": retEPERM,
			"pidfd_open": retEPERM, "memfd_create": retEPERM, "io_uring_setup": retEPERM},
		Zygote: {"socket": retEPERM, "execve": retEPERM, "ptrace": retEPERM, "unshare": retEPERM,
			"kill": retAllow, "tgkill": retAllow, "socketpair": retAllow, "pidfd_open": retAllow,
			"pidfd_send_signal": retAllow},
		Child: {"kill": retEPERM, "tgkill": retEPERM, "socketpair": retEPERM, "pidfd_open": retEPERM,
			"pidfd_send_signal": retEPERM, "socket": retEPERM, "execve": retEPERM},
	}
	// The workspace calls: refused by the plain programs (the zygote's
	// lets mkdirat and unlinkat through; its child refuses them), allowed
	// by the workspace kinds, which refuse links as every program does.
	for _, k := range []Kind{Full, Child} {
		for _, n := range []string{"mkdirat", "unlinkat", "renameat", "renameat2", "linkat", "symlinkat"} {
			named[k][n] = retEPERM
		}
	}
	for _, n := range []string{"renameat", "renameat2", "linkat", "symlinkat"} {
		named[Zygote][n] = retEPERM
	}
	for _, k := range []Kind{FullWorkspace, ZygoteWorkspace, ChildWorkspace} {
		named[k] = map[string]uint32{"linkat": retEPERM, "symlinkat": retEPERM, "socket": retEPERM, "execve": retEPERM,
			"mkdirat": retAllow, "unlinkat": retAllow, "renameat": retAllow, "renameat2": retAllow}
	}
	named[FullWorkspace]["kill"], named[ChildWorkspace]["kill"] = retEPERM, retEPERM
	nrs := map[string]uint32{}
	for _, c := range append(append(append(append(append(append(deniedCalls(), processCalls()...), legacyCalls()...), changeCalls()...), allowedCalls()...), workspaceCalls()...), netCalls()...) {
		nrs[c.name] = c.nr
	}
	byArgs := map[string]bool{"clone": true, "prlimit64": true, "ioctl": true, "socket": true}
	for _, k := range Kinds() {
		t.Run(k.String(), func(t *testing.T) {
			f := loadKind(t, k)
			check := func(what string, d seccompData, want uint32) {
				t.Helper()
				if got := f.run(t, d); got != want {
					t.Errorf("%s: %s, want %s", what, actionName(got), actionName(want))
				}
			}
			for name, want := range named[k] {
				nr, ok := nrs[name]
				if !ok {
					t.Fatalf("no number for %s", name)
				}
				check(name, native(nr), want)
			}
			for _, name := range Denied(k) {
				check("denied "+name, native(nrs[name], 1, 2, 3, 4, 5, 6), retEPERM)
			}
			for _, name := range Allowed(k) {
				if !byArgs[name] {
					check("allowed "+name, native(nrs[name], 1, 2, 3, 4, 5, 6), retAllow)
				}
			}
			for _, c := range commonAllowed {
				check(c.name, native(c.nr, 3, 0x1000, 64), retAllow)
			}
			for _, c := range argCases(k) {
				check(c.what, c.d, c.want)
			}
		})
	}
}

// The allowlists refuse with EPERM what they do not name, whatever its
// arguments: here system calls the zygote's denylist lets through (none
// is in Denied(Zygote)), some the denylist refuses too, and numbers beyond
// every table.
func TestAllowlistRefusesUnlisted(t *testing.T) {
	unlisted := []call{
		// Not in the denylist: new kernel interfaces, sockets used
		// without creating one, processes and sessions, writes to files,
		// memory policy and locking, event descriptors, filesystems.
		{"landlock_create_ruleset", unix.SYS_LANDLOCK_CREATE_RULESET},
		{"landlock_add_rule", unix.SYS_LANDLOCK_ADD_RULE},
		{"landlock_restrict_self", unix.SYS_LANDLOCK_RESTRICT_SELF},
		{"seccomp", unix.SYS_SECCOMP},
		{"prctl", unix.SYS_PRCTL},
		{"openat2", unix.SYS_OPENAT2},
		{"sendmsg", unix.SYS_SENDMSG},
		{"sendto", unix.SYS_SENDTO},
		{"recvfrom", unix.SYS_RECVFROM},
		{"shutdown", unix.SYS_SHUTDOWN},
		{"pipe2", unix.SYS_PIPE2},
		{"wait4", unix.SYS_WAIT4},
		{"waitid", unix.SYS_WAITID},
		{"setsid", unix.SYS_SETSID},
		{"setpgid", unix.SYS_SETPGID},
		{"getpgid", unix.SYS_GETPGID},
		{"chdir", unix.SYS_CHDIR},
		{"fchdir", unix.SYS_FCHDIR},
		{"mkdirat", unix.SYS_MKDIRAT},
		{"unlinkat", unix.SYS_UNLINKAT},
		{"ftruncate", unix.SYS_FTRUNCATE},
		{"fallocate", unix.SYS_FALLOCATE},
		{"fsync", unix.SYS_FSYNC},
		{"flock", unix.SYS_FLOCK},
		{"statfs", unix.SYS_STATFS},
		{"getxattr", unix.SYS_GETXATTR},
		{"mincore", unix.SYS_MINCORE},
		{"mlock", unix.SYS_MLOCK},
		{"mlockall", unix.SYS_MLOCKALL},
		{"msync", unix.SYS_MSYNC},
		{"mbind", unix.SYS_MBIND},
		{"set_mempolicy", unix.SYS_SET_MEMPOLICY},
		{"membarrier", unix.SYS_MEMBARRIER},
		{"eventfd2", unix.SYS_EVENTFD2},
		{"timerfd_create", unix.SYS_TIMERFD_CREATE},
		{"signalfd4", unix.SYS_SIGNALFD4},
		{"epoll_create1", unix.SYS_EPOLL_CREATE1},
		{"get_robust_list", unix.SYS_GET_ROBUST_LIST},
		{"futex_waitv", unix.SYS_FUTEX_WAITV},
		{"setitimer", unix.SYS_SETITIMER},
		{"timer_create", unix.SYS_TIMER_CREATE},
		{"mq_open", unix.SYS_MQ_OPEN},
		{"shmget", unix.SYS_SHMGET},
		{"semget", unix.SYS_SEMGET},
		{"msgget", unix.SYS_MSGGET},
		{"lsm_get_self_attr", 459},
		{"listmount", 458},
		// Also in the denylist.
		{"mount_setattr", unix.SYS_MOUNT_SETATTR},
		{"process_madvise", unix.SYS_PROCESS_MADVISE},
		{"name_to_handle_at", unix.SYS_NAME_TO_HANDLE_AT},
		{"swapon", unix.SYS_SWAPON},
		{"sethostname", unix.SYS_SETHOSTNAME},
		{"socket", unix.SYS_SOCKET},
		{"kill", unix.SYS_KILL},
		// Beyond every table.
		{"nr 600", 600},
		{"nr 1023", 1023},
		{"nr 0x3fffffff", 0x3fffffff},
		{"nr 0xffffffff", 0xffffffff},
	}
	zygoteRefuses := map[string]bool{}
	for _, n := range Denied(Zygote) {
		zygoteRefuses[n] = true
	}
	full, child, zygote := loadKind(t, Full), loadKind(t, Child), loadKind(t, Zygote)
	fresh := 0
	for _, c := range unlisted {
		if slices.Contains(Allowed(Full), c.name) {
			t.Fatalf("%s is in the allowlist", c.name)
		}
		if !zygoteRefuses[c.name] && c.nr < 600 {
			if zygote.run(t, native(c.nr)) != retAllow {
				t.Fatalf("%s: the zygote's denylist refuses it: list it below", c.name)
			}
			fresh++
		}
		for _, args := range [][]uint64{nil, {0, 0, 0, 0, 0, 0}, {3, 0x1000, 64, 1, 2, 3}, {^uint64(0), ^uint64(0)}} {
			d := native(c.nr, args...)
			if got := full.run(t, d); got != retEPERM {
				t.Errorf("full: %s%x: %s, want ERRNO(EPERM)", c.name, args, actionName(got))
			}
			if got := stacked(t, d, zygote, child); got != retEPERM {
				t.Errorf("zygote+child: %s%x: %s, want ERRNO(EPERM)", c.name, args, actionName(got))
			}
		}
	}
	if fresh < 40 {
		t.Errorf("only %d of the refused calls are new to the allowlist", fresh)
	}
}

// The allowlist's binary search takes, for every system call number, the
// verdict the table gives it.
func TestAllowlistVerdicts(t *testing.T) {
	for _, k := range []Kind{Full, Child, FullWorkspace, ChildWorkspace, FullNet, ChildNet, FullWorkspaceNet, ChildWorkspaceNet} {
		testAllowlistVerdicts(t, k)
	}
}

func testAllowlistVerdicts(t *testing.T, k Kind) {
	v := verdicts(k.Workspace(), k.Net())
	want := func(nr uint32) uint32 {
		if int(nr) >= len(v) {
			return retEPERM
		}
		switch v[nr] {
		case vAllow:
			return retAllow
		case vNoSys:
			return retNOSYS
		case vClone, vPrlimit, vIoctl, vSocket:
			return 0xdead // checked by argument: see argCases
		}
		return retEPERM
	}
	{
		f := loadKind(t, k)
		n := 0
		for nr := uint32(0); nr < 2048; nr++ {
			w := want(nr)
			if w == 0xdead {
				continue
			}
			if got := f.run(t, native(nr, 7, 7, 7)); got != w {
				t.Errorf("%s: nr %d: %s, want %s", k, nr, actionName(got), actionName(w))
			}
			if w == retAllow {
				n++
			}
		}
		t.Logf("%s: %d instructions, %d system calls allowed unconditionally (+ clone, prlimit64, ioctl by argument)",
			k, len(f.ins), n)
	}
}

// A system call through another ABI is killed, whatever it is; on x86_64
// one through the x32 ABI is refused.
func TestWrongArch(t *testing.T) {
	arches := []uint32{unix.AUDIT_ARCH_I386, unix.AUDIT_ARCH_X86_64, unix.AUDIT_ARCH_ARM,
		unix.AUDIT_ARCH_AARCH64, unix.AUDIT_ARCH_RISCV64, 0}
	for _, k := range Kinds() {
		f := loadKind(t, k)
		for _, arch := range arches {
			if arch == auditArch {
				continue
			}
			for _, nr := range []uint32{unix.SYS_READ, unix.SYS_EXIT_GROUP, unix.SYS_GETPID, 0} {
				d := native(nr)
				d.arch = arch
				if got := f.run(t, d); got != retKill {
					t.Errorf("%s: arch %#x nr %d: %s, want KILL_PROCESS", k, arch, nr, actionName(got))
				}
			}
		}
		if x32SyscallBit == 0 {
			continue
		}
		for _, nr := range []uint32{unix.SYS_READ, unix.SYS_WRITE, unix.SYS_EXIT_GROUP, 512, 0xffffffff} {
			if got := f.run(t, native(x32SyscallBit|nr)); got != retEPERM {
				t.Errorf("%s: x32 nr %#x: %s, want ERRNO(EPERM)", k, x32SyscallBit|nr, actionName(got))
			}
		}
	}
}

// A fork-server child, Zygote's filter with Child's stacked on it, is
// sealed exactly as a process under Full; so are the workspace kinds.
func TestZygoteAndChildStackToFull(t *testing.T) {
	for _, ks := range [][3]Kind{{Full, Zygote, Child}, {FullWorkspace, ZygoteWorkspace, ChildWorkspace},
		{FullNet, ZygoteNet, ChildNet}, {FullWorkspaceNet, ZygoteWorkspaceNet, ChildWorkspaceNet}} {
		full, zygote, child := loadKind(t, ks[0]), loadKind(t, ks[1]), loadKind(t, ks[2])
		for _, d := range sweep(auditArch) {
			if got, want := stacked(t, d, zygote, child), full.run(t, d); got != want {
				t.Errorf("%s: nr %d args %#x: zygote+child %s, full %s", ks[0], d.nr, d.args, actionName(got), actionName(want))
			}
		}
	}
}

// The workspace kinds differ from the plain ones in exactly the
// workspace calls: every other system call number gets the same verdict.
func TestWorkspaceKindsAddOnlyTheWorkspaceCalls(t *testing.T) {
	ws := map[uint32]bool{}
	for _, c := range workspaceCalls() {
		ws[c.nr] = true
	}
	for _, k := range []Kind{Full, Zygote, Child} {
		plain, wide := loadKind(t, k), loadKind(t, k+FullWorkspace)
		if (k+FullWorkspace).Base() != k || !(k + FullWorkspace).Workspace() || k.Workspace() {
			t.Fatalf("Base/Workspace of %s", k)
		}
		for _, d := range sweep(auditArch) {
			got, want := wide.run(t, d), plain.run(t, d)
			if ws[d.nr] && d.arch == auditArch {
				want = retAllow
			}
			if got != want {
				t.Errorf("%s: nr %d args %#x: %s, want %s", k+FullWorkspace, d.nr, d.args, actionName(got), actionName(want))
			}
		}
	}
}

// The net kinds differ from their base kinds in exactly the net calls,
// allowed, and socket, allowed for a TCP socket only; bind, listen and
// accept stay refused.
func TestNetKindsAddOnlyTheNetCalls(t *testing.T) {
	net := map[uint32]bool{}
	for _, c := range netCalls() {
		net[c.nr] = true
	}
	for _, k := range []Kind{Full, Zygote, Child, FullWorkspace, ZygoteWorkspace, ChildWorkspace} {
		nk := k.With(k.Workspace(), true)
		if nk.Base() != k.Base() || nk.Workspace() != k.Workspace() || !nk.Net() || k.Net() {
			t.Fatalf("Base/Workspace/Net of %s", nk)
		}
		plain, wide := loadKind(t, k), loadKind(t, nk)
		for _, d := range sweep(auditArch) {
			if (d.nr == unix.SYS_SOCKET || d.nr == unix.SYS_SETSOCKOPT) && d.arch == auditArch && nk.Base() != Zygote {
				continue // socketCases, setsockoptCases
			}
			if d.nr == unix.SYS_SOCKET && d.arch == auditArch {
				continue // socketCases
			}
			got, want := wide.run(t, d), plain.run(t, d)
			if net[d.nr] && d.arch == auditArch {
				want = retAllow
			}
			if got != want {
				t.Errorf("%s: nr %d args %#x: %s, want %s", nk, d.nr, d.args, actionName(got), actionName(want))
			}
		}
		for _, c := range []call{{"bind", unix.SYS_BIND}, {"listen", unix.SYS_LISTEN}, {"accept", unix.SYS_ACCEPT},
			{"accept4", unix.SYS_ACCEPT4}, {"execve", unix.SYS_EXECVE}} {
			if got := wide.run(t, native(c.nr, 3, 0x1000, 16)); got != retEPERM {
				t.Errorf("%s: %s: %s, want EPERM", nk, c.name, actionName(got))
			}
		}
		for _, c := range setsockoptCases() {
			if nk.Base() == Zygote {
				break // the zygote's denylist never refused setsockopt
			}
			if got := wide.run(t, c.d); got != c.want {
				t.Errorf("%s: %s: %s, want %s", nk, c.what, actionName(got), actionName(c.want))
			}
			if got := plain.run(t, c.d); got != retEPERM {
				t.Errorf("%s: %s: %s, want EPERM", k, c.what, actionName(got))
			}
		}
		for _, c := range socketCases() {
			if got := wide.run(t, c.d); got != c.want {
				t.Errorf("%s: %s: %s, want %s", nk, c.what, actionName(got), actionName(c.want))
			}
			if got := plain.run(t, c.d); got != retEPERM {
				t.Errorf("%s: %s: %s, want EPERM", k, c.what, actionName(got))
			}
		}
	}
}

// setsockoptCases are the socket options the net allowlists let code
// set (TCP_NODELAY, SO_KEEPALIVE) and some they refuse.
func setsockoptCases() []case_ {
	const tcpULP, soAttachFilter = 31, 26
	return []case_{
		{"setsockopt(TCP, TCP_NODELAY)", native(unix.SYS_SETSOCKOPT, 3, unix.IPPROTO_TCP, unix.TCP_NODELAY, 0x1000, 4), retAllow},
		{"setsockopt(SOL_SOCKET, SO_KEEPALIVE)", native(unix.SYS_SETSOCKOPT, 3, unix.SOL_SOCKET, unix.SO_KEEPALIVE, 0x1000, 4), retAllow},
		{"setsockopt(1<<32|TCP, TCP_NODELAY)", native(unix.SYS_SETSOCKOPT, 3, 1<<32|unix.IPPROTO_TCP, unix.TCP_NODELAY, 0x1000, 4), retAllow},
		{"setsockopt(TCP, TCP_ULP)", native(unix.SYS_SETSOCKOPT, 3, unix.IPPROTO_TCP, tcpULP, 0x1000, 3), retEPERM},
		{"setsockopt(TCP, TCP_CONGESTION)", native(unix.SYS_SETSOCKOPT, 3, unix.IPPROTO_TCP, unix.TCP_CONGESTION, 0x1000, 4), retEPERM},
		{"setsockopt(TCP, SO_KEEPALIVE)", native(unix.SYS_SETSOCKOPT, 3, unix.IPPROTO_TCP, unix.SO_KEEPALIVE, 0x1000, 4), retEPERM},
		{"setsockopt(SOL_SOCKET, TCP_NODELAY)", native(unix.SYS_SETSOCKOPT, 3, unix.SOL_SOCKET, unix.TCP_NODELAY, 0x1000, 4), retEPERM},
		{"setsockopt(SOL_SOCKET, SO_ATTACH_FILTER)", native(unix.SYS_SETSOCKOPT, 3, unix.SOL_SOCKET, soAttachFilter, 0x1000, 16), retEPERM},
		{"setsockopt(IP, IP_OPTIONS)", native(unix.SYS_SETSOCKOPT, 3, unix.IPPROTO_IP, unix.IP_OPTIONS, 0x1000, 4), retEPERM},
	}
}

// socketCases are the sockets the net kinds let code make (TCP over IPv4
// and IPv6) and those they refuse (every other family, type or protocol).
func socketCases() []case_ {
	const sctp, mptcp = 132, 262
	stream := uint64(unix.SOCK_STREAM)
	flags := uint64(unix.SOCK_CLOEXEC | unix.SOCK_NONBLOCK)
	return []case_{
		{"socket(INET, STREAM, 0)", native(unix.SYS_SOCKET, unix.AF_INET, stream, 0), retAllow},
		{"socket(INET, STREAM|CLOEXEC, TCP)", native(unix.SYS_SOCKET, unix.AF_INET, stream|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP), retAllow},
		{"socket(INET6, STREAM|CLOEXEC|NONBLOCK, TCP)", native(unix.SYS_SOCKET, unix.AF_INET6, stream|flags, unix.IPPROTO_TCP), retAllow},
		{"socket(1<<32|INET, STREAM, 0)", native(unix.SYS_SOCKET, 1<<32|unix.AF_INET, stream, 0), retAllow},
		{"socket(UNIX, STREAM, 0)", native(unix.SYS_SOCKET, unix.AF_UNIX, stream, 0), retEPERM},
		{"socket(NETLINK, RAW, 0)", native(unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW, 0), retEPERM},
		{"socket(PACKET, RAW, 0)", native(unix.SYS_SOCKET, unix.AF_PACKET, unix.SOCK_RAW, 0), retEPERM},
		{"socket(VSOCK, STREAM, 0)", native(unix.SYS_SOCKET, unix.AF_VSOCK, stream, 0), retEPERM},
		{"socket(INET, DGRAM, 0)", native(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_DGRAM, 0), retEPERM},
		{"socket(INET6, DGRAM, UDP)", native(unix.SYS_SOCKET, unix.AF_INET6, unix.SOCK_DGRAM, unix.IPPROTO_UDP), retEPERM},
		{"socket(INET, RAW, ICMP)", native(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP), retEPERM},
		{"socket(INET, SEQPACKET, SCTP)", native(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_SEQPACKET, sctp), retEPERM},
		{"socket(INET, STREAM, SCTP)", native(unix.SYS_SOCKET, unix.AF_INET, stream, sctp), retEPERM},
		{"socket(INET, STREAM, MPTCP)", native(unix.SYS_SOCKET, unix.AF_INET, stream, mptcp), retEPERM},
		{"socket(INET, STREAM|0x100, 0)", native(unix.SYS_SOCKET, unix.AF_INET, stream|0x100, 0), retEPERM},
		{"socket(INET, STREAM, 1<<32|SCTP)", native(unix.SYS_SOCKET, unix.AF_INET, stream, 1<<32|sctp), retEPERM},
	}
}

// Allowed and Denied list each name once, in number order, and never a
// system call the architecture lacks; the allowlists name nothing the
// zygote's denylist refuses, nothing that reaches another process and
// nothing that changes a file.
func TestAllowedAndDenied(t *testing.T) {
	full, child, zygote := Allowed(Full), Allowed(Child), Denied(Zygote)
	if len(full) == 0 || len(zygote) == 0 {
		t.Fatalf("Allowed(full) %d names, Denied(zygote) %d", len(full), len(zygote))
	}
	if !slices.Equal(full, child) {
		t.Errorf("full and child allow different calls:\n%v\n%v", full, child)
	}
	if Allowed(Zygote) != nil || Denied(Full) != nil || Denied(Child) != nil {
		t.Error("Allowed(zygote), Denied(full) or Denied(child) is not nil")
	}
	nrs := map[string]uint32{}
	for _, c := range append(allowedCalls(), call{"clone", unix.SYS_CLONE}, call{"prlimit64", unix.SYS_PRLIMIT64},
		call{"ioctl", unix.SYS_IOCTL}) {
		nrs[c.name] = c.nr
	}
	for _, list := range [][]string{full, zygote} {
		seen := map[string]bool{}
		for _, n := range list {
			if seen[n] {
				t.Errorf("%s listed twice", n)
			}
			seen[n] = true
		}
	}
	for i := 1; i < len(full); i++ {
		if nrs[full[i-1]] >= nrs[full[i]] {
			t.Errorf("%s after %s: not sorted by number", full[i], full[i-1])
		}
	}
	if !slices.IsSortedFunc(unconditional(false, false), func(a, b call) int { return int(a.nr) - int(b.nr) }) {
		t.Error("the zygote's refusals are not sorted by number")
	}
	never := append(append(append(deniedCalls(), legacyCalls()...), changeCalls()...), processCalls()...)
	for _, c := range never {
		if _, ok := nrs[c.name]; ok {
			t.Errorf("%s is allowed", c.name)
		}
		for _, a := range allowedCalls() {
			if a.nr == c.nr {
				t.Errorf("%s shares its number with the allowed %s", c.name, a.name)
			}
		}
	}
	for _, n := range []string{"kill", "socketpair", "pidfd_open", "clone3"} {
		if slices.Contains(zygote, n) {
			t.Errorf("zygote refuses %s, which it needs", n)
		}
	}
	if x32SyscallBit == 0 { // arm64
		for _, n := range []string{"fork", "vfork", "mknod", "_sysctl"} {
			if slices.Contains(zygote, n) {
				t.Errorf("%s listed on an architecture without it", n)
			}
		}
		for _, n := range []string{"open", "stat", "dup2", "time"} {
			if slices.Contains(full, n) {
				t.Errorf("%s allowed on an architecture without it", n)
			}
		}
	}
	if Denied(Kind(kindCount)) != nil || Allowed(Kind(kindCount)) != nil {
		t.Error("Denied or Allowed of an unknown kind")
	}
	if _, err := Program(Kind(-1)); err == nil {
		t.Error("Program of an unknown kind")
	}
}

// sweep returns, for arch, every system call number 0..600 (and a few x32
// ones) with the argument values the programs distinguish: all-zero and
// arbitrary arguments, clone flags, pids for prlimit64, ioctl requests,
// each also with the high half set.
func sweep(arch uint32) []seccompData {
	var args [][]uint64
	for _, a0 := range []uint64{0, 1, 1 << 32, threadFlags, 1<<32 | threadFlags, forkFlags, unix.CLONE_THREAD,
		threadFlags | unix.CLONE_NEWUSER, threadFlags | unix.CLONE_NEWNET, threadFlags | unix.CLONE_NEWNS,
		threadFlags | unix.CLONE_NEWPID, threadFlags | unix.CLONE_NEWIPC, threadFlags | unix.CLONE_NEWUTS,
		threadFlags | unix.CLONE_NEWCGROUP, threadFlags | unix.CLONE_NEWTIME, 0xffffffffffffffff} {
		args = append(args, []uint64{a0, 0x1000})
	}
	for _, a1 := range []uint64{0, unix.TCGETS, unix.TIOCSTI, unix.TIOCLINUX, 1<<32 | unix.TIOCSTI,
		1<<32 | unix.TIOCLINUX, unix.TIOCSTI << 32, 0xffffffff} {
		args = append(args, []uint64{0, a1, 0x1000}, []uint64{3, a1, 0x1000})
	}
	var out []seccompData
	nrs := make([]uint32, 0, 620)
	for nr := uint32(0); nr <= 600; nr++ {
		nrs = append(nrs, nr)
	}
	nrs = append(nrs, 0x40000000, 0x40000000|unix.SYS_READ, 0x40000000|unix.SYS_EXIT_GROUP, 0x7fffffff, 0xffffffff)
	for _, nr := range nrs {
		for _, a := range args {
			d := native(nr, a...)
			d.arch = arch
			out = append(out, d)
		}
	}
	return out
}
