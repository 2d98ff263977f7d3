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

	"golang.org/x/sys/unix"

	"github.com/orqest/sandbox/internal/procfs"
	"github.com/orqest/sandbox/shared"
)

// InnerDir is where the per-call directory holding the response pipe is
// mounted inside the sandbox.
const InnerDir = "/run/orqest"

// innerFIFO is the response pipe's path inside the sandbox.
const innerFIFO = InnerDir + "/resp"

// respBootstrap opens the response pipe as fd 3 (runsc passes only fds 0-2
// to the sandboxed process), then runs the runner's own bootstrap.
const respBootstrap = `import os;f=os.open("` + innerFIFO + `",os.O_WRONLY)
if f!=3:os.dup2(f,3);os.close(f)
del f,os
`

// lookRunsc finds the runsc binary: path when set, else $PATH and the
// places Debian's package installs it.
func lookRunsc(path string) (string, error) {
	if path != "" {
		st, err := os.Stat(path)
		if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
			return "", fmt.Errorf("gvisor config: runsc %q is not an executable file (install it with `apt-get install runsc`): %w", path, shared.ErrUnavailable)
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
	for _, d := range []string{"usr", "proc", "tmp", "dev", "etc", strings.TrimPrefix(InnerDir, "/")} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
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

// ociMount is one entry of an OCI runtime spec's mounts.
type ociMount struct {
	Destination string   `json:"destination"`
	Type        string   `json:"type"`
	Source      string   `json:"source"`
	Options     []string `json:"options,omitempty"`
}

type ociRlimit struct {
	Type string `json:"type"`
	Hard uint64 `json:"hard"`
	Soft uint64 `json:"soft"`
}

// spec returns the OCI runtime spec of one call: the runner as uid/gid
// 65534 with an empty environment, the read-only root of rootfs with /usr
// (and the real top-level library directories) bound read-only, a small
// private tmpfs on /tmp, and the call's directory (the response pipe) on
// InnerDir.
func spec(root, callIO string, args []string, memMB, cpuSeconds int) ([]byte, error) {
	mounts := []ociMount{
		{Destination: "/proc", Type: "proc", Source: "proc"},
		{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "noexec", "size=16m", "mode=1777"}},
		{Destination: "/usr", Type: "bind", Source: "/usr", Options: []string{"rbind", "ro", "nosuid", "nodev"}},
		{Destination: InnerDir, Type: "bind", Source: callIO, Options: []string{"bind", "rw", "nosuid", "nodev", "noexec"}},
	}
	for _, name := range topLevel {
		if fi, err := os.Lstat("/" + name); err == nil && fi.IsDir() {
			mounts = append(mounts, ociMount{Destination: "/" + name, Type: "bind", Source: "/" + name, Options: []string{"rbind", "ro", "nosuid", "nodev"}})
		}
	}
	if _, err := os.Stat("/etc/ld.so.cache"); err == nil {
		mounts = append(mounts, ociMount{Destination: "/etc/ld.so.cache", Type: "bind", Source: "/etc/ld.so.cache", Options: []string{"bind", "ro"}})
	}
	mem := uint64(memMB) << 20
	s := map[string]any{
		"ociVersion": "1.0.2",
		"process": map[string]any{
			"terminal":        false,
			"user":            map[string]any{"uid": 65534, "gid": 65534},
			"args":            args,
			"env":             []string{},
			"cwd":             "/tmp",
			"noNewPrivileges": true,
			"rlimits": []ociRlimit{
				{Type: "RLIMIT_AS", Hard: mem, Soft: mem},
				{Type: "RLIMIT_CPU", Hard: uint64(cpuSeconds) + 1, Soft: uint64(cpuSeconds)},
				{Type: "RLIMIT_CORE", Hard: 0, Soft: 0},
			},
		},
		"root":     map[string]any{"path": root, "readonly": true},
		"hostname": "orqest",
		"mounts":   mounts,
		"linux": map[string]any{
			"namespaces": []map[string]string{
				{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}, {"type": "network"},
			},
		},
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
