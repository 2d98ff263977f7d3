package runner_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/orqest/sandbox/runner"
)

// openDir returns a fresh directory anyone may write (0777), so that only
// the seal (Landlock) can stop a write into it.
func openDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	// The test's temporary root is 0700: let the sandbox's uid through.
	if err := os.Chmod(filepath.Dir(d), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o777); err != nil {
		t.Fatal(err)
	}
	return d
}

func landlockInForce(t *testing.T) bool {
	t.Helper()
	resp, _, _ := run(t, runner.Request{Op: runner.OpProbe, Seal: &runner.Seal{}})
	var pr runner.ProbeResult
	if !resp.Success || json.Unmarshal(resp.Output, &pr) != nil {
		t.Fatalf("probe: %+v", resp)
	}
	return slices.Contains(pr.Layers, runner.LayerLandlockFS)
}

// The builtin `workspace` reads and writes the request's Workspace, which
// the seal's WritePaths lets the sandbox change; names that are not clean
// relative paths are refused before any file is touched.
func TestWorkspaceReadWrite(t *testing.T) {
	ws := openDir(t)
	if err := os.WriteFile(filepath.Join(ws, "in.csv"), []byte("a,b\n1,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, "out"), 0o777); err != nil { // the runtime makes directories, the body does not
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(ws, "out"), 0o777); err != nil {
		t.Fatal(err)
	}
	code := `
rows = workspace.read_text('in.csv').splitlines()
workspace.write_text('out/sum.txt', str(sum(int(x) for x in rows[1].split(','))))
workspace.write_bytes('raw.bin', b'\x00\x01')
bad = []
for name in ['../escape', '/etc/passwd', 'a/./b', '']:
    try:
        workspace.write_text(name, 'x')
    except ValueError:
        bad.append(name)
return [workspace.list(), bad, workspace.path('x.csv')]
`
	resp, _, stderr := run(t, runner.Request{Code: code, Workspace: ws, Seal: &runner.Seal{WritePaths: []string{ws}}})
	if !resp.Success {
		t.Fatalf("%s: %s (stderr %s)", resp.ErrorKind, resp.Error, stderr)
	}
	want := `[["in.csv","out/sum.txt","raw.bin"],["../escape","/etc/passwd","a/./b",""],"` + ws + `/x.csv"]`
	var got any
	_ = json.Unmarshal(resp.Output, &got)
	g, _ := json.Marshal(got)
	if string(g) != want {
		t.Errorf("got %s, want %s", g, want)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "out", "sum.txt")); err != nil || string(b) != "3" {
		t.Errorf("out/sum.txt: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(ws), "escape")); err == nil {
		t.Error("../escape was written")
	}
}

// Without a workspace the builtin is absent and open() of anything but the
// library stays refused by the audit hook.
func TestNoWorkspaceNoWriting(t *testing.T) {
	resp, _, _ := run(t, runner.Request{Code: "return workspace.list()", Seal: &runner.Seal{}})
	if resp.Success || !strings.Contains(resp.Error, "NameError") {
		t.Errorf("workspace without a Workspace: %+v", resp)
	}
}

// The attacks the write allowance must still stop, with the Python layers
// out of the way (os allowed: the audit hook checks no OS event and no
// open), so that only the kernel's wall (Landlock: WritePaths and nothing
// else, no symlink creation) stands: writing outside the workspace into a
// directory anyone may write, a symbolic link out of the workspace, and a
// hard link of a file outside into it (seccomp refuses links, FIFOs and
// directories before Landlock would).
func TestWorkspaceWallWithoutPythonLayers(t *testing.T) {
	if !landlockInForce(t) {
		t.Skip("Landlock is not in force here; the kernel's wall cannot be tested")
	}
	ws, outside := openDir(t), openDir(t)
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("s"), 0o666); err != nil {
		t.Fatal(err)
	}
	code := `
import os
out = {}
def attempt(name, f):
    try:
        f()
        out[name] = 'done'
    except Exception as e:
        out[name] = 'refused: ' + type(e).__name__
attempt('write_outside', lambda: os.close(os.open(args['outside'] + '/x', os.O_WRONLY | os.O_CREAT, 0o644)))
attempt('symlink_out', lambda: os.symlink(args['outside'], args['ws'] + '/link'))
attempt('hardlink_in', lambda: os.link(args['outside'] + '/secret', args['ws'] + '/secret'))
attempt('write_inside', lambda: os.close(os.open(args['ws'] + '/ok', os.O_WRONLY | os.O_CREAT, 0o644)))
attempt('fifo_inside', lambda: os.mkfifo(args['ws'] + '/fifo'))
attempt('mkdir_inside', lambda: os.mkdir(args['ws'] + '/d'))
return out
`
	argsJSON, _ := json.Marshal(map[string]string{"ws": ws, "outside": outside})
	resp, _, stderr := run(t, runner.Request{Code: code, Args: argsJSON, AllowedImports: []string{"os"}, Workspace: ws,
		Seal: &runner.Seal{WritePaths: []string{ws}}})
	if !resp.Success {
		t.Fatalf("%s: %s (stderr %s)", resp.ErrorKind, resp.Error, stderr)
	}
	var got map[string]string
	if err := json.Unmarshal(resp.Output, &got); err != nil {
		t.Fatal(err)
	}
	const denied = "refused: PermissionError"
	want := map[string]string{"write_outside": denied, "symlink_out": denied, "hardlink_in": denied, "write_inside": "done", "fifo_inside": denied, "mkdir_inside": denied}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s, want %s", k, got[k], v)
		}
	}
	if _, err := os.Lstat(filepath.Join(outside, "x")); err == nil {
		t.Error("a file was created outside the workspace")
	}
	if _, err := os.Lstat(filepath.Join(ws, "link")); err == nil {
		t.Error("a symbolic link was created in the workspace")
	}
}

