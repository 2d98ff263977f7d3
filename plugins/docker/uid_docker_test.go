package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/toollib"
)

// The runtime and the user's code on different uids, against the real
// engine: the runtime (root with CHOWN/KILL/SETUID/SETGID only) owns /data; the
// Python children run on 65534 without capabilities, so user code cannot
// reach the tool library even with every other layer out of the way.

// execIn runs cmd in the container as user ("uid:gid") through docker
// exec and returns its stdout, stderr and exit code.
func execIn(t *testing.T, containerID, user string, cmd ...string) (string, string, int) {
	t.Helper()
	dc := requireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ex, err := dc.ExecCreate(ctx, containerID, client.ExecCreateOptions{User: user, Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		t.Fatalf("exec create %v: %v", cmd, err)
	}
	att, err := dc.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		t.Fatalf("exec attach: %v", err)
	}
	defer att.Close()
	var stdout, stderr bytes.Buffer
	if _, err := stdcopy.StdCopy(&stdout, &stderr, att.Reader); err != nil {
		t.Fatalf("exec output: %v", err)
	}
	ins, err := dc.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
	if err != nil {
		t.Fatalf("exec inspect: %v", err)
	}
	return stdout.String(), stderr.String(), ins.ExitCode
}

// containerOf returns the container of an open session.
func containerOf(t *testing.T, b *Backend, sid string) string {
	t.Helper()
	return openedSession(t, b, sid).containerID
}

// proc is one process of a container as /proc shows it.
type proc struct {
	pid          int
	comm         string
	uids         []int // real, effective, saved, filesystem
	capEff       uint64
	capPrm       uint64
	noNewPrivs   string
	parent, line string
}

// procsOf lists the container's processes from /proc (the image has no
// ps), read by a root exec without capabilities.
func procsOf(t *testing.T, containerID string) []proc {
	t.Helper()
	const script = `for p in /proc/[0-9]*; do s=$(cat $p/status 2>/dev/null) || continue; echo "$s" | tr '\n' '|'; echo; done`
	out, errOut, code := execIn(t, containerID, "0:0", "/bin/sh", "-c", script)
	if code != 0 {
		t.Fatalf("listing processes: exit %d: %s", code, errOut)
	}
	var ps []proc
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		p := proc{line: line}
		for _, f := range strings.Split(line, "|") {
			k, v, ok := strings.Cut(f, ":")
			if !ok {
				continue
			}
			v = strings.TrimSpace(v)
			switch k {
			case "Name":
				p.comm = v
			case "Pid":
				p.pid, _ = strconv.Atoi(v)
			case "PPid":
				p.parent = v
			case "Uid":
				for _, u := range strings.Fields(v) {
					n, _ := strconv.Atoi(u)
					p.uids = append(p.uids, n)
				}
			case "CapEff":
				p.capEff, _ = strconv.ParseUint(v, 16, 64)
			case "CapPrm":
				p.capPrm, _ = strconv.ParseUint(v, 16, 64)
			case "NoNewPrivs":
				p.noNewPrivs = v
			}
		}
		ps = append(ps, p)
	}
	return ps
}

// Capability bits (linux/capability.h).
const (
	capChown  = 1 << 0
	capKill   = 1 << 5
	capSetgid = 1 << 6
	capSetuid = 1 << 7
)

// childUID runs code in the session that reports the child's uid and gid.
func childUID(t *testing.T, b *Backend, user, sid string) (int, int) {
	t.Helper()
	res := execOK(t, b, shared.ExecuteRequest{Code: "import os\nreturn [os.getuid(), os.geteuid(), os.getgid()]", AllowedImports: []string{"os"}, SessionID: sid, UserID: user})
	var ids []int
	if err := json.Unmarshal(res.Output, &ids); err != nil || len(ids) != 3 {
		t.Fatalf("child ids: %s (%v) %+v", res.Output, err, res)
	}
	if ids[0] != ids[1] {
		t.Fatalf("child uid %d, euid %d", ids[0], ids[1])
	}
	return ids[0], ids[2]
}

