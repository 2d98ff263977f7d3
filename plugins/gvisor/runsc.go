package gvisor

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/orqest/sandbox/internal/forkcore"
	"github.com/orqest/sandbox/internal/procfs"
	"github.com/orqest/sandbox/shared"
)

// InnerDir is where the per-call directory holding the response pipe is
// mounted inside the sandbox.
const InnerDir = "/run/orqest"

// innerFIFO is the response pipe's path inside the sandbox.
const innerFIFO = InnerDir + "/resp"

// ForkCorePath is where the fork server's C loop (forkcore.Name, checked
// against the sha256 this plugin was built with) is bound read-only in
// every sandbox when the plugin has one: the runner loads its audit hook
// and class guard in C from it.
const ForkCorePath = "/opt/orqest/" + forkcore.Name

// coreFD is the descriptor a one-call sandbox's bootstrap opens
// ForkCorePath on (the runner's request names it).
const coreFD = 4

// respBootstrap opens the response pipe as fd 3 (runsc passes only fds 0-2
// to the sandboxed process) and, with core, ForkCorePath as coreFD; then
// the runner's own bootstrap runs.
func respBootstrap(core bool) string {
	s := `import os;f=os.open("` + innerFIFO + `",os.O_WRONLY)
if f!=3:os.dup2(f,3);os.close(f)
`
	if core {
		s += `c=os.open("` + ForkCorePath + `",os.O_RDONLY)
if c!=` + strconv.Itoa(coreFD) + `:os.dup2(c,` + strconv.Itoa(coreFD) + `);os.close(c)
del c
`
	}
	return s + "del f,os\n"
}

// lookRunsc finds the runsc binary: path when set, else $PATH and the
// places Debian's package installs it.
func lookRunsc(path string) (string, error) {
	if path != "" {
		st, err := os.Stat(path)
		if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
			return "", configError("runsc", shared.ErrUnavailable, "runsc %q is not an executable file (install it with `apt-get install runsc`)", path)
		}
		return path, nil
	}
	if p, err := exec.LookPath("runsc"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/bin/runsc", "/usr/local/bin/runsc", "/usr/sbin/runsc"} {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", fmt.Errorf("gvisor config: runsc (gVisor) not found in $PATH or /usr/bin; install it with `apt-get install runsc`: %w", shared.ErrUnavailable)
}

// rootfs lays out, under dir, the read-only root the sandbox sees: empty
// mount points, the host's top-level symlinks (merged /usr: /bin, /lib,
// /lib64 point into /usr) and nothing else. What the interpreter needs is
// bind-mounted read-only onto it (mounts).
func rootfs(dir string) error {
	for _, d := range []string{"usr", "proc", "tmp", "dev", "etc", "data", "workspace", filepath.Dir(strings.TrimPrefix(RuntimePath, "/")), strings.TrimPrefix(InnerDir, "/")} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	// The mount points of the runtime binary (sessions) and the C loop.
	for _, p := range []string{RuntimePath, ForkCorePath} {
		f, err := os.OpenFile(filepath.Join(dir, strings.TrimPrefix(p, "/")), os.O_CREATE|os.O_RDONLY, 0o755)
		if err != nil {
			return err
		}
		f.Close()
	}
	for _, name := range topLevel {
		host := "/" + name
		fi, err := os.Lstat(host)
		if err != nil {
			continue
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(host)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, filepath.Join(dir, name)); err != nil && !os.IsExist(err) {
				return err
			}
		} else if fi.IsDir() {
			if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
				return err
			}
		}
	}
	if _, err := os.Stat("/etc/ld.so.cache"); err == nil {
		f, err := os.OpenFile(filepath.Join(dir, "etc", "ld.so.cache"), os.O_CREATE|os.O_RDONLY, 0o644)
		if err != nil {
			return err
		}
		f.Close()
	}
	return nil
}

// topLevel are the host's top-level entries the interpreter may need:
// symlinks on a merged-/usr system, real directories (bind-mounted) on
// others.
var topLevel = []string{"bin", "lib", "lib64", "lib32", "libx32", "sbin"}

