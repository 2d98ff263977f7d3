package host

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/orqest/sandbox/shared"
)

// The host's pause and resume against the in-memory session plugin
// (testdata/sessionplugin, which saves a paused session to a file with
// $ORQEST_TEST_PAUSE_DIR); the real checkpoint of tier 3 is tested in
// plugins/gvisor.

func pauseHost(t *testing.T, dir, attrs string) (*Host, *Sandbox) {
	t.Helper()
	return sessionHost(t, "", attrs, "ORQEST_TEST_PAUSE_DIR="+dir)
}

// Without the pause capability, PauseSession and ResumeSession are
// ErrNotSupported before the plugin is asked, and the session is
// untouched.
func TestPauseNotSupported(t *testing.T) {
	_, sb := sessionHost(t, "", "")
	id := open(t, sb, "alice")
	run(t, sb, id, "count")
	if _, err := sb.PauseSession(context.Background(), id); !errors.Is(err, shared.ErrNotSupported) {
		t.Errorf("pause: want ErrNotSupported, got %v", err)
	}
	if _, err := sb.ResumeSession(context.Background(), id); !errors.Is(err, shared.ErrNotSupported) {
		t.Errorf("resume: want ErrNotSupported, got %v", err)
	}
	if res := run(t, sb, id, "count"); string(res.Output) != "2" || res.StateLost {
		t.Errorf("the session after a refused pause: %+v", res)
	}
}

// on_idle = "pause" on a plugin without the pause capability fails the
// sandbox's launch with a diagnostic at the attribute.
func TestOnIdlePauseNeedsCapability(t *testing.T) {
	sessionHost(t, "", "") // builds the plugin
	src := "sandbox \"s\" {\n  plugin = \"sessions\"\n  on_idle = \"pause\"\n}\n"
	err := startSandboxS(t, src)
	var de *DiagnosticsError
	if !errors.As(err, &de) || de.Diagnostics[0].Subject == nil || de.Diagnostics[0].Subject.Start.Line != 3 {
		t.Fatalf("want a diagnostic at on_idle (line 3), got %v", err)
	}
	if _, diags := ParseConfig("bad.hcl", []byte("sandbox \"s\" {\n  plugin = \"sessions\"\n  on_idle = \"sleep\"\n}\n")); !diags.HasErrors() {
		t.Error("on_idle = \"sleep\" was accepted")
	}
}