// TestRuntimeAndChildOnDifferentUIDs: the process list of a session's
// container shows the runtime on uid 0 with only CHOWN, KILL, SETGID and
// SETUID,
// and every Python process (zygote and children) on another uid with no
// capability; the uid a child reports is not the runtime's.
func TestRuntimeAndChildOnDifferentUIDs(t *testing.T) {
	user := testUser(t)
	b := newBackend(t)
	sid := openSession(t, b, user)
	uid, gid := childUID(t, b, user, sid)
	ps := procsOf(t, containerOf(t, b, sid))
	var runtime *proc
	var pythons []proc
	for i, p := range ps {
		switch {
		case strings.HasPrefix("orqest-agent-runtime", p.comm) && p.comm != "":
			runtime = &ps[i]
		case strings.HasPrefix(p.comm, "python3"):
			pythons = append(pythons, p)
		}
	}
	if runtime == nil || len(pythons) == 0 {
		t.Fatalf("want the runtime and its Python processes in %+v", ps)
	}
	t.Logf("runtime pid %d uids %v CapEff %#x; child uid %d gid %d; %d python processes", runtime.pid, runtime.uids, runtime.capEff, uid, gid, len(pythons))
	if slices.Contains(runtime.uids, uid) {
		t.Errorf("the child's uid %d is one of the runtime's uids %v", uid, runtime.uids)
	}
	if want := uint64(capChown | capKill | capSetgid | capSetuid); runtime.capEff != want || runtime.capPrm != want {
		t.Errorf("runtime CapEff %#x CapPrm %#x, want exactly CHOWN|KILL|SETGID|SETUID (%#x)", runtime.capEff, runtime.capPrm, want)
	}
	if runtime.noNewPrivs != "1" {
		t.Errorf("runtime NoNewPrivs = %q", runtime.noNewPrivs)
	}
	for _, p := range pythons {
		if slices.Contains(p.uids, runtime.uids[0]) || p.uids[0] != uid {
			t.Errorf("python pid %d uids %v, want all %d (not the runtime's %d)", p.pid, p.uids, uid, runtime.uids[0])
		}
		if p.capEff != 0 || p.capPrm != 0 {
			t.Errorf("python pid %d has capabilities: CapEff %#x CapPrm %#x", p.pid, p.capEff, p.capPrm)
		}
	}
}

// attackScript is what code that escaped every Python-level layer would
// try on the library; it prints {attempt: "ALLOWED" | errno name}.
const attackScript = `
import errno, json, os
r = {}
def attempt(name, f):
    try:
        f()
        r[name] = "ALLOWED"
    except OSError as e:
        r[name] = errno.errorcode.get(e.errno, str(e.errno))
attempt("chmod /data 0", lambda: os.chmod("/data", 0))
attempt("open db for writing", lambda: open("/data/orqest-tools.sqlite", "w").close())
attempt("read db", lambda: open("/data/orqest-tools.sqlite", "rb").read(100))
attempt("unlink db", lambda: os.unlink("/data/orqest-tools.sqlite"))
attempt("list /data", lambda: os.listdir("/data"))
attempt("create in /data", lambda: open("/data/planted", "x").close())
attempt("chmod db 0", lambda: os.chmod("/data/orqest-tools.sqlite", 0))
print(json.dumps(r))
`

// inSessionAttack is attackScript as a body run by execute_python (os
// allowed; OSError is not among the curated builtins): each attempt's
// error, or "ALLOWED".
const inSessionAttack = `import os
r = {}
def attempt(name, f):
    try:
        f()
        r[name] = "ALLOWED"
    except Exception as e:
        r[name] = str(e)
attempt("chmod /data 0", lambda: os.chmod("/data", 0))
attempt("open db for writing", lambda: os.close(os.open("/data/orqest-tools.sqlite", os.O_WRONLY)))
attempt("read db", lambda: os.read(os.open("/data/orqest-tools.sqlite", os.O_RDONLY), 100))
attempt("unlink db", lambda: os.unlink("/data/orqest-tools.sqlite"))
attempt("list /data", lambda: os.listdir("/data"))
attempt("create in /data", lambda: os.close(os.open("/data/planted", os.O_CREAT | os.O_EXCL | os.O_WRONLY)))
return r`

