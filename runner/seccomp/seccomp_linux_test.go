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
	clone3 := uint32(retNOSYS)
	if k == Zygote {
		fork, clone3 = retAllow, retAllow
	}
	own, other := uint32(retAllow), uint32(retEPERM)
	ioctlDeny := uint32(retEPERM)
	if k == Child {
		// Checked by the inherited Zygote filter.
		other, ioctlDeny = retAllow, retAllow
	}
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

// Each program refuses what it lists with the errno it documents, allows
// what Python needs, and makes its argument checks.
func TestPrograms(t *testing.T) {
	named := map[Kind]map[string]uint32{
		Full: {"socket": retEPERM, "execve": retEPERM, "ptrace": retEPERM, "unshare": retEPERM,
			"mount": retEPERM, "bpf": retEPERM, "setuid": retEPERM, "kill": retEPERM, "socketpair": retEPERM,
			"pidfd_open": retEPERM, "memfd_create": retEPERM, "io_uring_setup": retEPERM},
		Zygote: {"socket": retEPERM, "execve": retEPERM, "ptrace": retEPERM, "unshare": retEPERM,
			"kill": retAllow, "tgkill": retAllow, "socketpair": retAllow, "pidfd_open": retAllow,
			"pidfd_send_signal": retAllow},
		Child: {"kill": retEPERM, "tgkill": retEPERM, "socketpair": retEPERM, "pidfd_open": retEPERM,
			"pidfd_send_signal": retEPERM},
	}
	nrs := map[string]uint32{}
	for _, c := range append(append(append(deniedCalls(), processCalls()...), legacyCalls()...), changeCalls()...) {
		nrs[c.name] = c.nr
	}
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
				want := uint32(retEPERM)
				nr := nrs[name]
				if name == "clone3" {
					nr, want = unix.SYS_CLONE3, retNOSYS
				}
				check("denied "+name, native(nr, 1, 2, 3, 4, 5, 6), want)
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
// sealed exactly as a process under Full.
func TestZygoteAndChildStackToFull(t *testing.T) {
	full, zygote, child := loadKind(t, Full), loadKind(t, Zygote), loadKind(t, Child)
	for _, d := range sweep(auditArch) {
		if got, want := stacked(t, d, zygote, child), full.run(t, d); got != want {
			t.Errorf("nr %d args %#x: zygote+child %s, full %s", d.nr, d.args, actionName(got), actionName(want))
		}
	}
}

// Denied lists each refusal once, in number order, and never a system call
// the architecture lacks; Zygote and Child split Full.
func TestDenied(t *testing.T) {
	for _, k := range Kinds() {
		d := Denied(k)
		if len(d) == 0 {
			t.Fatalf("%s: nothing denied", k)
		}
		seen := map[string]bool{}
		for _, n := range d {
			if seen[n] {
				t.Errorf("%s: %s listed twice", k, n)
			}
			seen[n] = true
		}
		if u := unconditional(k); !slices.IsSortedFunc(u, func(a, b call) int { return int(a.nr) - int(b.nr) }) {
			t.Errorf("%s: not sorted by number", k)
		}
	}
	full, zygote, child := Denied(Full), Denied(Zygote), Denied(Child)
	for _, n := range full {
		if !slices.Contains(zygote, n) && !slices.Contains(child, n) {
			t.Errorf("%s refused by full, by neither zygote nor child", n)
		}
	}
	for _, n := range append(append([]string{}, zygote...), child...) {
		if !slices.Contains(full, n) {
			t.Errorf("%s refused by zygote or child, not by full", n)
		}
	}
	for _, n := range []string{"kill", "socketpair", "pidfd_open", "clone3"} {
		if slices.Contains(zygote, n) {
			t.Errorf("zygote refuses %s, which it needs", n)
		}
	}
	if x32SyscallBit == 0 { // arm64
		for _, n := range []string{"fork", "vfork", "mknod", "_sysctl"} {
			if slices.Contains(full, n) {
				t.Errorf("%s listed on an architecture without it", n)
			}
		}
	}
	if Denied(Kind(7)) != nil {
		t.Error("Denied of an unknown kind")
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
