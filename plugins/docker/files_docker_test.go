package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/orqest/sandbox/shared"
)

// filesBackend is a backend of image with a workspace of workspaceMB.
func filesBackend(t *testing.T, image string, workspaceMB int) *Backend {
	t.Helper()
	return configuredBackend(t, map[string]any{"image": image, "workspace_mb": workspaceMB}, nil)
}

func wantField(t *testing.T, what string, err error, field string) {
	t.Helper()
	var fe *shared.FieldError
	if !errors.Is(err, shared.ErrInvalidArgument) || !errors.As(err, &fe) || fe.Field != field {
		t.Errorf("%s: want a FieldError on %q, got %v", what, field, err)
	}
}

func artifactNamed(as []shared.Artifact, name string) *shared.Artifact {
	for i := range as {
		if as[i].Name == name {
			return &as[i]
		}
	}
	return nil
}

// Against the real engine: an upload read by code, a download of a file
// the code wrote (and the same file as an artifact of the call), the list,
// refused paths, the per-file cap, the artifacts' total cap, the quota
// (ENOSPC as OSError in code, failed_precondition for an upload), and
// nothing left behind (testUser fails on a leftover container).
func TestSessionFiles(t *testing.T) {
	b := filesBackend(t, testImage(), 24)
	user := testUser(t)
	sid := openSession(t, b, user)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	info, err := b.Info(ctx, shared.InfoRequest{})
	if err != nil || !info.Has(shared.CapFiles) {
		t.Fatalf("Info: files capability missing: %v %v", info.Capabilities, err)
	}
	run := func(code string, allowed ...string) shared.ExecutionResult {
		t.Helper()
		r, err := b.Execute(ctx, shared.ExecuteRequest{Code: code, SessionID: sid, UserID: user, AllowedImports: allowed, Timeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return r.Result
	}

	put, err := b.PutFile(ctx, shared.PutFileRequest{SessionID: sid, Path: "data/in.csv", Data: []byte("a,b\n1,2\n3,4\n")})
	if err != nil || put.File.Name != "data/in.csv" || put.File.Size != 12 {
		t.Fatalf("PutFile: %+v %v", put, err)
	}
	r := run("rows = workspace.read_text('data/in.csv').splitlines()[1:]\n" +
		"total = sum(int(x) for row in rows for x in row.split(','))\n" +
		"workspace.write_text('out.txt', 'total=%d' % total)\n" +
		"return total")
	if !r.Success || string(r.Output) != "10" {
		t.Fatalf("code reading the upload: %s %s %s", r.ErrorKind, r.Error, r.Output)
	}
	a := artifactNamed(r.Artifacts, "out.txt")
	if a == nil || string(a.Data) != "total=10" || a.Size != 8 || !strings.HasPrefix(a.MIMEType, "text/plain") || a.Omitted {
		t.Errorf("artifact out.txt: %+v (all: %v)", a, r.Artifacts)
	}
	if artifactNamed(r.Artifacts, "data/in.csv") != nil {
		t.Error("the unchanged upload came back as an artifact")
	}
	got, err := b.GetFile(ctx, shared.GetFileRequest{SessionID: sid, Path: "out.txt"})
	if err != nil || string(got.Data) != "total=10" || got.File.Size != 8 {
		t.Errorf("GetFile out.txt: %+v %v", got, err)
	}
	list, err := b.ListFiles(ctx, shared.ListFilesRequest{SessionID: sid})
	if err != nil || len(list.Files) != 2 || list.Files[0].Name != "data/in.csv" || list.Files[1].Name != "out.txt" {
		t.Errorf("ListFiles: %+v %v", list, err)
	}

	// Refused paths and the per-file cap.
	for _, p := range []string{"../etc/passwd", "/etc/passwd", "a/../../x", ""} {
		_, err := b.PutFile(ctx, shared.PutFileRequest{SessionID: sid, Path: p, Data: []byte("x")})
		wantField(t, "put "+p, err, "path")
	}
	_, err = b.GetFile(ctx, shared.GetFileRequest{SessionID: sid, Path: "../../proc/self/environ"})
	wantField(t, "get traversal", err, "path")
	if _, err := b.GetFile(ctx, shared.GetFileRequest{SessionID: sid, Path: "nope.txt"}); !errors.Is(err, shared.ErrNotFound) {
		t.Errorf("GetFile of a missing file: want ErrNotFound, got %v", err)
	}
	_, err = b.PutFile(ctx, shared.PutFileRequest{SessionID: sid, Path: "big.bin", Data: make([]byte, shared.DefaultMaxFileBytes+1)})
	wantField(t, "put over the cap", err, "data")
	if _, err := b.PutFile(ctx, shared.PutFileRequest{SessionID: "nosuch", Path: "a"}); !errors.Is(err, shared.ErrNotFound) {
		t.Errorf("PutFile to no session: want ErrNotFound, got %v", err)
	}

	// The artifacts' total cap: two 5 MiB files; the second comes without
	// its bytes, and is still there to download.
	r = run("workspace.write_bytes('a.bin', bytes(5 << 20))\nworkspace.write_bytes('b.bin', bytes(5 << 20))\nreturn 1")
	if !r.Success {
		t.Fatalf("writing two files: %s %s", r.ErrorKind, r.Error)
	}
	aa, ab := artifactNamed(r.Artifacts, "a.bin"), artifactNamed(r.Artifacts, "b.bin")
	if aa == nil || ab == nil || aa.Omitted || len(aa.Data) != 5<<20 || !ab.Omitted || ab.Data != nil || ab.Size != 5<<20 {
		t.Fatalf("capped artifacts: a %+v b omitted=%v", aa != nil && !aa.Omitted, ab)
	}
	if g, err := b.GetFile(ctx, shared.GetFileRequest{SessionID: sid, Path: "b.bin"}); err != nil || len(g.Data) != 5<<20 {
		t.Errorf("download of the omitted artifact: %d bytes, %v", len(g.Data), err)
	}

	// The quota: a 24 MB workspace holds 10 MiB; code that writes on gets
	// OSError (ENOSPC), an upload failed_precondition.
	r = run("n = 0\nfor i in range(8):\n    try:\n        workspace.write_bytes('fill%d.bin' % i, bytes(4 << 20))\n        n += 1\n    except Exception as e:\n        return [n, type(e).__name__, str(e)]\nreturn [n]")
	if !r.Success || !strings.Contains(string(r.Output), "No space left") {
		t.Errorf("filling the workspace: %s %s %s", r.ErrorKind, r.Error, r.Output)
	}
	if _, err := b.PutFile(ctx, shared.PutFileRequest{SessionID: sid, Path: "more.bin", Data: make([]byte, 6<<20)}); !errors.Is(err, shared.ErrFailedPrecondition) {
		t.Errorf("upload into a full workspace: want ErrFailedPrecondition, got %v", err)
	}
	if _, err := b.Close(ctx, shared.CloseRequest{SessionID: sid}); err != nil {
		t.Error(err)
	}
}

// The writing the workspace allows must stop at it with the Python layers
// out of the way (os allowed: the audit hook checks no OS event): the
// agents' directory, the user's volume /data, the root filesystem, a
// symbolic link out of the workspace and a FIFO in it are all refused by
// the kernel, and so are a directory made, a file removed or renamed
// outside it, the tool library removed, the workspace itself renamed or
// removed; a write, mkdir, rename, unlink and rmdir in the workspace go
// through.
func TestWorkspaceWallInContainer(t *testing.T) {
	b := filesBackend(t, testImage(), 16)
	user := testUser(t)
	sid := openSession(t, b, user)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code := `import os
out = {}
def attempt(name, f):
    try:
        f()
        out[name] = 'done'
    except Exception as e:
        out[name] = type(e).__name__
ws = workspace.path()
attempt('agents', lambda: os.close(os.open('/workspace/agents/x', os.O_WRONLY | os.O_CREAT, 0o600)))
attempt('data', lambda: os.close(os.open('/data/x', os.O_WRONLY | os.O_CREAT, 0o600)))
attempt('tmp', lambda: os.close(os.open('/tmp/x', os.O_WRONLY | os.O_CREAT, 0o600)))
attempt('symlink', lambda: os.symlink('/data', ws + '/link'))
attempt('fifo', lambda: os.mkfifo(ws + '/fifo'))
attempt('inside', lambda: os.close(os.open(ws + '/ok', os.O_WRONLY | os.O_CREAT, 0o600)))
attempt('mkdir_agents', lambda: os.mkdir('/workspace/agents/d'))
attempt('mkdir_tmp', lambda: os.mkdir('/tmp/d'))
attempt('unlink_library', lambda: os.unlink('/data/orqest-tools.sqlite'))
attempt('rename_out', lambda: os.rename(ws + '/ok', '/workspace/agents/ok'))
attempt('rename_ws', lambda: os.rename(ws, '/workspace/files2'))
attempt('rmdir_ws', lambda: os.rmdir(ws))
attempt('rename_in', lambda: os.rename('/workspace/agents', ws + '/agents'))
attempt('mkdir_inside', lambda: os.mkdir(ws + '/d'))
attempt('rename_inside', lambda: os.rename(ws + '/ok', ws + '/d/ok'))
attempt('unlink_inside', lambda: os.unlink(ws + '/d/ok'))
attempt('rmdir_inside', lambda: os.rmdir(ws + '/d'))
return [ws, out]`
	r, err := b.Execute(ctx, shared.ExecuteRequest{Code: code, SessionID: sid, UserID: user, AllowedImports: []string{"os"}, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var got []json.RawMessage
	if !r.Result.Success || json.Unmarshal(r.Result.Output, &got) != nil || len(got) != 2 {
		t.Fatalf("%s %s %s", r.Result.ErrorKind, r.Result.Error, r.Result.Output)
	}
	var out map[string]string
	_ = json.Unmarshal(got[1], &out)
	for _, k := range []string{"agents", "data", "tmp", "symlink", "fifo", "mkdir_agents", "mkdir_tmp", "unlink_library",
		"rename_out", "rename_ws", "rmdir_ws", "rename_in"} {
		if out[k] == "done" || out[k] == "" {
			t.Errorf("%s: %q, want refused", k, out[k])
		}
	}
	for _, k := range []string{"inside", "mkdir_inside", "rename_inside", "unlink_inside", "rmdir_inside"} {
		if out[k] != "done" {
			t.Errorf("%s: %q, want done", k, out[k])
		}
	}
	if string(got[0]) != `"/workspace/files"` {
		t.Errorf("workspace path %s", got[0])
	}
	if _, err := b.Close(ctx, shared.CloseRequest{SessionID: sid}); err != nil {
		t.Error(err)
	}
}

// A matplotlib chart the code leaves open comes back as a PNG artifact
// (data-science image; ORQEST_DOCKER_IMAGE_DS overrides it).
func TestChartArtifact(t *testing.T) {
	dc := requireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := dc.ImageInspect(ctx, dataScienceImage()); err != nil {
		if os.Getenv("ORQEST_REQUIRE_DOCKER") == "1" {
			t.Fatalf("ORQEST_REQUIRE_DOCKER=1 and the data-science image %s is missing: %v", dataScienceImage(), err)
		}
		t.Skipf("SKIPPING: the data-science image %s is missing: %v", dataScienceImage(), err)
	}
	b := filesBackend(t, dataScienceImage(), 64)
	user := testUser(t)
	sid := openSession(t, b, user)
	code := "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [4, 1, 9])\nplt.title('t')\nreturn 'drawn'"
	r, err := b.Execute(ctx, shared.ExecuteRequest{Code: code, SessionID: sid, UserID: user, AllowedImports: []string{"matplotlib", "matplotlib.pyplot"}, MemoryMB: 512, Timeout: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Result.Success {
		t.Fatalf("%s %s (stderr %s)", r.Result.ErrorKind, r.Result.Error, r.Result.Stderr)
	}
	a := artifactNamed(r.Result.Artifacts, "figure-1.png")
	if a == nil {
		t.Fatalf("no figure-1.png artifact: %+v (stderr %s)", r.Result.Artifacts, r.Result.Stderr)
	}
	if a.MIMEType != "image/png" || a.Omitted || int64(len(a.Data)) != a.Size || !bytes.HasPrefix(a.Data, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("figure-1.png: mime %q size %d omitted %v header %q", a.MIMEType, a.Size, a.Omitted, a.Data[:min(8, len(a.Data))])
	}
	// The figure was closed: the next call leaves no new chart.
	r, err = b.Execute(ctx, shared.ExecuteRequest{Code: "import matplotlib.pyplot as plt\nreturn len(plt.get_fignums())", SessionID: sid, UserID: user, AllowedImports: []string{"matplotlib", "matplotlib.pyplot"}, MemoryMB: 512, Timeout: 90 * time.Second})
	if err != nil || !r.Result.Success || len(r.Result.Artifacts) != 0 {
		t.Errorf("second call: %+v %v", r.Result, err)
	}
	if _, err := b.Close(ctx, shared.CloseRequest{SessionID: sid}); err != nil {
		t.Error(err)
	}
}

// With every Python layer in force, code reorganises its workspace through
// the builtin: it makes directories, moves an upload into one, removes a
// scratch file and an empty directory; the runtime then lists, serves and
// accepts uploads into what the code made.
func TestWorkspaceChangesInContainer(t *testing.T) {
	b := filesBackend(t, testImage(), 16)
	user := testUser(t)
	sid := openSession(t, b, user)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := b.PutFile(ctx, shared.PutFileRequest{SessionID: sid, Path: "in.csv", Data: []byte("a\n1\n")}); err != nil {
		t.Fatal(err)
	}
	code := `workspace.mkdir('archive/2026')
workspace.rename('in.csv', 'archive/2026/in.csv')
workspace.write_text('scratch.txt', 'x')
workspace.remove('scratch.txt')
workspace.mkdir('empty')
workspace.rmdir('empty')
return workspace.list()`
	r, err := b.Execute(ctx, shared.ExecuteRequest{Code: code, SessionID: sid, UserID: user, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Result.Success || string(r.Result.Output) != `["archive/2026/in.csv"]` {
		t.Fatalf("%s %s %s", r.Result.ErrorKind, r.Result.Error, r.Result.Output)
	}
	if g, err := b.GetFile(ctx, shared.GetFileRequest{SessionID: sid, Path: "archive/2026/in.csv"}); err != nil || string(g.Data) != "a\n1\n" {
		t.Errorf("GetFile of the moved upload: %q %v", g.Data, err)
	}
	if _, err := b.PutFile(ctx, shared.PutFileRequest{SessionID: sid, Path: "archive/2026/more.csv", Data: []byte("b")}); err != nil {
		t.Errorf("PutFile into a directory the code made: %v", err)
	}
	list, err := b.ListFiles(ctx, shared.ListFilesRequest{SessionID: sid})
	if err != nil || len(list.Files) != 2 {
		t.Errorf("ListFiles: %+v %v", list, err)
	}
	if _, err := b.Close(ctx, shared.CloseRequest{SessionID: sid}); err != nil {
		t.Error(err)
	}
}
