package runner

import (
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/orqest/sandbox/runner/seccomp"
)

// machine maps GOARCH to os.uname's machine name, for the architectures a
// kernel table is sent for.
func machine(goarch string) string {
	switch goarch {
	case "amd64":
		return "x86_64"
	case "arm64":
		return "aarch64"
	case "riscv64", "ppc64le", "s390x":
		return goarch
	case "loong64":
		return "loongarch64"
	}
	return ""
}

// landlockRuleNetPort is LANDLOCK_RULE_NET_PORT of enum landlock_rule_type
// (linux/landlock.h, Landlock ABI 4), which golang.org/x/sys/unix does not
// define.
const landlockRuleNetPort = 2

// kernelTable returns the table of the architecture this binary runs on,
// nil if none is known. Seccomp programs are only built where package
// seccomp supports the architecture.
func kernelTable() (*KernelTable, error) {
	m := machine(runtime.GOARCH)
	if m == "" {
		return nil, nil
	}
	t := &KernelTable{
		Machine: m,
		Sys: map[string]uint64{
			"capset":                  unix.SYS_CAPSET,
			"landlock_create_ruleset": unix.SYS_LANDLOCK_CREATE_RULESET,
			"landlock_add_rule":       unix.SYS_LANDLOCK_ADD_RULE,
			"landlock_restrict_self":  unix.SYS_LANDLOCK_RESTRICT_SELF,
		},
		Const: map[string]uint64{
			"PR_SET_PDEATHSIG":                    unix.PR_SET_PDEATHSIG,
			"SIGKILL":                             uint64(unix.SIGKILL),
			"PR_SET_NO_NEW_PRIVS":                 unix.PR_SET_NO_NEW_PRIVS,
			"PR_GET_SECCOMP":                      unix.PR_GET_SECCOMP,
			"PR_SET_SECCOMP":                      unix.PR_SET_SECCOMP,
			"SECCOMP_MODE_FILTER":                 unix.SECCOMP_MODE_FILTER,
			"CLONE_NEWUSER":                       unix.CLONE_NEWUSER,
			"CLONE_NEWNET":                        unix.CLONE_NEWNET,
			"CLONE_NEWNS":                         unix.CLONE_NEWNS,
			"MS_REC":                              unix.MS_REC,
			"MS_PRIVATE":                          unix.MS_PRIVATE,
			"MS_RDONLY":                           unix.MS_RDONLY,
			"MS_NOSUID":                           unix.MS_NOSUID,
			"MS_NODEV":                            unix.MS_NODEV,
			"MS_NOEXEC":                           unix.MS_NOEXEC,
			"LINUX_CAPABILITY_VERSION_3":          unix.LINUX_CAPABILITY_VERSION_3,
			"LANDLOCK_CREATE_RULESET_VERSION":     unix.LANDLOCK_CREATE_RULESET_VERSION,
			"LANDLOCK_RULE_PATH_BENEATH":          unix.LANDLOCK_RULE_PATH_BENEATH,
			"LANDLOCK_RULE_NET_PORT":              landlockRuleNetPort,
			"LANDLOCK_ACCESS_FS_EXECUTE":          unix.LANDLOCK_ACCESS_FS_EXECUTE,
			"LANDLOCK_ACCESS_FS_WRITE_FILE":       unix.LANDLOCK_ACCESS_FS_WRITE_FILE,
			"LANDLOCK_ACCESS_FS_READ_FILE":        unix.LANDLOCK_ACCESS_FS_READ_FILE,
			"LANDLOCK_ACCESS_FS_READ_DIR":         unix.LANDLOCK_ACCESS_FS_READ_DIR,
			"LANDLOCK_ACCESS_FS_REMOVE_DIR":       unix.LANDLOCK_ACCESS_FS_REMOVE_DIR,
			"LANDLOCK_ACCESS_FS_REMOVE_FILE":      unix.LANDLOCK_ACCESS_FS_REMOVE_FILE,
			"LANDLOCK_ACCESS_FS_MAKE_CHAR":        unix.LANDLOCK_ACCESS_FS_MAKE_CHAR,
			"LANDLOCK_ACCESS_FS_MAKE_DIR":         unix.LANDLOCK_ACCESS_FS_MAKE_DIR,
			"LANDLOCK_ACCESS_FS_MAKE_REG":         unix.LANDLOCK_ACCESS_FS_MAKE_REG,
			"LANDLOCK_ACCESS_FS_MAKE_SOCK":        unix.LANDLOCK_ACCESS_FS_MAKE_SOCK,
			"LANDLOCK_ACCESS_FS_MAKE_FIFO":        unix.LANDLOCK_ACCESS_FS_MAKE_FIFO,
			"LANDLOCK_ACCESS_FS_MAKE_BLOCK":       unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK,
			"LANDLOCK_ACCESS_FS_MAKE_SYM":         unix.LANDLOCK_ACCESS_FS_MAKE_SYM,
			"LANDLOCK_ACCESS_FS_REFER":            unix.LANDLOCK_ACCESS_FS_REFER,
			"LANDLOCK_ACCESS_FS_TRUNCATE":         unix.LANDLOCK_ACCESS_FS_TRUNCATE,
			"LANDLOCK_ACCESS_FS_IOCTL_DEV":        unix.LANDLOCK_ACCESS_FS_IOCTL_DEV,
			"LANDLOCK_ACCESS_NET_BIND_TCP":        unix.LANDLOCK_ACCESS_NET_BIND_TCP,
			"LANDLOCK_ACCESS_NET_CONNECT_TCP":     unix.LANDLOCK_ACCESS_NET_CONNECT_TCP,
			"LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET": unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET,
			"LANDLOCK_SCOPE_SIGNAL":               unix.LANDLOCK_SCOPE_SIGNAL,
		},
	}
	for _, k := range seccomp.Kinds() {
		prog, err := seccomp.Program(k)
		if errors.Is(err, seccomp.ErrUnsupported) {
			t.Seccomp, t.SeccompError = nil, err.Error()
			break
		}
		if err != nil {
			return nil, fmt.Errorf("building the seccomp programs: %w", err)
		}
		if t.Seccomp == nil {
			t.Seccomp = map[string]string{}
		}
		t.Seccomp[k.String()] = hex.EncodeToString(prog)
	}
	return t, nil
}
