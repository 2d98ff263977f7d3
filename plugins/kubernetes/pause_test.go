package kubernetes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/orqest/sandbox/shared"
)

// TestPauseResumeKeepsPlainState, on the local cluster: a stateful
// session defines a number, a dict and a function and writes a workspace
// file; Pause deletes its pod (no pod of the session is left) and keeps
// the state signed in paused_dir; a new plugin process (a new Backend on
// the same paused_dir, as after a host restart) resumes the session by its
// id in a new pod: the number, the dict and the file are back, the
// function is named as not kept, state_lost says the memory is not; Close
// removes the saved state.
func TestPauseResumeKeepsPlainState(t *testing.T) {
	cs := requireCluster(t)
	user := testUser(t, cs)
	paused := filepath.Join(t.TempDir(), "paused")
	extra := map[string]any{"paused_dir": paused}
	b := newBackend(t, extra)
	info, _ := b.Info(context.Background(), shared.InfoRequest{})
	if !slices.Contains(info.Capabilities, shared.CapPause) || slices.Contains(info.Capabilities, shared.CapPauseMemory) {
		t.Fatalf("capabilities %v: want pause without pause_memory", info.Capabilities)
	}
	sid := openSession(t, b, user)
	pod := sessionOf(t, b, sid).pod
	run := func(b *Backend, code string) shared.ExecutionResult {
		t.Helper()
		return execOK(t, b, shared.ExecuteRequest{SessionID: sid, UserID: user, Code: code, Stateful: true})
	}
	if r := run(b, "x = 41\nd = {'a': [1, 2.5, 'z'], 'b': None}\ndef f():\n    return 1\nreturn x"); !r.Success {
		t.Fatalf("defining names: %+v", r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := b.PutFile(ctx, shared.PutFileRequest{SessionID: sid, Path: "kept.txt", Data: []byte("hello")}); err != nil {
		t.Fatal(err)
	}
	p, err := b.Pause(ctx, shared.PauseRequest{SessionID: sid})
	if err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if p.Memory || !containsSuffix(p.NotKept, "/f") || !containsSuffix(p.Kept, "/x") || !containsSuffix(p.Kept, "/d") {
		t.Errorf("pause response %+v: want x and d kept, f not, no memory", p)
	}
	waitNoPods(t, cs, LabelSession+"="+LabelValue(sid), 60*time.Second)
	if _, err := cs.CoreV1().Pods(testNamespace).Get(ctx, pod, metav1.GetOptions{}); err == nil {
		t.Errorf("the paused session's pod %s still exists", pod)
	}
	if _, err := b.Execute(ctx, shared.ExecuteRequest{SessionID: sid, UserID: user, Code: "return 1"}); !errors.Is(err, shared.ErrSessionPaused) {
		t.Errorf("a call on the paused session: want ErrSessionPaused, got %v", err)
	}

	b.Shutdown(ctx)
	b2 := newBackend(t, extra)
	res, err := b2.Resume(ctx, shared.ResumeRequest{SessionID: sid})
	if err != nil {
		t.Fatalf("Resume in a new plugin: %v", err)
	}
	if res.UserID != user || res.Memory || !res.StateLost || !containsSuffix(res.Kept, "/x") || !containsSuffix(res.NotKept, "/f") {
		t.Errorf("resume response %+v", res)
	}
	if got := sessionOf(t, b2, sid).pod; got == pod {
		t.Errorf("resumed in the same pod %s", pod)
	}
	if r := run(b2, "return [x + 1, d['a'], d['b']]"); !r.Success || string(r.Output) != `[42,[1,2.5,"z"],null]` {
		t.Errorf("after resume: %+v", r)
	}
	if r := run(b2, "return f()"); r.Success {
		t.Errorf("the function came back although it is not plain data: %+v", r)
	}
	got, err := b2.GetFile(ctx, shared.GetFileRequest{SessionID: sid, Path: "kept.txt"})
	if err != nil || string(got.Data) != "hello" {
		t.Errorf("the workspace file after resume: %q, %v", got.Data, err)
	}
	if _, err := os.Stat(filepath.Join(paused, sid)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the saved state outlived a successful resume: %v", err)
	}
	if _, err := b2.Pause(ctx, shared.PauseRequest{SessionID: sid}); err != nil {
		t.Fatalf("second Pause: %v", err)
	}
	if _, err := b2.Close(ctx, shared.CloseRequest{SessionID: sid}); err != nil {
		t.Fatalf("Close of a paused session: %v", err)
	}
	if _, err := os.Stat(filepath.Join(paused, sid)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Close left the saved state: %v", err)
	}
}

// containsSuffix reports whether a name in names ends with suffix
// ("agent/name").
func containsSuffix(names []string, suffix string) bool {
	return slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(n, suffix) })
}