// A paused session is released by the plugin and refused mid-call; the
// host resumes it on ResumeSession or, when paused again, on its next
// call, with its state.
func TestPauseResumeSession(t *testing.T) {
	dir := t.TempDir()
	_, sb := pauseHost(t, dir, "")
	ctx := context.Background()
	id := open(t, sb, "alice")
	run(t, sb, id, "count")
	if _, err := sb.PauseSession(ctx, id); err != nil {
		t.Fatal(err)
	}
	if info, _ := sb.Session(id); info.State != SessionPaused {
		t.Errorf("record after pause: %+v", info)
	}
	other := open(t, sb, "bob")
	if ids := backendSessions(t, sb, other); slices.Contains(ids, id) {
		t.Errorf("the plugin still holds the paused session: %v", ids)
	}
	if _, err := sb.PauseSession(ctx, id); !errors.Is(err, shared.ErrSessionPaused) {
		t.Errorf("pausing it again: want ErrSessionPaused, got %v", err)
	}
	r, err := sb.ResumeSession(ctx, id)
	if err != nil || r.UserID != "alice" || r.StateLost {
		t.Fatalf("resume: %+v %v", r, err)
	}
	if res := run(t, sb, id, "count"); string(res.Output) != "2" || res.StateLost {
		t.Errorf("after resume: %+v, want the counter kept", res)
	}
	if _, err := sb.ResumeSession(ctx, id); !errors.Is(err, shared.ErrFailedPrecondition) {
		t.Errorf("resuming an open session: want ErrFailedPrecondition, got %v", err)
	}

	// Mid-call: refused, nothing lost.
	done := make(chan error, 1)
	go func() {
		_, err := sb.Execute(ctx, shared.ExecuteRequest{Code: "sleep", Args: json.RawMessage(`{"ms": 800}`), SessionID: id})
		done <- err
	}()
	waitBusy(t, sb, id)
	if _, err := sb.PauseSession(ctx, id); !errors.Is(err, shared.ErrSessionBusy) {
		t.Errorf("pause mid-call: want ErrSessionBusy, got %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the call in flight: %v", err)
	}
	if res := run(t, sb, id, "count"); string(res.Output) != "3" {
		t.Errorf("after a refused pause: %+v", res)
	}

	// Paused again: the next call resumes it.
	if _, err := sb.PauseSession(ctx, id); err != nil {
		t.Fatal(err)
	}
	if res := run(t, sb, id, "count"); string(res.Output) != "4" || res.StateLost {
		t.Errorf("a call on a paused session: %+v, want it resumed with its counter", res)
	}
	// Closed while paused: the saved state goes.
	if _, err := sb.PauseSession(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := sb.CloseSession(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, id+".json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("closing a paused session left its saved state: %v", err)
	}
}

// waitBusy waits until the host counts a call in flight on id.
func waitBusy(t *testing.T, sb *Sandbox, id string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if info, _ := sb.Session(id); info.InCall > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the call never began")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A session paused under one host is resumed by a new host (and a new
// plugin process) by its id, with its user and state.
func TestPausedSessionSurvivesHostRestart(t *testing.T) {
	dir := t.TempDir()
	h1, sb1 := pauseHost(t, dir, "")
	id := open(t, sb1, "carol")
	run(t, sb1, id, "count")
	if _, err := sb1.PauseSession(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	h1.Close()
	_, sb2 := pauseHost(t, dir, "")
	if _, ok := sb2.Session(id); ok {
		t.Fatal("a new host tracks the session before it is resumed")
	}
	r, err := sb2.ResumeSession(context.Background(), id)
	if err != nil || r.UserID != "carol" {
		t.Fatalf("resume in a new host: %+v %v", r, err)
	}
	if info, ok := sb2.Session(id); !ok || info.User != "carol" || info.State != SessionOpen {
		t.Errorf("the new host's record: %+v %v", info, ok)
	}
	if res := run(t, sb2, id, "count"); string(res.Output) != "2" || res.StateLost {
		t.Errorf("after resume in a new host: %+v", res)
	}
	if _, err := sb2.ResumeSession(context.Background(), "s-never"); !errors.Is(err, shared.ErrSessionNotFound) {
		t.Errorf("resuming a session never paused: want ErrSessionNotFound, got %v", err)
	}
}

// on_idle = "pause": a session idle for idle_timeout is paused, not
// closed, and its next call resumes it with its state.
func TestOnIdlePause(t *testing.T) {
	dir := t.TempDir()
	_, sb := pauseHost(t, dir, "idle_timeout = \"300ms\"\n  on_idle = \"pause\"")
	id := open(t, sb, "dave")
	run(t, sb, id, "count")
	waitState(t, sb, id, SessionPaused, 5*time.Second)
	if _, err := os.Stat(filepath.Join(dir, id+".json")); err != nil {
		t.Fatalf("the idle session was not saved: %v", err)
	}
	if res := run(t, sb, id, "count"); string(res.Output) != "2" || res.StateLost {
		t.Errorf("a call after an idle pause: %+v, want the counter kept", res)
	}
	if info, _ := sb.Session(id); info.State != SessionOpen || info.Reopens != 0 {
		t.Errorf("record after the resume: %+v", info)
	}
}

// A call that reaches the plugin while a pause is under way there (the
// plugin refuses it as paused before the host has recorded the pause)
// waits for the pause, resumes the session and runs, with its state.
func TestCallDuringPauseResumes(t *testing.T) {
	dir := t.TempDir()
	_, sb := sessionHost(t, "", "", "ORQEST_TEST_PAUSE_DIR="+dir, "ORQEST_TEST_PAUSE_DELAY_MS=600")
	ctx := context.Background()
	id := open(t, sb, "erin")
	run(t, sb, id, "count")
	paused := make(chan error, 1)
	go func() {
		_, err := sb.PauseSession(ctx, id)
		paused <- err
	}()
	// The plugin has saved and dropped the session; its Pause has not
	// answered yet.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, id+".json")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the plugin never saved the session")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if info, _ := sb.Session(id); info.State != SessionOpen {
		t.Fatalf("the host recorded the pause before the plugin answered: %+v", info)
	}
	res := run(t, sb, id, "count")
	if err := <-paused; err != nil {
		t.Fatalf("PauseSession: %v", err)
	}
	if string(res.Output) != "2" || res.StateLost {
		t.Errorf("the call during the pause: %+v, want it run after a resume with the counter kept", res)
	}
	if info, _ := sb.Session(id); info.State != SessionOpen {
		t.Errorf("the record after the call: %+v", info)
	}
}

// startSandboxS loads policy src with the session test plugin and starts
// its sandbox "s", returning what the launch said.
func startSandboxS(t *testing.T, src string) error {
	t.Helper()
	cfg, diags := ParseConfig(filepath.Join(t.TempDir(), "config.hcl"), []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	h, err := Load(context.Background(), cfg, WithPluginDirs(sessionPluginDir))
	if err == nil {
		defer h.Close()
		var sb *Sandbox
		if sb, err = h.Sandbox(context.Background(), "s"); err == nil {
			err = sb.Start(context.Background())
		}
	}
	return err
}
