package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/plugin"
)

// The bookkeeping of the host's session table against the in-memory
// session backend of testdata/sessionplugin (a real plugin process over
// gRPC; the docker tests in sessions_docker_test.go prove the same on
// tier 2).

var (
	sessionPluginOnce sync.Once
	sessionPluginDir  string
	sessionPluginErr  error
)

// sessionHost loads a host whose sandbox "s" runs the in-memory session
// plugin; top holds top-level HCL (a sessions block), attrs the sandbox
// block's attributes. env goes to the plugin's environment.
func sessionHost(t *testing.T, top, attrs string, env ...string) (*Host, *Sandbox) {
	t.Helper()
	sessionPluginOnce.Do(func() {
		dir, err := os.MkdirTemp(testTmpDir, "orqest-session-plugin-")
		if err != nil {
			sessionPluginErr = err
			return
		}
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, plugin.PluginPrefix+"sessions"), "./host/testdata/sessionplugin")
		cmd.Dir = ".."
		if b, err := cmd.CombinedOutput(); err != nil {
			sessionPluginErr = fmt.Errorf("build the session test plugin: %v\n%s", err, b)
			return
		}
		sessionPluginDir = dir
	})
	if sessionPluginErr != nil {
		t.Fatal(sessionPluginErr)
	}
	src := top + "\nsandbox \"s\" {\n  plugin = \"sessions\"\n" + attrs + "\n}\n"
	cfg, diags := ParseConfig(filepath.Join(t.TempDir(), "config.hcl"), []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	h, err := Load(context.Background(), cfg, WithPluginDirs(sessionPluginDir), WithPluginEnv(env...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	sb, err := h.Sandbox(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	return h, sb
}

// run executes the session plugin's command code in session id.
func run(t *testing.T, sb *Sandbox, id, code string) shared.ExecutionResult {
	t.Helper()
	res, err := sb.Execute(context.Background(), shared.ExecuteRequest{Code: code, SessionID: id})
	if err != nil {
		t.Fatalf("%s in %s: %v", code, id, err)
	}
	if !res.Success {
		t.Fatalf("%s in %s: %+v", code, id, res)
	}
	return res
}

// backendSessions lists the sessions the plugin process holds, asked in
// session via.
func backendSessions(t *testing.T, sb *Sandbox, via string) []string {
	t.Helper()
	var ids []string
	if err := json.Unmarshal(run(t, sb, via, "sessions").Output, &ids); err != nil {
		t.Fatal(err)
	}
	return ids
}

func open(t *testing.T, sb *Sandbox, user string) string {
	t.Helper()
	r, err := sb.Open(context.Background(), shared.OpenRequest{UserID: user})
	if err != nil {
		t.Fatalf("open for %s: %v", user, err)
	}
	return r.SessionID
}

// waitState polls the host's record of id until it is in state want.
func waitState(t *testing.T, sb *Sandbox, id string, want SessionState, within time.Duration) SessionInfo {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		info, ok := sb.Session(id)
		if ok && info.State == want {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s: %+v (tracked %v) after %s, want state %s", id, info, ok, within, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A session unused for idle_timeout is closed by the host (the plugin no
// longer holds it); the next call on its id runs in a new backend session
// of the same id and user, and says StateLost.
func TestIdleSessionReclaimedThenReopened(t *testing.T) {
	h, sb := sessionHost(t, "", `idle_timeout = "300ms"`)
	id := open(t, sb, "alice")
	if out := string(run(t, sb, id, "count").Output); out != "1" {
		t.Fatalf("count = %s", out)
	}
	info := waitState(t, sb, id, SessionReclaimed, 5*time.Second)
	if info.Reason != ReclaimIdle || info.User != "alice" || info.Reclaimed.IsZero() {
		t.Errorf("reclaimed record %+v", info)
	}
	if got := testutil.ToFloat64(h.metrics.reclaimed.WithLabelValues("s", ReclaimIdle)); got != 1 {
		t.Errorf("reclaimed{idle} = %v", got)
	}
	other := open(t, sb, "bob")
	if ids := backendSessions(t, sb, other); slices.Contains(ids, id) {
		t.Fatalf("the plugin still holds the reclaimed session: %v", ids)
	}
	res := run(t, sb, id, "count")
	if string(res.Output) != "1" || !res.StateLost {
		t.Fatalf("after reclaim: %+v, want a fresh counter and StateLost", res)
	}
	if info, _ := sb.Session(id); info.State != SessionOpen || info.Reopens != 1 || info.User != "alice" {
		t.Errorf("reopened record %+v", info)
	}
	if res := run(t, sb, id, "count"); string(res.Output) != "2" || res.StateLost {
		t.Errorf("the next call: %+v", res)
	}
	if got := testutil.ToFloat64(h.metrics.reopened.WithLabelValues("s", ReopenReclaimed)); got != 1 {
		t.Errorf("reopened{reclaimed} = %v", got)
	}
}

// A session with a call in flight is never idle, however long the call.
func TestBusySessionNotReclaimed(t *testing.T) {
	_, sb := sessionHost(t, "", `idle_timeout = "200ms"`)
	id := open(t, sb, "alice")
	run(t, sb, id, "count")
	res, err := sb.Execute(context.Background(), shared.ExecuteRequest{Code: "sleep", Args: json.RawMessage(`{"ms": 700}`), SessionID: id})
	if err != nil || !res.Success || res.StateLost {
		t.Fatalf("long call: %+v %v", res, err)
	}
	if res := run(t, sb, id, "count"); string(res.Output) != "2" || res.StateLost {
		t.Fatalf("after the long call: %+v, want the session kept", res)
	}
	waitState(t, sb, id, SessionReclaimed, 5*time.Second)
}

// A session open for max_lifetime is closed even when it is in use.
func TestLifetimeReclaims(t *testing.T) {
	_, sb := sessionHost(t, "", `max_lifetime = "600ms"`)
	id := open(t, sb, "alice")
	stop := time.Now().Add(5 * time.Second)
	for time.Now().Before(stop) {
		if info, _ := sb.Session(id); info.State == SessionReclaimed {
			if info.Reason != ReclaimLifetime {
				t.Fatalf("reason %q", info.Reason)
			}
			return
		}
		run(t, sb, id, "count") // used all the time: never idle
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("not reclaimed after max_lifetime")
}

// At max_sessions_per_user and max_sessions with no session idle for
// reclaim_idle_after, an Open is refused with an error naming the limit;
// a reclaimed session's place is free.
func TestSessionCapsRefuse(t *testing.T) {
	h, sb := sessionHost(t, "sessions {\n  max_sessions = 3\n  max_sessions_per_user = 2\n}", "")
	open(t, sb, "a")
	open(t, sb, "a")
	_, err := sb.Open(context.Background(), shared.OpenRequest{UserID: "a"})
	var lim *SessionLimitError
	if !errors.As(err, &lim) || !errors.Is(err, shared.ErrFailedPrecondition) || lim.Limit != "max_sessions_per_user" || lim.Open != 2 {
		t.Fatalf("third session of a: %v", err)
	}
	for _, want := range []string{`max_sessions_per_user 2 for user "a"`, "2 of its sessions are open", "close_session", "orqest-sandbox session close NAME", "idle_timeout"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	open(t, sb, "b")
	_, err = sb.Open(context.Background(), shared.OpenRequest{UserID: "c"})
	if !errors.As(err, &lim) || lim.Limit != "max_sessions" || lim.Open != 3 || !strings.Contains(err.Error(), "max_sessions 3 reached: 3 sessions are open") {
		t.Fatalf("fourth session: %v", err)
	}
	if got := testutil.ToFloat64(h.metrics.refused.WithLabelValues("s", "max_sessions")); got != 1 {
		t.Errorf("refused{max_sessions} = %v", got)
	}
}

// At a cap, the least recently used session idle for reclaim_idle_after
// is closed to make room; reopening it needs a place again, and takes the
// next least recently used one.
func TestCapacityReclaimsLeastRecentlyUsed(t *testing.T) {
	h, sb := sessionHost(t, "sessions {\n  max_sessions = 2\n  reclaim_idle_after = \"150ms\"\n}", "")
	a := open(t, sb, "a")
	b := open(t, sb, "b")
	run(t, sb, a, "count")
	time.Sleep(200 * time.Millisecond)
	run(t, sb, a, "count") // a is used now: b is the least recently used
	c := open(t, sb, "c")
	if info, _ := sb.Session(b); info.State != SessionReclaimed || info.Reason != ReclaimCapacity {
		t.Fatalf("b after c opened: %+v", info)
	}
	if ids := backendSessions(t, sb, a); !slices.Equal(ids, sortedIDs(a, c)) {
		t.Fatalf("the plugin holds %v, want a and c", ids)
	}
	// b again: both places are taken by sessions just used.
	_, err := sb.Execute(context.Background(), shared.ExecuteRequest{Code: "count", SessionID: b})
	var lim *SessionLimitError
	if !errors.As(err, &lim) || lim.Limit != "max_sessions" || !strings.Contains(err.Error(), "cannot be opened again now") {
		t.Fatalf("b with no idle place: %v", err)
	}
	time.Sleep(200 * time.Millisecond)
	run(t, sb, c, "count") // c used now: a is the least recently used
	if res := run(t, sb, b, "count"); string(res.Output) != "1" || !res.StateLost {
		t.Fatalf("b reopened: %+v", res)
	}
	if info, _ := sb.Session(a); info.State != SessionReclaimed || info.Reason != ReclaimCapacity {
		t.Errorf("a after b reopened: %+v", info)
	}
	if got := testutil.ToFloat64(h.metrics.reclaimed.WithLabelValues("s", ReclaimCapacity)); got != 2 {
		t.Errorf("reclaimed{capacity} = %v", got)
	}
}

func sortedIDs(ids ...string) []string {
	slices.Sort(ids)
	return ids
}

// Many users opening at once against max_sessions get exactly that many
// sessions; the others are refused, none half-opened.
func TestConcurrentOpensAtCap(t *testing.T) {
	_, sb := sessionHost(t, "sessions {\n  max_sessions = 4\n}", "")
	var wg sync.WaitGroup
	var mu sync.Mutex
	var opened []string
	refused := 0
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := sb.Open(context.Background(), shared.OpenRequest{UserID: fmt.Sprintf("u%d", i)})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				opened = append(opened, r.SessionID)
			case errors.Is(err, shared.ErrFailedPrecondition) && strings.Contains(err.Error(), "max_sessions 4"):
				refused++
			default:
				t.Errorf("open: %v", err)
			}
		}()
	}
	wg.Wait()
	if len(opened) != 4 || refused != 36 {
		t.Fatalf("%d opened, %d refused; want 4 and 36", len(opened), refused)
	}
	if ids := backendSessions(t, sb, opened[0]); len(ids) != 4 {
		t.Errorf("the plugin holds %v", ids)
	}
}

// After the plugin process dies, a call on a session the host opened runs
// in the relaunched process, in a new backend session of the same id.
func TestPluginRelaunchReopensSession(t *testing.T) {
	h, sb := sessionHost(t, "", "")
	id := open(t, sb, "alice")
	run(t, sb, id, "count")
	run(t, sb, id, "count")
	pid := sb.PluginPID()
	killPlugin(t, pid)
	res := run(t, sb, id, "count")
	if string(res.Output) != "1" || !res.StateLost {
		t.Fatalf("after the plugin died: %+v", res)
	}
	if sb.Launches() != 2 || sb.PluginPID() == pid {
		t.Errorf("launches %d, pid %d (was %d)", sb.Launches(), sb.PluginPID(), pid)
	}
	if got := testutil.ToFloat64(h.metrics.reopened.WithLabelValues("s", ReopenRelaunch)); got != 1 {
		t.Errorf("reopened{relaunch} = %v", got)
	}
	// Files too: the first call after another relaunch reopens.
	killPlugin(t, sb.PluginPID())
	if _, err := sb.PutFile(context.Background(), shared.PutFileRequest{SessionID: id, Path: "a.txt", Data: []byte("x")}); err != nil {
		t.Fatalf("put after relaunch: %v", err)
	}
	if info, _ := sb.Session(id); info.Reopens != 2 || info.State != SessionOpen {
		t.Errorf("record %+v", info)
	}
	if err := sb.CloseSession(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if _, ok := sb.Session(id); ok {
		t.Error("closed session still tracked")
	}
}

// killPlugin SIGKILLs the plugin process pid and waits until it is gone
// (a call sent while it is still dying fails: the host does not resend a
// call that may have run).
func killPlugin(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("plugin %d still there after SIGKILL", pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A session the plugin lost is opened again, whether the plugin says so
// with ErrSessionNotFound or only with ErrNotFound; a missing file of a
// live session is an ErrNotFound that opens nothing again.
func TestLostSessionReopensMissingFileDoesNot(t *testing.T) {
	for _, typed := range []bool{false, true} {
		t.Run(fmt.Sprintf("typed=%v", typed), func(t *testing.T) {
			env := "ORQEST_TEST_TYPED_NOT_FOUND=0"
			if typed {
				env = "ORQEST_TEST_TYPED_NOT_FOUND=1"
			}
			_, sb := sessionHost(t, "", "", env)
			ctx := context.Background()
			id := open(t, sb, "alice")
			run(t, sb, id, "count")
			_, err := sb.GetFile(ctx, shared.GetFileRequest{SessionID: id, Path: "nothere.txt"})
			if !errors.Is(err, shared.ErrNotFound) || errors.Is(err, shared.ErrSessionNotFound) {
				t.Fatalf("missing file: %v", err)
			}
			if _, err := sb.ListFiles(ctx, shared.ListFilesRequest{SessionID: id, Path: "nodir"}); !errors.Is(err, shared.ErrNotFound) {
				t.Fatalf("missing directory: %v", err)
			}
			if res := run(t, sb, id, "count"); string(res.Output) != "2" || res.StateLost {
				t.Fatalf("after the missing file: %+v, want the session kept", res)
			}
			run(t, sb, id, "forget") // the backend loses it
			res := run(t, sb, id, "count")
			if string(res.Output) != "1" || !res.StateLost {
				t.Fatalf("after the backend lost it: %+v", res)
			}
			run(t, sb, id, "forget")
			if _, err := sb.GetFile(ctx, shared.GetFileRequest{SessionID: id, Path: "nothere.txt"}); !errors.Is(err, shared.ErrNotFound) {
				t.Fatalf("missing file in a lost session: %v", err)
			}
			if info, _ := sb.Session(id); info.Reopens != 2 {
				t.Errorf("record %+v, want two reopens", info)
			}
		})
	}
}

// Closing a reclaimed session forgets its tombstone, without a plugin
// call; a call on a session the host does not track goes to the plugin as
// it is.
func TestCloseForgetsTombstone(t *testing.T) {
	h, sb := sessionHost(t, "", `idle_timeout = "200ms"`)
	id := open(t, sb, "alice")
	waitState(t, sb, id, SessionReclaimed, 5*time.Second)
	if err := sb.CloseSession(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if _, ok := sb.Session(id); ok || len(h.Sessions()) != 0 {
		t.Fatalf("still tracked: %+v", h.Sessions())
	}
	_, err := sb.Execute(context.Background(), shared.ExecuteRequest{Code: "count", SessionID: id})
	if !errors.Is(err, shared.ErrNotFound) {
		t.Fatalf("a call on a forgotten session: %v", err)
	}
}

// Host.Sessions and the open-sessions gauge follow the table.
func TestSessionsListAndGauge(t *testing.T) {
	h, sb := sessionHost(t, "", "")
	a := open(t, sb, "alice")
	open(t, sb, "bob")
	run(t, sb, a, "count")
	all := h.Sessions()
	if len(all) != 2 || all[0].ID != a || all[0].Sandbox != "s" || all[0].User != "alice" || all[0].State != SessionOpen || all[0].InCall != 0 {
		t.Fatalf("sessions %+v", all)
	}
	if n := gaugeValue(t, h, "orqest_sessions_open"); n != 2 {
		t.Errorf("orqest_sessions_open = %v", n)
	}
	sb.CloseSession(context.Background(), a)
	if n := gaugeValue(t, h, "orqest_sessions_open"); n != 1 {
		t.Errorf("orqest_sessions_open after a close = %v", n)
	}
}

// gaugeValue gathers the host's metric name (one series).
func gaugeValue(t *testing.T, h *Host, name string) float64 {
	t.Helper()
	mfs, err := h.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no single series of %s", name)
	return 0
}

// The reaper is one goroutine per Host, started with the first session
// and stopped by Close: no goroutine is left behind.
func TestReaperStopsWithHost(t *testing.T) {
	sessionHost(t, "", "") // builds the plugin, outside the count
	base := runtime.NumGoroutine()
	for range 3 {
		cfg, diags := ParseConfig(filepath.Join(t.TempDir(), "config.hcl"), []byte("sandbox \"s\" {\n  plugin = \"sessions\"\n  idle_timeout = \"1h\"\n}\n"))
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		h, err := Load(context.Background(), cfg, WithPluginDirs(sessionPluginDir))
		if err != nil {
			t.Fatal(err)
		}
		sb, _ := h.Sandbox(context.Background(), "s")
		open(t, sb, "alice")
		if !h.sessions.started {
			t.Fatal("no reaper after the first session")
		}
		h.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A tool call's result that is an execution says state_lost after a
// reopen; any other result is left as it is.
func TestMarkStateLost(t *testing.T) {
	if got := string(markStateLost(json.RawMessage(`{"success":true,"output":1}`))); got != `{"output":1,"state_lost":true,"success":true}` {
		t.Errorf("execution: %s", got)
	}
	for _, in := range []string{`{"tools":[]}`, `[1]`, `not json`} {
		if got := string(markStateLost(json.RawMessage(in))); got != in {
			t.Errorf("%s became %s", in, got)
		}
	}
}
