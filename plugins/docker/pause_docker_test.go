package docker

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orqest/sandbox/internal/session"
	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
)

// pauseBackend is a backend on image whose paused sessions go to dir, with
// the policy's allowed imports prepared and stateful sessions.
func pauseBackend(t *testing.T, image, dir string, allowed []string) *Backend {
	t.Helper()
	if image == dataScienceImage() {
		return dsBackend(t, 512, allowed, true, map[string]any{"paused_dir": dir})
	}
	b := configuredBackend(t, map[string]any{"image": image, "paused_dir": dir}, nil)
	return b
}

// statefulRun runs code statefully in session sid of b.
func statefulRun(t *testing.T, b *Backend, sid, code string, allowed ...string) shared.ExecutionResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp, err := b.Execute(ctx, shared.ExecuteRequest{SessionID: sid, Code: code, AllowedImports: allowed, Stateful: true, Timeout: 60 * time.Second})
	if err != nil {
		t.Fatalf("Execute %q: %v", code, err)
	}
	return resp.Result
}

// pausedEntries lists dir's entries but the key.
func pausedEntries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.Name() != session.PausedKeyFile {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestPauseResumeDataFrame on the real engine and the data-science image:
// a session's plain globals (an int, a dict, a DataFrame) survive a pause
// that removes its container and a plugin restart (a new backend on the
// same paused_dir resumes it by id); a function and a module are listed
// as not kept; nothing of the session runs while it is paused; Close
// leaves no container and no saved state.
func TestPauseResumeDataFrame(t *testing.T) {
	user := testUser(t)
	dc := requireDocker(t)
	dir := t.TempDir()
	b := pauseBackend(t, dataScienceImage(), dir, dsAllowed)
	sid := openSession(t, b, user)
	res := statefulRun(t, b, sid, "import pandas as pd\nx = 41\nd = {'a': [1, 2.5], 'b': ('c', None)}\ndf = pd.DataFrame({'k': ['a', 'b', 'a'], 'v': [1, 2, 3]})\ndef f():\n    return 1\nreturn x", dsAllowed...)
	if !res.Success {
		t.Fatalf("define: %+v", res)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	pr, err := b.Pause(ctx, shared.PauseRequest{SessionID: sid})
	if err != nil {
		t.Fatalf("Pause: %v", err)
	}
	t.Logf("pause: %v, %d bytes", time.Since(start).Round(time.Millisecond), pr.Bytes)
	if pr.Memory || !slices.Equal(pr.Kept, []string{"default/d", "default/df", "default/x"}) || !slices.Contains(pr.NotKept, "default/f") || !slices.Contains(pr.NotKept, "default/pd") {
		t.Errorf("pause response: %+v", pr)
	}
	if ids := containersOf(t, dc, LabelSession+"="+sid); len(ids) != 0 {
		t.Errorf("the paused session still has containers: %v", ids)
	}
	if _, err := b.Execute(ctx, shared.ExecuteRequest{SessionID: sid, Code: "return 1"}); !errors.Is(err, shared.ErrSessionPaused) {
		t.Errorf("a call on the paused session: %v, want ErrSessionPaused", err)
	}
	if _, err := b.Pause(ctx, shared.PauseRequest{SessionID: sid}); !errors.Is(err, shared.ErrSessionPaused) {
		t.Errorf("a second pause: %v, want ErrSessionPaused", err)
	}

	// A plugin that restarted resumes it from paused_dir.
	b2 := pauseBackend(t, dataScienceImage(), dir, dsAllowed)
	start = time.Now()
	rr, err := b2.Resume(ctx, shared.ResumeRequest{SessionID: sid})
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	t.Logf("resume: %v", time.Since(start).Round(time.Millisecond))
	if rr.UserID != user || rr.Memory || !rr.StateLost || !slices.Equal(rr.Kept, pr.Kept) || !slices.Contains(rr.NotKept, "default/f") {
		t.Errorf("resume response: %+v", rr)
	}
	if ids := containersOf(t, dc, LabelSession+"="+sid); len(ids) != 1 {
		t.Errorf("the resumed session has containers %v, want one", ids)
	}
	res = statefulRun(t, b2, sid, "return [x, d['a'], list(d['b']), df.groupby('k')['v'].sum().to_dict(), str(df['v'].dtype)]", dsAllowed...)
	if !res.Success || string(res.Output) != `[41,[1,2.5],["c",null],{"a":4,"b":2},"int64"]` {
		t.Errorf("after resume: %+v", res)
	}
	if res := statefulRun(t, b2, sid, "return f()", dsAllowed...); !nameError(res, "f") {
		t.Errorf("the function came back: %+v", res)
	}
	if _, err := b2.Close(ctx, shared.CloseRequest{SessionID: sid}); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if ids := containersOf(t, dc, LabelSession+"="+sid); len(ids) != 0 {
		t.Errorf("containers left after Close: %v", ids)
	}
	if left := pausedEntries(t, dir); len(left) != 0 {
		t.Errorf("paused_dir holds %v after the resumed session closed", left)
	}
}

// TestPauseTamperedRefused: a saved state changed after the pause, or
// another session's signed state put in its place, is refused before any
// container starts, with an error that says so; the session can still be
// closed, which removes it. A pause that cannot write its state leaves
// the session running with its globals, and no temporary files.
func TestPauseTamperedRefused(t *testing.T) {
	user := testUser(t)
	dc := requireDocker(t)
	dir := t.TempDir()
	b := pauseBackend(t, testImage(), dir, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var sids []string
	for i := range 2 {
		sid := openSession(t, b, user)
		if res := statefulRun(t, b, sid, "x = "+itoa(i+1)+"\nreturn x"); !res.Success {
			t.Fatalf("define: %+v", res)
		}
		if _, err := b.Pause(ctx, shared.PauseRequest{SessionID: sid}); err != nil {
			t.Fatalf("Pause: %v", err)
		}
		sids = append(sids, sid)
	}
	a, c := sids[0], sids[1]
	state := filepath.Join(dir, a, session.PausedStateFile)
	data, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	// x = 1 made x = 7: still well-formed, but not what was signed.
	forged := strings.Replace(string(data), `"x":["i","1"]`, `"x":["i","7"]`, 1)
	if forged == string(data) {
		t.Fatalf("the saved state does not hold x as expected: %s", data)
	}
	if err := os.WriteFile(state, []byte(forged), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = b.Resume(ctx, shared.ResumeRequest{SessionID: a})
	if !errors.Is(err, shared.ErrPermissionDenied) || !strings.Contains(err.Error(), "signature") {
		t.Errorf("resume of a tampered state: %v, want ErrPermissionDenied naming the signature", err)
	}
	// Session c's state and signature, copied over a's: bound to c's id.
	for _, f := range []string{session.PausedStateFile, session.PausedSigFile} {
		raw, err := os.ReadFile(filepath.Join(dir, c, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, a, f), raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Resume(ctx, shared.ResumeRequest{SessionID: a}); !errors.Is(err, shared.ErrPermissionDenied) {
		t.Errorf("resume of another session's state: %v, want ErrPermissionDenied", err)
	}
	if ids := containersOf(t, dc, LabelSession+"="+a); len(ids) != 0 {
		t.Errorf("a refused resume started containers: %v", ids)
	}
	for _, sid := range sids {
		if _, err := b.Close(ctx, shared.CloseRequest{SessionID: sid}); err != nil {
			t.Errorf("Close %s: %v", sid, err)
		}
	}
	if left := pausedEntries(t, dir); len(left) != 0 {
		t.Errorf("paused_dir holds %v after Close", left)
	}

	// paused_dir is a file: the pause fails and the session runs on.
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	bad := pauseBackend(t, testImage(), notDir, nil)
	sid := openSession(t, bad, user)
	if res := statefulRun(t, bad, sid, "x = 41\nreturn x"); !res.Success {
		t.Fatalf("define: %+v", res)
	}
	if _, err := bad.Pause(ctx, shared.PauseRequest{SessionID: sid}); err == nil {
		t.Fatal("a pause into a file succeeded")
	}
	if res := statefulRun(t, bad, sid, "return x"); !res.Success || string(res.Output) != "41" || res.StateLost {
		t.Errorf("after a failed pause: %+v", res)
	}
	if _, err := bad.Close(ctx, shared.CloseRequest{SessionID: sid}); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// TestPauseMidCallRefused: a session with a call in flight is not paused
// (ErrSessionBusy) and its call ends as it would have; once it has ended
// the pause goes through.
func TestPauseMidCallRefused(t *testing.T) {
	user := testUser(t)
	dir := t.TempDir()
	b := pauseBackend(t, testImage(), dir, nil)
	sid := openSession(t, b, user)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := make(chan shared.ExecutionResult, 1)
	go func() {
		resp, err := b.Execute(ctx, shared.ExecuteRequest{SessionID: sid, Code: "x = 0\nfor i in range(30000000):\n    x += 1\nreturn x", Stateful: true, Timeout: 60 * time.Second})
		if err != nil {
			t.Errorf("the call: %v", err)
		}
		done <- resp.Result
	}()
	var err error
	for i := 0; i < 200; i++ {
		time.Sleep(20 * time.Millisecond)
		if _, err = b.Pause(ctx, shared.PauseRequest{SessionID: sid}); errors.Is(err, shared.ErrSessionBusy) {
			break
		}
	}
	if !errors.Is(err, shared.ErrSessionBusy) {
		t.Fatalf("Pause mid-call: %v, want ErrSessionBusy", err)
	}
	if res := <-done; !res.Success || string(res.Output) != "30000000" {
		t.Errorf("the call a pause was refused during: %+v", res)
	}
	if left := pausedEntries(t, dir); len(left) != 0 {
		t.Errorf("a refused pause wrote %v", left)
	}
	if _, err := b.Pause(ctx, shared.PauseRequest{SessionID: sid}); err != nil {
		t.Fatalf("Pause after the call: %v", err)
	}
	if _, err := b.Close(ctx, shared.CloseRequest{SessionID: sid}); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// TestKeepEncodingDataScience runs the saved-globals encoding's check
// (runner/testdata/keepcheck.py) in the data-science image, where its
// numpy and pandas cases run: arrays and frames of plain dtypes round
// trip; object, structured and subclassed arrays, categorical,
// multi-indexed and tz-aware frames are refused; mutated nodes never load
// as anything else.
func TestKeepEncodingDataScience(t *testing.T) {
	dsBackend(t, 512, dsAllowed, false, nil) // skips, or fails, without the image
	tmp := t.TempDir()
	check, err := os.ReadFile("../../runner/testdata/keepcheck.py")
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"keep.py": []byte(runner.KeepProgram()), "check.py": check} {
		if err := os.WriteFile(filepath.Join(tmp, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("docker", "run", "--rm", "--network", "none", "--read-only", "-v", tmp+":/check:ro",
		"--entrypoint", "python3", dataScienceImage(), "-I", "/check/check.py", "/check/keep.py", "3", "1000").CombinedOutput()
	if err != nil {
		t.Fatalf("keepcheck in %s: %v\n%s", dataScienceImage(), err, out)
	}
	if !strings.HasPrefix(string(out), "ok ") || !strings.Contains(string(out), "numpy pandas") {
		t.Fatalf("keepcheck did not run its numpy and pandas cases: %s", out)
	}
	t.Logf("%s", out)
}

// TestPauseResumeWorkspace on the runtime image: the session workspace's
// files (on the container's tmpfs) and a stateful global come back after
// a pause; a resume brings the session back under the same backend too.
func TestPauseResumeWorkspace(t *testing.T) {
	user := testUser(t)
	dc := requireDocker(t)
	dir := t.TempDir()
	b := pauseBackend(t, testImage(), dir, nil)
	sid := openSession(t, b, user)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := b.PutFile(ctx, shared.PutFileRequest{SessionID: sid, Path: "notes/a.txt", Data: []byte("kept\n")}); err != nil {
		t.Fatalf("PutFile: %v", err)
	}
	if res := statefulRun(t, b, sid, "x = 41\nreturn x"); !res.Success {
		t.Fatalf("define: %+v", res)
	}
	pr, err := b.Pause(ctx, shared.PauseRequest{SessionID: sid})
	if err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if !slices.Equal(pr.Kept, []string{"default/x"}) || len(pr.NotKept) != 0 {
		t.Errorf("pause: %+v", pr)
	}
	if ids := containersOf(t, dc, LabelSession+"="+sid); len(ids) != 0 {
		t.Errorf("the paused session still has containers: %v", ids)
	}
	if _, err := b.Resume(ctx, shared.ResumeRequest{SessionID: sid}); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	got, err := b.GetFile(ctx, shared.GetFileRequest{SessionID: sid, Path: "notes/a.txt"})
	if err != nil || string(got.Data) != "kept\n" {
		t.Errorf("the workspace file after resume: %q, %v", got.Data, err)
	}
	if res := statefulRun(t, b, sid, "return x + 1"); !res.Success || string(res.Output) != "42" {
		t.Errorf("after resume: %+v", res)
	}
	if _, err := b.Close(ctx, shared.CloseRequest{SessionID: sid}); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if left := pausedEntries(t, dir); len(left) != 0 {
		t.Errorf("paused_dir holds %v after Close", left)
	}
}

// BenchmarkPauseResume measures a pause (save_state, the workspace, the
// signed write, the container's removal) and a resume (a new container to
// MCP initialize, the globals restored) of a session holding a stateful
// global, reported separately (pause-ms, resume-ms); an Open of a session
// (open-ms, BenchmarkOpenClose's measure) is the floor a resume is
// compared with.
func BenchmarkPauseResume(b *testing.B) {
	user := testUser(b)
	be := configuredBackend(b, map[string]any{"image": testImage(), "paused_dir": b.TempDir()}, nil)
	ctx := context.Background()
	t0 := time.Now()
	sid := openSession(b, be, user)
	open := time.Since(t0)
	if resp, err := be.Execute(ctx, shared.ExecuteRequest{SessionID: sid, Code: "x = list(range(1000))\nreturn 1", Stateful: true}); err != nil || !resp.Result.Success {
		b.Fatalf("define: %v %+v", err, resp.Result)
	}
	var pause, resume time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := be.Pause(ctx, shared.PauseRequest{SessionID: sid}); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := be.Resume(ctx, shared.ResumeRequest{SessionID: sid}); err != nil {
			b.Fatal(err)
		}
		pause += t1.Sub(t0)
		resume += time.Since(t1)
	}
	b.StopTimer()
	if _, err := be.Close(ctx, shared.CloseRequest{SessionID: sid}); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(pause.Milliseconds())/float64(b.N), "pause-ms/op")
	b.ReportMetric(float64(resume.Milliseconds())/float64(b.N), "resume-ms/op")
	b.ReportMetric(float64(open.Milliseconds()), "open-ms")
}
