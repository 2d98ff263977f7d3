package gvisor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/orqest/sandbox/shared"
)

// TestPauseResumeKeepsMemory, against the real runsc: a stateful session
// defines a name and writes a workspace file; Pause checkpoints the
// sandbox (no process of it runs afterwards; calls are refused with
// ErrSessionPaused); the plugin then shuts down and a new plugin process
// (a new Backend on the same paused_dir, as after a host restart)
// resumes the session by its id: the name is still defined, with the
// value it had, the workspace file is there, the tokens' secret is the
// one it had, and state_lost is false. Close removes the saved state.
func TestPauseResumeKeepsMemory(t *testing.T) {
	paused := filepath.Join(t.TempDir(), "paused")
	data := filepath.Join(t.TempDir(), "users")
	extra := map[string]any{"paused_dir": paused, "data_dir": data}
	b, _ := newSessionBackend(t, extra)
	info, _ := b.Info(context.Background(), shared.InfoRequest{})
	for _, c := range []shared.Capability{shared.CapPause, shared.CapPauseMemory} {
		if !slices.Contains(info.Capabilities, c) {
			t.Fatalf("Info lacks %s: %v", c, info.Capabilities)
		}
	}
	id := openSession(t, b, "alice")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := func(b *Backend, code string) shared.ExecutionResult {
		t.Helper()
		resp, err := b.Execute(ctx, shared.ExecuteRequest{SessionID: id, UserID: "alice", Code: code, Stateful: true, AllowedImports: []string{"os"}, Timeout: 30 * time.Second})
		if err != nil {
			t.Fatalf("%q: %v", code, err)
		}
		return resp.Result
	}
	if r := run(b, "import os\nsecret = os.urandom(8).hex()\nreturn secret"); !r.Success {
		t.Fatalf("defining a name: %+v", r)
	}
	r := run(b, "return secret")
	want := string(r.Output)
	if !r.Success || len(want) != 18 {
		t.Fatalf("reading it back before the pause: %+v", r)
	}
	if _, err := b.PutFile(ctx, shared.PutFileRequest{SessionID: id, Path: "kept.txt", Data: []byte(want)}); err != nil {
		t.Fatal(err)
	}
	a, err := b.Manager.Agent(id)
	if err != nil {
		t.Fatal(err)
	}
	container := a.(*agent).container
	if len(sandboxPIDs(container)) == 0 {
		t.Fatalf("no runsc process serves %s before the pause", container)
	}

	start := time.Now()
	p, err := b.Pause(ctx, shared.PauseRequest{SessionID: id})
	if err != nil {
		t.Fatalf("Pause: %v", err)
	}
	t.Logf("paused in %v: %+v", time.Since(start), p)
	if !p.Memory || p.Bytes <= 0 {
		t.Errorf("pause response %+v: want memory kept and a non-empty image", p)
	}
	if pids := sandboxPIDs(container); len(pids) != 0 {
		t.Errorf("processes of the paused session still run: %v", pids)
	}
	if fi, err := os.Stat(filepath.Join(paused, id)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the paused session's directory: %v (mode %v), want 0700", err, fi)
	}
	if _, err := b.Execute(ctx, shared.ExecuteRequest{SessionID: id, Code: "return 1"}); !errors.Is(err, shared.ErrSessionPaused) {
		t.Errorf("a call on the paused session: want ErrSessionPaused, got %v", err)
	}
	if _, err := b.ListFiles(ctx, shared.ListFilesRequest{SessionID: id}); !errors.Is(err, shared.ErrSessionPaused) {
		t.Errorf("files of the paused session: want ErrSessionPaused, got %v", err)
	}
	if _, err := b.Pause(ctx, shared.PauseRequest{SessionID: id}); !errors.Is(err, shared.ErrSessionPaused) {
		t.Errorf("pausing it again: want ErrSessionPaused, got %v", err)
	}

	// The plugin goes away; a new one resumes the session from disk.
	b.Shutdown()
	b2, _ := newSessionBackend(t, extra)
	start = time.Now()
	res, err := b2.Resume(ctx, shared.ResumeRequest{SessionID: id})
	if err != nil {
		t.Fatalf("Resume in a new plugin: %v", err)
	}
	t.Logf("resumed in %v: %+v", time.Since(start), res)
	if res.UserID != "alice" || res.SessionID != id || !res.Memory || res.StateLost {
		t.Errorf("resume response %+v", res)
	}
	if r := run(b2, "return secret"); !r.Success || string(r.Output) != want || r.StateLost {
		t.Errorf("after resume, the name defined before the pause: %+v, want %s", r, want)
	}
	got, err := b2.GetFile(ctx, shared.GetFileRequest{SessionID: id, Path: "kept.txt"})
	if err != nil || string(got.Data) != want {
		t.Errorf("the workspace file after resume: %q, %v", got.Data, err)
	}
	if _, err := os.Stat(filepath.Join(paused, id)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the saved state outlived a successful resume: %v", err)
	}
	if _, err := b2.Resume(ctx, shared.ResumeRequest{SessionID: id}); !errors.Is(err, shared.ErrFailedPrecondition) {
		t.Errorf("resuming a running session: want ErrFailedPrecondition, got %v", err)
	}
	// Paused again and closed: the saved state goes.
	if _, err := b2.Pause(ctx, shared.PauseRequest{SessionID: id}); err != nil {
		t.Fatalf("second Pause: %v", err)
	}
	if _, err := b2.Close(ctx, shared.CloseRequest{SessionID: id}); err != nil {
		t.Fatalf("Close of a paused session: %v", err)
	}
	if _, err := os.Stat(filepath.Join(paused, id)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Close left the saved state: %v", err)
	}
	if _, err := b2.Resume(ctx, shared.ResumeRequest{SessionID: id}); !errors.Is(err, shared.ErrSessionNotFound) {
		t.Errorf("resuming a closed session: want ErrSessionNotFound, got %v", err)
	}
}