// TestUserCodeCannotTouchTheLibrary: first through execute_python with
// every layer in force, then with every Python-level layer and every
// sealing layer out of the way — the attack runs as a plain
// python3 on the children's uid through docker exec, so neither the
// validators, the checker, Landlock nor seccomp stand in its way — chmod,
// write, read, unlink and listing of /data and its database are all
// refused by the uid split alone; the same user's next session still has
// its promoted tool and counts it.
func TestUserCodeCannotTouchTheLibrary(t *testing.T) {
	user := testUser(t)
	b := newLibBackend(t, map[string]any{"policy": "eager"})
	sid := openSession(t, b, user)
	if evs := runTool(t, b, sid, "add", libAdd, `{"a":1,"b":2}`).Events; !slices.Equal(types(evs), []string{toollib.EventPromoted}) {
		t.Fatalf("first call: %+v", evs)
	}
	uid, gid := childUID(t, b, user, sid)

	// Through execute, with every layer in force (os allowed by policy).
	res := execOK(t, b, shared.ExecuteRequest{Code: inSessionAttack, AllowedImports: []string{"os"}, SessionID: sid, UserID: user})
	var inSession map[string]any
	if err := json.Unmarshal(res.Output, &inSession); err != nil || len(inSession) != 6 {
		t.Fatalf("in-session attack: %s (%v) %+v", res.Output, err, res)
	}
	t.Logf("through execute: %v", inSession)
	for attempt, r := range inSession {
		if r == "ALLOWED" {
			t.Errorf("through execute, %s was allowed", attempt)
		}
	}

	// As a plain python3 on the children's uid: the uid alone.
	out, errOut, code := execIn(t, containerOf(t, b, sid), fmt.Sprintf("%d:%d", uid, gid), "python3", "-I", "-c", attackScript)
	if code != 0 {
		t.Fatalf("attack script: exit %d: %s", code, errOut)
	}
	var got map[string]string
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 7 {
		t.Fatalf("attack output %q: %v", out, err)
	}
	t.Logf("as uid %d: %v", uid, got)
	for attempt, res := range got {
		if res != "EACCES" && res != "EPERM" {
			t.Errorf("%s as the children's uid %d: %s, want EACCES or EPERM", attempt, uid, res)
		}
	}
	closeSession(t, b, sid)

	sid2 := openSession(t, b, user)
	defer closeSession(t, b, sid2)
	if names := sessionTools(t, b, sid2); !slices.Contains(names, "add") {
		t.Fatalf("the next session lost the promoted tool: %v", names)
	}
	if evs := runTool(t, b, sid2, "add", libAdd, `{"a":2,"b":2}`).Events; len(evs) != 0 {
		t.Fatalf("the next session's library: %+v", evs)
	}
	lib := listLib(t, b, sid2)
	if len(lib.Tools) != 1 || lib.Tools[0].Status != toollib.StatusPromoted || lib.Tools[0].Successes != 2 {
		t.Fatalf("library after the attack: %+v", lib.Tools)
	}
}

// runOnVolume runs script with /bin/sh in a short-lived container of the
// test image as root with only CHOWN, DAC_OVERRIDE and FOWNER (it plays
// damage done from outside the sandbox), the user's volume at /data, and
// returns its output.
func runOnVolume(t *testing.T, user, script string) string {
	t.Helper()
	dc := requireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cc := &container.Config{Image: testImage(), User: "0:0", Entrypoint: []string{"/bin/sh", "-c", script}, Labels: map[string]string{LabelUser: user}}
	hc := &container.HostConfig{
		NetworkMode: "none",
		CapDrop:     []string{"ALL"},
		CapAdd:      []string{"CHOWN", "DAC_OVERRIDE", "FOWNER"}, // damage from outside, whoever owns /data
		SecurityOpt: []string{"no-new-privileges:true"},
		Mounts:      []mount.Mount{{Type: mount.TypeVolume, Source: VolumeName(user), Target: "/data"}},
	}
	created, err := dc.ContainerCreate(ctx, client.ContainerCreateOptions{Config: cc, HostConfig: hc})
	if err != nil {
		t.Fatalf("helper container: %v", err)
	}
	defer func() {
		_, _ = dc.ContainerRemove(context.Background(), created.ID, client.ContainerRemoveOptions{Force: true})
	}()
	att, err := dc.ContainerAttach(ctx, created.ID, client.ContainerAttachOptions{Stream: true, Stdout: true, Stderr: true})
	if err != nil {
		t.Fatalf("helper attach: %v", err)
	}
	defer att.Close()
	if _, err := dc.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatalf("helper start: %v", err)
	}
	var stdout, stderr bytes.Buffer
	_, _ = stdcopy.StdCopy(&stdout, &stderr, att.Reader)
	wait := dc.ContainerWait(ctx, created.ID, client.ContainerWaitOptions{})
	select {
	case r := <-wait.Result:
		if r.StatusCode != 0 {
			t.Fatalf("helper %q: exit %d: %s%s", script, r.StatusCode, stdout.String(), stderr.String())
		}
	case err := <-wait.Error:
		t.Fatalf("helper wait: %v", err)
	}
	return stdout.String()
}