// A name that normalises out of the workspace is refused by the helper
// before anything is opened.
func TestWorkspaceNamesAreClean(t *testing.T) {
	ws := openDir(t)
	code := `
out = []
for name in ['a/../../x', '..', 'a\\..\\b']:
    try:
        workspace.write_text(name, 'x')
        out.append('done')
    except ValueError:
        out.append('refused')
return out
`
	resp, _, stderr := run(t, runner.Request{Code: code, Workspace: ws, Seal: &runner.Seal{WritePaths: []string{ws}}})
	if !resp.Success || strings.ReplaceAll(string(resp.Output), " ", "") != `["refused","refused","refused"]` {
		t.Fatalf("%+v (stderr %s)", resp, stderr)
	}
}

// The program without its comment lines is the same code: Python parses
// both to the same syntax tree (docstrings included).
func TestProgramSameCodeWithoutComments(t *testing.T) {
	if _, err := os.Stat(python); err != nil {
		t.Skipf("%s not available: %v", python, err)
	}
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.py"), filepath.Join(dir, "b.py")
	if err := os.WriteFile(a, []byte(runner.ProgramWithComments()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, []byte(runner.Program()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(python, "-I", "-S", "-c",
		"import ast,sys\nd=[ast.dump(ast.parse(open(p).read())) for p in sys.argv[1:]]\nprint(d[0]==d[1])", a, b).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "True" {
		t.Fatalf("the stripped program differs: %s %v", out, err)
	}
	if len(runner.Program()) >= len(runner.ProgramWithComments()) {
		t.Error("nothing was stripped")
	}
}

// A file the body writes is bounded by the seal's MaxFileBytes
// (RLIMIT_FSIZE): past it the write fails with EFBIG, which the body sees
// as an OSError.
func TestWorkspaceFileCap(t *testing.T) {
	ws := openDir(t)
	code := `
try:
    workspace.write_bytes('big.bin', bytes(5000))
    return 'written'
except Exception as e:
    return type(e).__name__ + ': ' + str(e)
`
	resp, _, stderr := run(t, runner.Request{Code: code, Workspace: ws, Seal: &runner.Seal{WritePaths: []string{ws}, MaxFileBytes: 4096}})
	if !resp.Success || !strings.Contains(string(resp.Output), "File too large") {
		t.Fatalf("%s %s %s (stderr %s)", resp.Output, resp.ErrorKind, resp.Error, stderr)
	}
	if st, err := os.Stat(filepath.Join(ws, "big.bin")); err != nil || st.Size() > 4096 {
		t.Errorf("big.bin: %v %v", st, err)
	}
}
