package seccomp

import "golang.org/x/sys/unix"

// auditArch is the seccomp_data.arch of a native system call.
const auditArch = unix.AUDIT_ARCH_AARCH64

// x32SyscallBit is zero: arm64 has no x32-like ABI sharing its arch value
// (arm32 compat calls carry AUDIT_ARCH_ARM and are killed).
const x32SyscallBit = 0

// legacyCalls are the refused system calls that only some architectures
// have: arm64 has no fork, vfork, iopl, ioperm, uselib, modify_ldt, _sysctl
// or mknod (only their *at or clone forms, listed in deniedCalls).
func legacyCalls() []call { return nil }

// legacyChangeCalls: arm64 has only the *at forms of chmod, chown, utime,
// link, symlink and rename, and only inotify_init1 (all in changeCalls).
func legacyChangeCalls() []call { return nil }

// legacyAllowedCalls: arm64 has only the *at and newer forms of open,
// stat, access, readlink and dup2, and no time (all in allowedCalls or
// not needed: the vDSO answers time).
func legacyAllowedCalls() []call { return nil }

// legacyWorkspaceCalls: arm64 has only mkdirat, unlinkat and renameat(2)
// (all in workspaceCalls).
func legacyWorkspaceCalls() []call { return nil }

// legacyNetCalls: arm64 has only ppoll (in netCalls).
func legacyNetCalls() []call { return nil }