// TestLibraryCorruptedOnVolumeIsRepaired: garbage written over the
// library between two sessions (by a helper container on the volume);
// the next session still serves execute, reports the repair (the corrupt
// file moved aside to a timestamped name), and counts later calls in the
// fresh library.
func TestLibraryCorruptedOnVolumeIsRepaired(t *testing.T) {
	user := testUser(t)
	b := newLibBackend(t, map[string]any{"policy": "eager"})
	sid := openSession(t, b, user)
	runTool(t, b, sid, "add", libAdd, `{"a":1,"b":2}`)
	closeSession(t, b, sid)
	runOnVolume(t, user, `head -c 8192 /dev/urandom > /data/orqest-tools.sqlite && rm -f /data/orqest-tools.sqlite-wal /data/orqest-tools.sqlite-shm`)

	sid = openSession(t, b, user)
	defer closeSession(t, b, sid)
	resp := runTool(t, b, sid, "mul", "return args['a'] * args['b']", `{"a":2,"b":3}`)
	if string(resp.Result.Output) != "6" {
		t.Fatalf("execute on a corrupted library: %+v", resp.Result)
	}
	if !slices.Equal(types(resp.Events), []string{toollib.EventLibraryRepaired, toollib.EventPromoted}) {
		t.Fatalf("want the repair reported, then the promotion in the fresh library: %+v", resp.Events)
	}
	var p map[string]any
	_ = json.Unmarshal(resp.Events[0].Payload, &p)
	moved, _ := p["moved_to"].(string)
	if !strings.HasPrefix(moved, rtproto.LibraryPath+".corrupt-") {
		t.Fatalf("repair event: %s", resp.Events[0].Payload)
	}
	if ls := runOnVolume(t, user, `ls /data`); !strings.Contains(ls, strings.TrimPrefix(moved, "/data/")) {
		t.Fatalf("the corrupt file is not kept: ls /data = %q", ls)
	}
	if evs := runTool(t, b, sid, "mul", "return args['a'] * args['b']", `{"a":3,"b":3}`).Events; len(evs) != 0 {
		t.Fatalf("a later call: %+v", evs)
	}
	lib := listLib(t, b, sid)
	if len(lib.Tools) != 1 || lib.Tools[0].Name != "mul" || lib.Tools[0].Successes != 2 {
		t.Fatalf("fresh library: %+v", lib.Tools)
	}
}

// TestLibraryOfAnOlderImageIsTakenOver: a volume an older image wrote
// (everything owned by uid 1000, as when runtime and user code shared that
// uid) is taken over by the runtime: the promoted tool is still there, the
// repair is reported, and /data is then the runtime's alone (0:0, 0700).
func TestLibraryOfAnOlderImageIsTakenOver(t *testing.T) {
	user := testUser(t)
	b := newLibBackend(t, map[string]any{"policy": "eager"})
	sid := openSession(t, b, user)
	runTool(t, b, sid, "add", libAdd, `{"a":1,"b":2}`)
	closeSession(t, b, sid)
	runOnVolume(t, user, `chmod 0755 /data && chown -R 1000:1000 /data`)

	sid = openSession(t, b, user)
	defer closeSession(t, b, sid)
	if names := sessionTools(t, b, sid); !slices.Contains(names, "add") {
		t.Fatalf("the promoted tool is gone: %v", names)
	}
	evs := runTool(t, b, sid, "add", libAdd, `{"a":1,"b":2}`).Events
	if !slices.Equal(types(evs), []string{toollib.EventLibraryRepaired}) {
		t.Fatalf("want the take-over reported: %+v", evs)
	}
	var p struct{ Repairs []string }
	_ = json.Unmarshal(evs[0].Payload, &p)
	if len(p.Repairs) == 0 || !strings.Contains(p.Repairs[0], "/data: owner 1000:1000 -> 0:0") {
		t.Fatalf("repairs = %q", p.Repairs)
	}
	if st := strings.TrimSpace(runOnVolume(t, user, `stat -c '%u:%g %a' /data /data/orqest-tools.sqlite`)); st != "0:0 700\n0:0 600" && st != "0:0 700\n0:0 644" {
		t.Fatalf("after the take-over: %q", st)
	}
}