// ociVersion is the runtime-spec version the bundles declare.
const ociVersion = "1.0.2"

// baseSpec is what every bundle shares: the read-only root, the hostname,
// /proc, a small private tmpfs on /tmp, the host paths of hostMounts and
// new pid, ipc, uts, mount and network namespaces.
func baseSpec(root string) *specs.Spec {
	return &specs.Spec{
		Version:  ociVersion,
		Root:     &specs.Root{Path: root, Readonly: true},
		Hostname: "orqest",
		Mounts: append([]specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "noexec", "size=16m", "mode=1777"}},
		}, hostMounts()...),
		Linux: &specs.Linux{Namespaces: []specs.LinuxNamespace{
			{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace},
			{Type: specs.MountNamespace}, {Type: specs.NetworkNamespace},
		}},
	}
}

// spec returns the OCI runtime spec of one call: the runner as uid/gid
// 65534 with an empty environment, the read-only root of rootfs with /usr
// (and the real top-level library directories) bound read-only, a small
// private tmpfs on /tmp, and the call's directory (the response pipe) on
// InnerDir; core ("": none) is bound read-only on ForkCorePath.
func spec(root, callIO, core string, args []string, memMB, cpuSeconds int) ([]byte, error) {
	s := baseSpec(root)
	s.Mounts = append(s.Mounts, specs.Mount{Destination: InnerDir, Type: "bind", Source: callIO, Options: []string{"bind", "rw", "nosuid", "nodev", "noexec"}})
	s.Mounts = append(s.Mounts, coreMount(core)...)
	mem := uint64(memMB) << 20
	s.Process = &specs.Process{
		User:            specs.User{UID: 65534, GID: 65534},
		Args:            args,
		Env:             []string{},
		Cwd:             "/tmp",
		NoNewPrivileges: true,
		Rlimits: []specs.POSIXRlimit{
			{Type: "RLIMIT_AS", Hard: mem, Soft: mem},
			{Type: "RLIMIT_CPU", Hard: uint64(cpuSeconds) + 1, Soft: uint64(cpuSeconds)},
			{Type: "RLIMIT_CORE", Hard: 0, Soft: 0},
		},
	}
	return json.Marshal(s)
}

// coreMount binds core (the plugin's checked copy of the C loop; "":
// none) read-only on ForkCorePath.
func coreMount(core string) []specs.Mount {
	if core == "" {
		return nil
	}
	return []specs.Mount{{Destination: ForkCorePath, Type: "bind", Source: core, Options: []string{"bind", "ro", "nosuid", "nodev"}}}
}

// hostMounts are the read-only host paths every sandbox sees: /usr, the
// real top-level library directories and the loader's cache.
func hostMounts() []specs.Mount {
	mounts := []specs.Mount{{Destination: "/usr", Type: "bind", Source: "/usr", Options: []string{"rbind", "ro", "nosuid", "nodev"}}}
	for _, name := range topLevel {
		if fi, err := os.Lstat("/" + name); err == nil && fi.IsDir() {
			mounts = append(mounts, specs.Mount{Destination: "/" + name, Type: "bind", Source: "/" + name, Options: []string{"rbind", "ro", "nosuid", "nodev"}})
		}
	}
	if _, err := os.Stat("/etc/ld.so.cache"); err == nil {
		mounts = append(mounts, specs.Mount{Destination: "/etc/ld.so.cache", Type: "bind", Source: "/etc/ld.so.cache", Options: []string{"bind", "ro"}})
	}
	return mounts
}

// runtimeCaps are the capabilities of a session's runtime inside the
// sandbox (the Sentry's, not the host's), as in the tier-2 container:
// SETUID and SETGID to drop its Python children to 65534, KILL to kill
// them at their wall clock, CHOWN to own /data. The children lose them
// all when they drop.
var runtimeCaps = []string{"CAP_CHOWN", "CAP_KILL", "CAP_SETGID", "CAP_SETUID"}

