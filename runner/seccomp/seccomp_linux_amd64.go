package seccomp

import "golang.org/x/sys/unix"

// auditArch is the seccomp_data.arch of a native system call.
const auditArch = unix.AUDIT_ARCH_X86_64

// x32SyscallBit is the bit the x32 ABI sets in the system call number
// (__X32_SYSCALL_BIT): every such call is refused.
const x32SyscallBit = 0x40000000

// legacyCalls are the refused system calls that only some architectures
// have (arm64 never had them).
func legacyCalls() []call {
	return []call{
		{"fork", unix.SYS_FORK},
		{"vfork", unix.SYS_VFORK},
		{"iopl", unix.SYS_IOPL},
		{"ioperm", unix.SYS_IOPERM},
		{"uselib", unix.SYS_USELIB},
		{"modify_ldt", unix.SYS_MODIFY_LDT},
		{"_sysctl", unix.SYS__SYSCTL},
		{"mknod", unix.SYS_MKNOD},
	}
}

// legacyChangeCalls are the calls of changeCalls that only some
// architectures have.
func legacyChangeCalls() []call {
	return []call{
		{"chmod", unix.SYS_CHMOD},
		{"chown", unix.SYS_CHOWN},
		{"lchown", unix.SYS_LCHOWN},
		{"utime", unix.SYS_UTIME},
		{"utimes", unix.SYS_UTIMES},
		{"futimesat", unix.SYS_FUTIMESAT},
		{"link", unix.SYS_LINK},
		{"symlink", unix.SYS_SYMLINK},
		{"rename", unix.SYS_RENAME},
		{"inotify_init", unix.SYS_INOTIFY_INIT},
	}
}

// legacyWorkspaceCalls are the calls of workspaceCalls that only some
// architectures have.
func legacyWorkspaceCalls() []call {
	return []call{
		{"mkdir", unix.SYS_MKDIR},
		{"rmdir", unix.SYS_RMDIR},
		{"unlink", unix.SYS_UNLINK},
		{"rename", unix.SYS_RENAME},
	}
}

// legacyAllowedCalls are the older forms of allowed calls that only some
// architectures have: glibc on x86_64 still calls readlink, and
// open/stat/lstat/access/dup2/time are the same kernel paths as their *at
// or newer forms.
func legacyAllowedCalls() []call {
	return []call{
		{"open", unix.SYS_OPEN},
		{"stat", unix.SYS_STAT},
		{"lstat", unix.SYS_LSTAT},
		{"access", unix.SYS_ACCESS},
		{"readlink", unix.SYS_READLINK},
		{"dup2", unix.SYS_DUP2},
		{"time", unix.SYS_TIME},
	}
}

// legacyNetCalls are the calls of netCalls that only some architectures
// have: glibc's poll on x86_64 (socket timeouts wait with it).
func legacyNetCalls() []call {
	return []call{{"poll", unix.SYS_POLL}}
}
