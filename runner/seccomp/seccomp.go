// Package seccomp builds the seccomp filters the Python runner installs
// before any user code runs: classic BPF programs over struct seccomp_data.
//
// The programs that govern user code, Full (a process sealed on its own)
// and Child (a fork-server child), are allowlists: the system calls CPython
// needs to run its standard library once sealed (memory, threads and
// futexes, signals to itself, clocks and sleeps, reading files Landlock
// lets it open, writing to the descriptors it holds, its own identity and
// limits, random bytes; see Allowed), clone only to make a thread and
// never with a namespace flag, prlimit64 only on the calling process, ioctl
// never TIOCSTI or TIOCLINUX. clone3 is refused with ENOSYS, so that the C
// library falls back to clone, whose flags the filter can inspect; every
// other system call, including numbers no kernel has yet, is refused with
// EPERM. The zygote's program, which Child stacks on, is a denylist of what
// no runner process needs (sockets, exec, ptrace, mounts and namespaces,
// kernel keys and modules, set*id, io_uring, bpf, file metadata changes,
// ...; see Denied): the zygote forks, signals and reaps its children.
//
// The programs are built here, from the golang.org/x/sys/unix system call
// names of the architecture the binary is compiled for, and handed to the
// child ready to install (see runner.Seal): the child only calls
// prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER) with them.
//
// Every program starts with an architecture check: a system call made
// through any other ABI (i386 on x86_64, arm32 on arm64) kills the process,
// and on x86_64 one made through the x32 ABI is refused with EPERM.
// Supported: linux/amd64 and linux/arm64; elsewhere Program returns an
// error wrapping ErrUnsupported.
package seccomp

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/net/bpf"
)

// Kind selects one of the runner's programs. A fork-server child runs
// under two: the Zygote program it inherits and the Child program it
// installs on top, which together act as Full.
type Kind int

// The programs, by the process that installs them.
const (
	// Full is for a process sealed on its own (spawn mode): the allowlist.
	Full Kind = iota
	// Zygote is for the fork-server: a denylist of what no runner process
	// needs; it allows what the zygote needs itself (fork by clone,
	// clone3, signals to its children, pidfds, a socketpair per
	// pre-forked child).
	Zygote
	// Child is for a fork-server child, stacked on the Zygote filter it
	// inherits: the same allowlist as Full.
	Child
	// FullWorkspace, ZygoteWorkspace and ChildWorkspace are Full, Zygote
	// and Child for a process that may change a workspace (a tier-2
	// session's, runner.Seal.WritePaths): they also let through making and
	// removing directories, removing files and renaming (mkdirat,
	// unlinkat, renameat, renameat2 and their older forms; see
	// WorkspaceCalls). Landlock decides where: only below the workspace.
	// Links and symbolic links stay refused.
	FullWorkspace
	ZygoteWorkspace
	ChildWorkspace
	// FullNet ... ChildWorkspaceNet are the six kinds above for a process
	// whose session has an egress proxy (runner.Seal.Egress): they also let
	// through what a TCP client needs (see NetCalls): socket only for
	// AF_INET or AF_INET6, SOCK_STREAM, protocol 0 or IPPROTO_TCP (with
	// SOCK_NONBLOCK and SOCK_CLOEXEC), connect, sendto, recvfrom,
	// setsockopt, getpeername, poll and ppoll. bind, listen, accept and
	// every other family (unix, netlink, packet, UDP) stay refused.
	// Landlock, where in force, lets connect reach the proxy's port only.
	FullNet
	ZygoteNet
	ChildNet
	FullWorkspaceNet
	ZygoteWorkspaceNet
	ChildWorkspaceNet
)

// kindCount is the number of kinds: a kind is its base (Full, Zygote,
// Child) plus 3 with the workspace calls plus 6 with the net calls.
const kindCount = 12

// Kinds returns every Kind, in declaration order.
func Kinds() []Kind {
	out := make([]Kind, kindCount)
	for i := range out {
		out[i] = Kind(i)
	}
	return out
}

// valid reports whether k is a declared kind.
func (k Kind) valid() bool { return k >= 0 && k < kindCount }

// Base returns the kind without the workspace and net calls: Full, Zygote
// or Child.
func (k Kind) Base() Kind {
	if !k.valid() {
		return k
	}
	return k % 3
}

// Workspace reports whether k lets through the workspace calls.
func (k Kind) Workspace() bool { return k.valid() && k%6 >= 3 }

// Net reports whether k lets through the TCP client calls.
func (k Kind) Net() bool { return k.valid() && k >= 6 }

// With returns the kind of base k.Base() with the workspace calls when ws
// and the net calls when net.
func (k Kind) With(ws, net bool) Kind {
	out := k.Base()
	if ws {
		out += 3
	}
	if net {
		out += 6
	}
	return out
}

// String returns the kind's name as the runner knows it: "full", "zygote"
// or "child", with "-ws" for the workspace kinds and then "-net" for the
// net kinds ("child-ws-net").
func (k Kind) String() string {
	if k.valid() && k.Base() != k {
		s := k.Base().String()
		if k.Workspace() {
			s += "-ws"
		}
		if k.Net() {
			s += "-net"
		}
		return s
	}
	switch k {
	case Full:
		return "full"
	case Zygote:
		return "zygote"
	case Child:
		return "child"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// ErrUnsupported is what Program returns (wrapped) on an architecture it
// has no system call table for.
var ErrUnsupported = errors.New("seccomp: architecture not supported")

// instructions returns the program of kind k as BPF instructions.
func instructions(k Kind) ([]bpf.Instruction, error) {
	if !k.valid() {
		return nil, fmt.Errorf("seccomp: unknown kind %d", int(k))
	}
	return build(k)
}

// Program returns the program of kind k assembled as the array of struct
// sock_filter { __u16 code; __u8 jt; __u8 jf; __u32 k; } in the host's
// byte order: the filter of the struct sock_fprog that
// prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) installs. The error
// wraps ErrUnsupported on an architecture without a table.
func Program(k Kind) ([]byte, error) {
	ins, err := instructions(k)
	if err != nil {
		return nil, err
	}
	raw, err := bpf.Assemble(ins)
	if err != nil {
		return nil, fmt.Errorf("seccomp: assembling the %s program: %w", k, err)
	}
	return encode(raw), nil
}

// encode renders raw instructions as the kernel's struct sock_filter array
// in the host's byte order.
func encode(raw []bpf.RawInstruction) []byte {
	out := make([]byte, 0, 8*len(raw))
	for _, r := range raw {
		out = binary.NativeEndian.AppendUint16(out, r.Op)
		out = append(out, r.Jt, r.Jf)
		out = binary.NativeEndian.AppendUint32(out, r.K)
	}
	return out
}

// Allowed returns the names of the system calls the program of kind k
// lets through, sorted by number, for the allowlists (Full and Child):
// every system call not named is refused (clone3 with ENOSYS, the others
// with EPERM). clone, prlimit64 and ioctl are named and allowed only with
// the arguments the package documentation states. Nil for Zygote (a
// denylist) and on an unsupported architecture.
func Allowed(k Kind) []string {
	if !k.valid() {
		return nil
	}
	return allowed(k)
}

// Denied returns the names of the system calls the Zygote program refuses
// with EPERM whatever their arguments, sorted by number; prlimit64 (the
// calling process only) and ioctl (no TIOCSTI or TIOCLINUX) are checked by
// argument and not listed. Nil for the allowlists (Full, Child: see
// Allowed) and on an unsupported architecture.
func Denied(k Kind) []string {
	if !k.valid() {
		return nil
	}
	return denied(k)
}
