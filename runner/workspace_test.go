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
// the seal's WritePaths lets the sandbox change, and makes, renames and
// removes files and directories in it, with every Python layer in force
// (no os import); names that are not clean relative paths are refused
// before any file is touched.
func TestWorkspaceReadWrite(t *testing.T) {
	ws := openDir(t)
	if err := os.WriteFile(filepath.Join(ws, "in.csv"), []byte("a,b\n1,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code := `
rows = workspace.read_text('in.csv').splitlines()
workspace.mkdir('out/deep/er')
workspace.write_text('out/sum.txt', str(sum(int(x) for x in rows[1].split(','))))
workspace.write_bytes('raw.bin', b'\x00\x01')
workspace.write_text('tmp.txt', 'draft')
workspace.rename('tmp.txt', 'out/deep/er/final.txt')
workspace.write_text('gone.txt', 'x')
workspace.remove('gone.txt')
workspace.mkdir('empty')
workspace.rmdir('empty')
bad = []
for name in ['../escape', '/etc/passwd', 'a/./b', '']:
    try:
        workspace.write_text(name, 'x')
    except ValueError:
        bad.append(name)
for f in [lambda: workspace.rename('raw.bin', '../raw.bin'), lambda: workspace.remove('../x'),
          lambda: workspace.mkdir('/tmp/x'), lambda: workspace.rmdir('..')]:
    try:
        f()
    except ValueError:
        bad.append('refused')
return [workspace.list(), bad, workspace.path('x.csv')]
`
	resp, _, stderr := run(t, runner.Request{Code: code, Workspace: ws, Seal: &runner.Seal{WritePaths: []string{ws}}})
	if !resp.Success {
		t.Fatalf("%s: %s (stderr %s)", resp.ErrorKind, resp.Error, stderr)
	}
	want := `[["in.csv","out/deep/er/final.txt","out/sum.txt","raw.bin"],["../escape","/etc/passwd","a/./b","","refused","refused","refused","refused"],"` + ws + `/x.csv"]`
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
// else, no symlink creation) stands: writing, making a directory, removing
// a file or a directory, renaming into, out of or across the workspace's
// edge, in directories anyone may write; the workspace itself removed or
// renamed; a symbolic link out of the workspace, made by the code or
// found there (the runtime's bug, an extracted archive) and used to reach
// outside; a hard link of a file outside into it (seccomp refuses links
// and FIFOs before Landlock would). And the benign changes inside it:
// mkdir, rename across its directories, unlink, rmdir.
func TestWorkspaceWallWithoutPythonLayers(t *testing.T) {
	if !landlockInForce(t) {
		t.Skip("Landlock is not in force here; the kernel's wall cannot be tested")
	}
	ws, outside := openDir(t), openDir(t)
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("s"), 0o666); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(outside, "empty"), filepath.Join(ws, "sub")} {
		if err := os.Mkdir(d, 0o777); err != nil {
			t.Fatal(err)
		}
		os.Chmod(d, 0o777)
	}
	// A symbolic link in the workspace that points outside, planted by
	// root: the code may remove it but not go through it.
	if err := os.Symlink(outside, filepath.Join(ws, "planted")); err != nil {
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
attempt('mkdir_outside', lambda: os.mkdir(args['outside'] + '/d'))
attempt('unlink_outside', lambda: os.unlink(args['outside'] + '/secret'))
attempt('rmdir_outside', lambda: os.rmdir(args['outside'] + '/empty'))
attempt('rename_in', lambda: os.rename(args['outside'] + '/secret', args['ws'] + '/stolen'))
attempt('rename_out', lambda: os.rename(args['ws'] + '/ok', args['outside'] + '/dropped'))
attempt('rename_ws', lambda: os.rename(args['ws'], args['outside'] + '/ws'))
attempt('rmdir_ws', lambda: os.rmdir(args['ws']))
attempt('through_planted_unlink', lambda: os.unlink(args['ws'] + '/planted/secret'))
attempt('through_planted_mkdir', lambda: os.mkdir(args['ws'] + '/planted/d2'))
attempt('through_planted_rename', lambda: os.rename(args['ws'] + '/ok', args['ws'] + '/planted/dropped'))
attempt('move_link', lambda: os.rename(args['ws'] + '/planted', args['ws'] + '/d/moved-link'))
attempt('rename_across', lambda: os.rename(args['ws'] + '/ok', args['ws'] + '/d/ok2'))
attempt('replace_inside', lambda: os.replace(args['ws'] + '/d/ok2', args['ws'] + '/sub/ok3'))
attempt('unlink_inside', lambda: os.unlink(args['ws'] + '/sub/ok3'))
attempt('rmdir_inside', lambda: os.rmdir(args['ws'] + '/sub'))
attempt('unlink_planted', lambda: os.unlink(args['ws'] + '/planted'))
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
	// Moving a symbolic link is making one where it lands (MAKE_SYM, not
	// granted); rmdir of the (non-empty) workspace may fail either way.
	want := map[string]string{"write_outside": denied, "symlink_out": denied, "hardlink_in": denied, "write_inside": "done",
		"fifo_inside": denied, "mkdir_inside": "done", "mkdir_outside": denied, "unlink_outside": denied,
		"rmdir_outside": denied, "rename_in": denied, "rename_out": denied, "rename_ws": denied,
		"rmdir_ws": "refused: ", "through_planted_unlink": denied, "through_planted_mkdir": denied,
		"through_planted_rename": denied, "move_link": denied, "rename_across": "done",
		"replace_inside": "done", "unlink_inside": "done", "rmdir_inside": "done", "unlink_planted": "done"}
	for k, v := range want {
		if !strings.HasPrefix(got[k], v) {
			t.Errorf("%s: %q, want %s", k, got[k], v)
		}
	}
	if _, err := os.Stat(ws); err != nil {
		t.Errorf("the workspace is gone: %v", err)
	}
	for _, p := range []string{secret, filepath.Join(outside, "empty")} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s outside the workspace is gone: %v", p, err)
		}
	}
	for _, p := range []string{filepath.Join(outside, "d"), filepath.Join(outside, "d2"), filepath.Join(outside, "dropped"), filepath.Join(outside, "ws"), filepath.Join(ws, "stolen")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s exists", p)
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

// Without Landlock the seal does not widen seccomp for the workspace:
// the plain allowlist refuses mkdir, unlink and rename everywhere, in the
// workspace and in a directory anyone may write outside it, so nothing
// but the kernel's wall can grant them.
func TestWorkspaceChangesNeedLandlock(t *testing.T) {
	ws, outside := openDir(t), openDir(t)
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("v"), 0o666); err != nil {
		t.Fatal(err)
	}
	code := `
import os
out = {}
for name, f in [('mkdir', lambda: os.mkdir(args['ws'] + '/d')),
                ('unlink_outside', lambda: os.unlink(args['outside'] + '/victim')),
                ('rename_outside', lambda: os.rename(args['outside'] + '/victim', args['outside'] + '/v2'))]:
    try:
        f()
        out[name] = 'done'
    except Exception as e:
        out[name] = 'refused: ' + type(e).__name__
return out
`
	argsJSON, _ := json.Marshal(map[string]string{"ws": ws, "outside": outside})
	resp, _, stderr := run(t, runner.Request{Code: code, Args: argsJSON, AllowedImports: []string{"os"}, Workspace: ws,
		Seal: &runner.Seal{WritePaths: []string{ws}, Disable: []string{runner.LayerLandlockFS}}})
	if !resp.Success {
		t.Fatalf("%s: %s (stderr %s)", resp.ErrorKind, resp.Error, stderr)
	}
	var got map[string]string
	if err := json.Unmarshal(resp.Output, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"mkdir", "unlink_outside", "rename_outside"} {
		if got[k] != "refused: PermissionError" {
			t.Errorf("%s: %q, want refused: PermissionError", k, got[k])
		}
	}
	if _, err := os.Stat(victim); err != nil {
		t.Errorf("the file outside is gone: %v", err)
	}
}