// TestPauseRefusedMidCall: a session running a call is not paused
// (ErrSessionBusy, nothing changed): the call finishes with its result
// and the session keeps serving; once the call has ended it pauses.
func TestPauseRefusedMidCall(t *testing.T) {
	b, _ := newSessionBackend(t, map[string]any{"paused_dir": filepath.Join(t.TempDir(), "paused")})
	id := openSession(t, b, "bob")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := make(chan shared.ExecutionResult, 1)
	running := make(chan struct{})
	go func() {
		var once bool
		resp, err := b.ExecuteStream(ctx, shared.ExecuteRequest{SessionID: id, Code: "import time\nprint('running', flush=True)\ntime.sleep(3)\nreturn 7", AllowedImports: []string{"time"}, Timeout: 30 * time.Second},
			func(shared.OutputChunk) error {
				if !once {
					once = true
					close(running)
				}
				return nil
			})
		if err != nil {
			t.Errorf("the call in flight: %v", err)
		}
		done <- resp.Result
	}()
	select {
	case <-running: // the body runs in the sandbox now
	case <-time.After(60 * time.Second):
		t.Fatal("the call printed nothing within 60s")
	}
	if _, err := b.Pause(ctx, shared.PauseRequest{SessionID: id}); !errors.Is(err, shared.ErrSessionBusy) {
		t.Fatalf("Pause while the call runs: want ErrSessionBusy, got %v", err)
	}
	if r := <-done; !r.Success || string(r.Output) != "7" {
		t.Fatalf("the call in flight after a refused pause: %+v", r)
	}
	if _, err := b.Pause(ctx, shared.PauseRequest{SessionID: id}); err != nil {
		t.Fatalf("Pause after the call: %v", err)
	}
	if _, err := b.Close(ctx, shared.CloseRequest{SessionID: id}); err != nil {
		t.Fatal(err)
	}
}