// sessionSpec returns the OCI runtime spec of a session: the agent runtime
// (bound read-only from the host at RuntimePath) as the sandbox's root
// with runtimeCaps and no-new-privileges, the read-only root of rootfs
// with the host paths of hostMounts, the user's data directory on /data,
// tmpfs on /workspace (0711: the children traverse it to their agent's
// directory) and /tmp, and the sandbox's memory capped at cfg.SessionMB.
// With egress rules (eg) it also binds the proxy socket's directory and
// sets the proxy environment (egress.go).
func sessionSpec(root, runtime, data string, cfg Config, eg *egressSide) ([]byte, error) {
	s := baseSpec(root)
	s.Mounts = append(s.Mounts,
		specs.Mount{Destination: "/workspace", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "noexec", "size=" + memLimit(cfg.WorkspaceMB), "mode=0711"}},
		specs.Mount{Destination: "/data", Type: "bind", Source: data, Options: []string{"bind", "rw", "nosuid", "nodev", "noexec"}},
		specs.Mount{Destination: RuntimePath, Type: "bind", Source: runtime, Options: []string{"bind", "ro", "nosuid", "nodev"}},
	)
	s.Mounts = append(s.Mounts, coreMount(cfg.core)...)
	// The runtime's default mode, the fork-server: where the Sentry has no
	// pidfds (runsc 20221219: pidfd_open is ENOSYS) its zygote keeps its
	// children by pid, and should a zygote not start at all the runtime
	// spawns one interpreter per call and logs why.
	args := append([]string{RuntimePath, "-python", cfg.Python, "-workdir", "/workspace"}, cfg.runtimeFlags().Args()...)
	caps := slices.Clone(runtimeCaps)
	s.Process = &specs.Process{
		User:            specs.User{UID: 0, GID: 0},
		Args:            args,
		Env:             []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
		Cwd:             "/workspace",
		Capabilities:    &specs.LinuxCapabilities{Bounding: caps, Effective: caps, Permitted: caps},
		NoNewPrivileges: true,
		Rlimits:         []specs.POSIXRlimit{{Type: "RLIMIT_CORE", Hard: 0, Soft: 0}},
	}
	mem := int64(cfg.SessionMB) << 20
	s.Linux.Resources = &specs.LinuxResources{Memory: &specs.LinuxMemory{Limit: &mem, Swap: &mem}}
	if eg != nil {
		egressSpec(s, eg.Endpoint) // egress.go
	}
	return json.Marshal(s)
}

// killSandbox SIGKILLs every runsc process (the sandbox, the gofer) that
// serves container id, and waits up to 2 s until none is left: the sandbox
// runs in a session of its own, outside the process group the wall clock
// kills, and dies with runsc only asynchronously.
func killSandbox(id string) {
	deadline := time.Now().Add(2 * time.Second)
	for {
		pids := sandboxPIDs(id)
		if len(pids) == 0 || time.Now().After(deadline) {
			return
		}
		for _, pid := range pids {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// sandboxPIDs returns the living processes whose program is runsc (by its
// argv[0]: runsc, runsc-sandbox, runsc-gofer) and whose arguments name id.
func sandboxPIDs(id string) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || len(b) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if !strings.HasPrefix(filepath.Base(args[0]), "runsc") || !slices.Contains(args[1:], id) {
			continue
		}
		if st, err := procfs.ReadStat(pid); err == nil && !st.Gone() {
			pids = append(pids, pid)
		}
	}
	return pids
}

// deleteContainer removes what a killed `runsc run` left of container id
// in the state directory root (its sandbox dies with runsc, its state
// files do not).
func deleteContainer(runsc string, globals []string, id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	args := append(append([]string(nil), globals...), "delete", "--force", id)
	out, err := exec.CommandContext(ctx, runsc, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("runsc delete --force %s: %v: %s", id, err, strings.TrimSpace(string(out)))
	}
	return nil
}
