package docker

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/moby/moby/client"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orqest/sandbox/internal/rtclient/rtclienttest"
	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/shared"
)

// testImage is the runtime image the tests use (`make image` builds it).
func testImage() string {
	if v := os.Getenv("ORQEST_DOCKER_IMAGE"); v != "" {
		return v
	}
	return DefaultImage()
}

// requireDocker skips (loudly) when no engine or image is reachable, or
// fails instead when ORQEST_REQUIRE_DOCKER=1 (CI: a missing engine is a
// failure there, not a skip).
func requireDocker(t testing.TB) *client.Client {
	t.Helper()
	dc, err := client.New(client.FromEnv)
	reason := ""
	if err != nil {
		reason = "docker client: " + err.Error()
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := dc.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
			reason = "Docker engine unreachable (`docker info` fails): " + err.Error()
		} else if _, err := dc.ImageInspect(ctx, testImage()); err != nil {
			reason = "runtime image " + testImage() + " missing (run `make image`): " + err.Error()
		}
	}
	if reason != "" {
		if os.Getenv("ORQEST_REQUIRE_DOCKER") == "1" {
			t.Fatalf("ORQEST_REQUIRE_DOCKER=1 and %s", reason)
		}
		t.Skipf("SKIPPING tier-2 Docker test: %s (set ORQEST_REQUIRE_DOCKER=1 to make this a failure)", reason)
	}
	return dc
}

func newBackend(t testing.TB) *Backend {
	t.Helper()
	return configuredBackend(t, map[string]any{"image": testImage()}, nil)
}

// configuredBackend is a backend configured with the config block cfg and
// allowed_packages allowed, shut down when the test ends; it skips (or
// fails) without Docker as requireDocker does.
func configuredBackend(t testing.TB, cfg map[string]any, allowed []string) *Backend {
	t.Helper()
	return configuredBackendWith(t, cfg, shared.ConfigureRequest{AllowedPackages: allowed}, nil)
}

// configuredBackendWith is configuredBackend with the rest of the
// ConfigureRequest (its Config is cfg) and setup run on the backend
// before Configure.
func configuredBackendWith(t testing.TB, cfg map[string]any, req shared.ConfigureRequest, setup func(*Backend)) *Backend {
	t.Helper()
	requireDocker(t)
	level := hclog.Warn
	if testing.Verbose() {
		level = hclog.Debug
	}
	b := NewBackend(hclog.New(&hclog.LoggerOptions{Name: "docker-test", Level: level, Output: os.Stderr}))
	if setup != nil {
		setup(b)
	}
	req.Config, _ = json.Marshal(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := b.Configure(ctx, req); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		b.Shutdown(ctx)
	})
	return b
}

// testUser returns a fresh user id and removes, at the end of the test, every
// container labelled with it and its volume.
func testUser(t testing.TB) string {
	t.Helper()
	dc := requireDocker(t)
	u := "orqtest-" + randomHex(5)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		list, err := dc.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", LabelUser+"="+u)})
		if err == nil {
			for _, c := range list.Items {
				t.Errorf("leftover container %s for user %s", shortID(c.ID), u)
				_, _ = dc.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
			}
		}
		// The volume may still be held by a container being auto-removed.
		for i := 0; i < 50; i++ {
			_, err := dc.VolumeRemove(ctx, VolumeName(u), client.VolumeRemoveOptions{Force: true})
			if err == nil || strings.Contains(err.Error(), "no such volume") || strings.Contains(strings.ToLower(err.Error()), "not found") {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	return u
}

func openSession(t testing.TB, b *Backend, user string) string {
	t.Helper()
	sid := "s-" + randomHex(4)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := b.Open(ctx, shared.OpenRequest{UserID: user, SessionID: sid}); err != nil {
		t.Fatalf("Open: %v", err)
	}
	return sid
}

// openedSession is what the tests read of an open session: its container
// and the MCP connection to its runtime.
type openedSessionInfo struct {
	containerID string
	endpoint    string // bridge mode: the runtime's MCP URL
	mcp         *mcp.ClientSession
	secret      []byte
	user, id    string
}

// openedSession returns the open session sid of b.
func openedSession(t testing.TB, b *Backend, sid string) openedSessionInfo {
	t.Helper()
	a, err := b.Agent(sid)
	if err != nil {
		t.Fatal(err)
	}
	tg, err := b.Target(context.Background(), sid)
	if err != nil {
		t.Fatal(err)
	}
	return openedSessionInfo{containerID: a.(*agent).containerID, endpoint: a.(*agent).endpoint, mcp: tg.MCP, secret: tg.Secret, user: tg.User, id: tg.Session}
}

func containersOf(t testing.TB, dc *client.Client, label string) []string {
	t.Helper()
	list, err := dc.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", label)})
	if err != nil {
		t.Fatalf("ContainerList: %v", err)
	}
	var ids []string
	for _, c := range list.Items {
		ids = append(ids, shortID(c.ID))
	}
	return ids
}

// TestBadIDsRejectedBeforeDocker points the backend at an engine that does
// not exist: a bad id must be refused as invalid before any Docker call (a
// Docker call would fail with ErrUnavailable).
func TestBadIDsRejectedBeforeDocker(t *testing.T) {
	b := NewBackend(nil)
	dc, err := client.New(client.WithHost("unix:///nonexistent/docker.sock"))
	if err != nil {
		t.Fatal(err)
	}
	b.docker = dc
	b.reaped = true
	bad := []string{"", "../escape", "-lead", "_lead", "a b", "a/b", "a.b", "ä", strings.Repeat("a", 65), "x\n"}
	ctx := context.Background()
	for _, id := range bad {
		if _, err := b.Open(ctx, shared.OpenRequest{UserID: id, SessionID: "ok"}); !errors.Is(err, shared.ErrInvalidArgument) {
			t.Errorf("Open(user %q) = %v, want ErrInvalidArgument", id, err)
		}
		if _, err := b.Open(ctx, shared.OpenRequest{UserID: "ok", SessionID: id}); id != "" && !errors.Is(err, shared.ErrInvalidArgument) {
			t.Errorf("Open(session %q) = %v, want ErrInvalidArgument", id, err)
		}
		if id == "" {
			continue // empty agent/session means "default"/"sessionless" in Execute
		}
		if _, err := b.Execute(ctx, shared.ExecuteRequest{Code: "return 1", SessionID: "ok", AgentID: id}); !errors.Is(err, shared.ErrInvalidArgument) {
			t.Errorf("Execute(agent %q) = %v, want ErrInvalidArgument", id, err)
		}
		if _, err := b.Execute(ctx, shared.ExecuteRequest{Code: "return 1", SessionID: id}); !errors.Is(err, shared.ErrInvalidArgument) {
			t.Errorf("Execute(session %q) = %v, want ErrInvalidArgument", id, err)
		}
	}
	good := []string{"a", "A9", "alice_1-x", strings.Repeat("a", 64)}
	for _, id := range good {
		if err := rtproto.CheckID("id", id); err != nil {
			t.Errorf("CheckID(%q) = %v, want ok", id, err)
		}
	}
	// A good id does reach Docker (and fails there, unavailable).
	if _, err := b.Open(ctx, shared.OpenRequest{UserID: "alice", SessionID: "s1"}); !errors.Is(err, shared.ErrUnavailable) {
		t.Errorf("Open(good ids, no engine) = %v, want ErrUnavailable", err)
	}
}

func TestHardeningAndClose(t *testing.T) {
	user := testUser(t) // first: its cleanup (leftover check) runs after the backend's Shutdown
	b := newBackend(t)
	dc := requireDocker(t)
	sid := openSession(t, b, user)
	s := openedSession(t, b, sid)
	ctx := context.Background()
	ins, err := dc.ContainerInspect(ctx, s.containerID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatalf("inspect: %v", err)
	}
	c := ins.Container
	hc := c.HostConfig
	if got := hc.CapDrop; len(got) != 1 || !strings.EqualFold(strings.TrimPrefix(strings.ToUpper(got[0]), "CAP_"), "ALL") {
		t.Errorf("CapDrop = %v, want [ALL]", got)
	}
	var capAdd []string
	for _, c := range hc.CapAdd {
		capAdd = append(capAdd, strings.TrimPrefix(strings.ToUpper(c), "CAP_"))
	}
	if got := capAdd; !slices.Equal(got, RuntimeCaps()) {
		t.Errorf("CapAdd = %v, want %v (the runtime's uid drop of its Python processes, the take-over of an older volume)", got, RuntimeCaps())
	}
	if !hc.ReadonlyRootfs {
		t.Error("ReadonlyRootfs = false")
	}
	if c.Config.User != RuntimeUser {
		t.Errorf("User = %q, want %q", c.Config.User, RuntimeUser)
	}
	if hc.PidsLimit == nil || *hc.PidsLimit != DefaultPidsLimit {
		t.Errorf("PidsLimit = %v", hc.PidsLimit)
	}
	if hc.Memory != DefaultMemoryMB<<20 {
		t.Errorf("Memory = %d", hc.Memory)
	}
	if hc.NanoCPUs != int64(DefaultCPUs*1e9) {
		t.Errorf("NanoCPUs = %d", hc.NanoCPUs)
	}
	if !containsPrefix(hc.SecurityOpt, "no-new-privileges") {
		t.Errorf("SecurityOpt = %v, want no-new-privileges", hc.SecurityOpt)
	}
	if string(hc.NetworkMode) != "none" {
		t.Errorf("NetworkMode = %q, want none", hc.NetworkMode)
	}
	if hc.Privileged {
		t.Error("Privileged")
	}
	if _, ok := hc.Tmpfs["/workspace"]; !ok {
		t.Errorf("Tmpfs = %v, want /workspace", hc.Tmpfs)
	}
	var vol bool
	for _, m := range c.Mounts {
		if m.Destination == "/data" && m.Name == VolumeName(user) {
			vol = true
		}
	}
	if !vol {
		t.Errorf("Mounts = %+v, want volume %s at /data", c.Mounts, VolumeName(user))
	}
	for k, want := range map[string]string{LabelTier: tierValue, LabelUser: user, LabelSession: sid, LabelOwnerPID: itoa(os.Getpid())} {
		if got := c.Config.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	for _, e := range c.Config.Env {
		if strings.Contains(strings.ToLower(e), "secret") || strings.Contains(e, "JWT") {
			t.Errorf("secret-looking env var in the container: %q", e)
		}
	}
	if !c.State.Running {
		t.Errorf("container not running: %+v", c.State)
	}

	// The runtime works and sees its limits.
	res := execOK(t, b, shared.ExecuteRequest{Code: "return 1+1", SessionID: sid, UserID: user})
	if string(res.Output) != "2" {
		t.Errorf("output = %s, want 2", res.Output)
	}

	if _, err := b.Close(ctx, shared.CloseRequest{SessionID: sid}); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if left := containersOf(t, dc, LabelSession+"="+sid); len(left) > 0 {
		t.Errorf("containers left after Close: %v", left)
	}
	if _, err := dc.VolumeInspect(ctx, VolumeName(user), client.VolumeInspectOptions{}); err != nil {
		t.Errorf("volume %s gone after Close: %v", VolumeName(user), err)
	}
	if _, err := b.Close(ctx, shared.CloseRequest{SessionID: sid}); !errors.Is(err, shared.ErrNotFound) {
		t.Errorf("second Close = %v, want ErrNotFound", err)
	}
	if _, err := b.Execute(ctx, shared.ExecuteRequest{Code: "return 1", SessionID: sid}); !errors.Is(err, shared.ErrNotFound) {
		t.Errorf("Execute after Close = %v, want ErrNotFound", err)
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func containsPrefix(list []string, p string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func execOK(t testing.TB, b *Backend, req shared.ExecuteRequest) shared.ExecutionResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := b.Execute(ctx, req)
	if err != nil {
		t.Fatalf("Execute(%q): %v", req.Code, err)
	}
	return resp.Result
}

func TestExecuteInSession(t *testing.T) {
	user := testUser(t) // first: its cleanup (leftover check) runs after the backend's Shutdown
	b := newBackend(t)
	sid := openSession(t, b, user)
	base := shared.ExecuteRequest{SessionID: sid, UserID: user}

	cases := []struct {
		name   string
		code   string
		args   string
		allow  []string
		agent  string
		want   string
		kind   shared.ErrorKind
		mem    int
		tmo    time.Duration
		stdout string
	}{
		{name: "arith", code: "return 1+1", want: "2"},
		{name: "args+import", code: "import re\nreturn re.findall(r'\\d+', args['t'])", args: `{"t":"a1 b22 c333"}`, allow: []string{"re"}, want: `["1","22","333"]`},
		{name: "agent", code: "print('hi')\nreturn {'ok': True}", agent: "alice", want: `{"ok":true}`, stdout: "hi\n"},
		{name: "import denied", code: "import os\nreturn 1", kind: shared.KindValidation},
		{name: "runtime error", code: "return 1/0", kind: shared.KindRuntime},
		{name: "timeout", code: "while True:\n    pass", tmo: 500 * time.Millisecond, kind: shared.KindTimeout},
		{name: "fork bomb", code: "import os\nwhile True:\n    os.fork()", allow: []string{"os"}, tmo: 3 * time.Second, kind: "any"},
		{name: "memory bomb", code: "x = [0] * (10**9)\nreturn len(x)", mem: 64, kind: shared.KindMemory},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := base
			req.Code, req.AllowedImports, req.AgentID, req.MemoryMB, req.Timeout = c.code, c.allow, c.agent, c.mem, c.tmo
			if c.args != "" {
				req.Args = json.RawMessage(c.args)
			}
			res := execOK(t, b, req)
			if c.kind == "any" {
				if res.Success {
					t.Fatalf("bomb succeeded: %+v", res)
				}
				t.Logf("contained: kind=%s err=%.200s", res.ErrorKind, res.Error)
				return
			}
			if c.kind != "" {
				if res.Success || res.ErrorKind != c.kind {
					t.Fatalf("got success=%v kind=%q err=%q, want kind %q", res.Success, res.ErrorKind, res.Error, c.kind)
				}
				return
			}
			if !res.Success || string(res.Output) != c.want {
				t.Fatalf("got success=%v output=%s err=%q (%s), want %s", res.Success, res.Output, res.Error, res.ErrorKind, c.want)
			}
			if c.stdout != "" && res.Stdout != c.stdout {
				t.Errorf("stdout = %q, want %q", res.Stdout, c.stdout)
			}
		})
	}
	// Session still healthy after the bombs.
	if res := execOK(t, b, shared.ExecuteRequest{Code: "return 40+2", SessionID: sid}); string(res.Output) != "42" {
		t.Errorf("after the bombs: %+v", res)
	}
}

// TestForgedTokens talks MCP to the runtime directly with hand-made tokens.
func TestForgedTokens(t *testing.T) {
	user := testUser(t) // first: its cleanup (leftover check) runs after the backend's Shutdown
	b := newBackend(t)
	sid := openSession(t, b, user)
	s := openedSession(t, b, sid)
	rtclienttest.ForgedTokens(t, s.mcp, s.secret, user, sid)
}

func TestContainerKilledMidCall(t *testing.T) {
	user := testUser(t) // first: its cleanup (leftover check) runs after the backend's Shutdown
	b := newBackend(t)
	dc := requireDocker(t)
	sid := openSession(t, b, user)
	cid := openedSession(t, b, sid).containerID

	errc := make(chan error, 1)
	started := make(chan struct{})
	var once sync.Once
	go func() {
		_, err := b.ExecuteStream(context.Background(), shared.ExecuteRequest{Code: "print('spinning', flush=True)\nwhile True:\n    pass", Timeout: 30 * time.Second, SessionID: sid},
			func(shared.OutputChunk) error { once.Do(func() { close(started) }); return nil })
		errc <- err
	}()
	select {
	case <-started:
	case err := <-errc:
		t.Fatalf("the call ended before the kill: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the call printed nothing within 20 s")
	}
	if _, err := dc.ContainerKill(context.Background(), cid, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		t.Fatalf("kill: %v", err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, shared.ErrUnavailable) && !errors.Is(err, shared.ErrPluginShutdown) {
			t.Fatalf("Execute after kill = %v, want ErrUnavailable/ErrPluginShutdown", err)
		}
		t.Logf("infrastructure error as expected: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("Execute did not return after the container was killed")
	}
	// The session keeps its id: the next call gets a fresh container.
	res, err := b.Execute(context.Background(), shared.ExecuteRequest{Code: "return 1", SessionID: sid})
	if err != nil || !res.Result.Success || !res.Result.StateLost {
		t.Fatalf("Execute after the container's death = %+v, %v; want success with state_lost", res.Result, err)
	}
	now := containersOf(t, dc, LabelSession+"="+sid)
	if len(now) != 1 || now[0] == cid {
		t.Errorf("containers of the session after the reopen: %v, want one that is not the killed %s", now, shortID(cid))
	}
}

func TestSessionlessExecute(t *testing.T) {
	user := testUser(t) // first: its cleanup (leftover check) runs after the backend's Shutdown
	b := newBackend(t)
	dc := requireDocker(t)
	res := execOK(t, b, shared.ExecuteRequest{Code: "return 6*7", UserID: user})
	if !res.Success || string(res.Output) != "42" {
		t.Fatalf("sessionless: %+v", res)
	}
	if left := containersOf(t, dc, LabelUser+"="+user); len(left) > 0 {
		t.Errorf("containers left after a sessionless call: %v", left)
	}
}

func TestReaperRemovesOrphans(t *testing.T) {
	user := testUser(t) // first: its cleanup (leftover check) runs after the backend's Shutdown
	b := newBackend(t)
	dc := requireDocker(t)
	// A pid that surely is gone: a process we started and reaped.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := ownerInfo{pid: cmd.Process.Pid, start: "1", host: b.owner.host}
	cc, hc := hardenedConfig(b.config(), dead, user, "orphan")
	hc.AutoRemove = false
	ctx := context.Background()
	created, err := dc.ContainerCreate(ctx, client.ContainerCreateOptions{Config: cc, HostConfig: hc, Name: "orqest-orphan-" + randomHex(3)})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	// And one of ours that must survive.
	sid := openSession(t, b, user)
	n, err := b.Reap(ctx)
	if err != nil {
		t.Fatalf("Reap: %v", err)
	}
	if n < 1 {
		t.Errorf("Reap removed %d containers, want >= 1", n)
	}
	if _, err := dc.ContainerInspect(ctx, created.ID, client.ContainerInspectOptions{}); err == nil {
		t.Errorf("orphan %s still exists", shortID(created.ID))
	}
	if left := containersOf(t, dc, LabelSession+"="+sid); len(left) != 1 {
		t.Errorf("live session's container: %v, want exactly one", left)
	}
}

// BenchmarkOpen measures session open: container create + start to MCP
// initialize, plus Close (reported separately as close-ms).
func BenchmarkOpenClose(b *testing.B) {
	user := testUser(b)
	be := newBackend(b)
	ctx := context.Background()
	var closeTotal time.Duration
	for i := 0; i < b.N; i++ {
		sid := "bench-" + randomHex(4)
		if _, err := be.Open(ctx, shared.OpenRequest{UserID: user, SessionID: sid}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		t0 := time.Now()
		if _, err := be.Close(ctx, shared.CloseRequest{SessionID: sid}); err != nil {
			b.Fatal(err)
		}
		closeTotal += time.Since(t0)
		b.StartTimer()
	}
	b.ReportMetric(float64(closeTotal.Milliseconds())/float64(b.N), "close-ms/op")
}

// BenchmarkExecuteWarm measures Execute of `return 1+1` in an open session.
func BenchmarkExecuteWarm(b *testing.B) {
	user := testUser(b)
	be := newBackend(b)
	sid := openSession(b, be, user)
	ctx := context.Background()
	req := shared.ExecuteRequest{Code: "return 1+1", SessionID: sid}
	if _, err := be.Execute(ctx, req); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		resp, err := be.Execute(ctx, req)
		if err != nil || !resp.Result.Success {
			b.Fatalf("%v %+v", err, resp.Result)
		}
	}
}

// TestMeasure prints session-open and warm-execute percentiles. It runs only
// with ORQEST_MEASURE=1 (speed is for `make bench`, not for unit tests).
func TestMeasure(t *testing.T) {
	if os.Getenv("ORQEST_MEASURE") != "1" {
		t.Skip("set ORQEST_MEASURE=1 to print open/execute percentiles")
	}
	user := testUser(t)
	b := newBackend(t)
	ctx := context.Background()
	pct := func(d []time.Duration, p float64) time.Duration {
		s := append([]time.Duration(nil), d...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return s[int(float64(len(s)-1)*p)]
	}
	var opens, closes, execs, overhead []time.Duration
	for i := 0; i < 15; i++ {
		sid := "m-" + randomHex(4)
		t0 := time.Now()
		if _, err := b.Open(ctx, shared.OpenRequest{UserID: user, SessionID: sid}); err != nil {
			t.Fatal(err)
		}
		opens = append(opens, time.Since(t0))
		if i == 0 {
			for j := 0; j < 40; j++ {
				t1 := time.Now()
				r, err := b.Execute(ctx, shared.ExecuteRequest{Code: "return 1+1", SessionID: sid})
				if err != nil || !r.Result.Success {
					t.Fatal(err, r)
				}
				if j > 0 {
					total := time.Since(t1)
					execs = append(execs, total)
					overhead = append(overhead, total-time.Duration(r.Result.DurationMS*float64(time.Millisecond)))
				}
			}
		}
		t2 := time.Now()
		if _, err := b.Close(ctx, shared.CloseRequest{SessionID: sid}); err != nil {
			t.Fatal(err)
		}
		closes = append(closes, time.Since(t2))
	}
	t.Logf("open  p50=%v p90=%v (n=%d)", pct(opens, .5), pct(opens, .9), len(opens))
	t.Logf("close p50=%v p90=%v", pct(closes, .5), pct(closes, .9))
	t.Logf("warm execute p50=%v p90=%v (n=%d)", pct(execs, .5), pct(execs, .9), len(execs))
	t.Logf("  of which outside the Python child (validator, MCP, JWT, attach) p50=%v p90=%v", pct(overhead, .5), pct(overhead, .9))
}

// TestBridgeMode covers the optional `network = "bridge"` mode: MCP over
// Streamable HTTP published on 127.0.0.1 only, bearer token per request,
// foreign Origin refused.
func TestBridgeMode(t *testing.T) {
	user := testUser(t)
	dc := requireDocker(t)
	b := NewBackend(hclog.NewNullLogger())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		b.Shutdown(ctx)
	})
	cfg, _ := json.Marshal(map[string]any{"image": testImage(), "network": "bridge"})
	ctx := context.Background()
	if _, err := b.Configure(ctx, shared.ConfigureRequest{Config: cfg}); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	info, _ := b.Info(ctx, shared.InfoRequest{})
	if info.Has(shared.CapNetworkIsolation) {
		t.Error("bridge mode still declares network_isolation")
	}
	sid := openSession(t, b, user)
	s := openedSession(t, b, sid)
	ins, err := dc.ContainerInspect(ctx, s.containerID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ins.Container.HostConfig.NetworkMode != "bridge" {
		t.Errorf("NetworkMode = %q", ins.Container.HostConfig.NetworkMode)
	}
	for port, binds := range ins.Container.HostConfig.PortBindings {
		for _, pb := range binds {
			if pb.HostIP.String() != "127.0.0.1" {
				t.Errorf("port %v bound on %v, want 127.0.0.1 only", port, pb.HostIP)
			}
		}
	}
	if res := execOK(t, b, shared.ExecuteRequest{Code: "return 1+1", SessionID: sid}); string(res.Output) != "2" {
		t.Fatalf("execute over HTTP: %+v", res)
	}

	post := func(origin, tok string) int {
		body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
		req, _ := http.NewRequest(http.MethodPost, s.endpoint, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST: %v", err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	good, _ := rtproto.Mint(s.secret, user, sid, "", time.Minute)
	forged, _ := rtproto.Mint([]byte(strings.Repeat("f", 32)), user, sid, "", time.Minute)
	if code := post("http://evil.example", good); code != http.StatusForbidden {
		t.Errorf("foreign Origin: HTTP %d, want 403", code)
	}
	if code := post("", ""); code != http.StatusUnauthorized {
		t.Errorf("no token: HTTP %d, want 401", code)
	}
	if code := post("", forged); code != http.StatusUnauthorized {
		t.Errorf("forged token: HTTP %d, want 401", code)
	}
	if code := post("http://localhost:3000", good); code != http.StatusOK {
		t.Errorf("loopback Origin + good token: HTTP %d, want 200", code)
	}
	if _, err := b.Close(ctx, shared.CloseRequest{SessionID: sid}); err != nil {
		t.Fatal(err)
	}
	if left := containersOf(t, dc, LabelSession+"="+sid); len(left) > 0 {
		t.Errorf("containers left: %v", left)
	}
}

// TestOwnerCrashLeavesNothing kills (SIGKILL) a process that holds an open
// session: the attach stream closes, the runtime sees EOF on stdin and
// exits, and AutoRemove removes the container. No reaper needed.
func TestOwnerCrashLeavesNothing(t *testing.T) {
	if os.Getenv("ORQEST_DOCKER_CRASH_HELPER") == "1" {
		return // the helper runs in TestCrashHelper
	}
	user := testUser(t)
	dc := requireDocker(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.v")
	cmd.Env = append(os.Environ(), "ORQEST_DOCKER_CRASH_HELPER=1", "ORQEST_CRASH_USER="+user)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	var got string
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(got, "SESSION-OPEN") && time.Now().Before(deadline) {
		n, err := out.Read(buf)
		got += string(buf[:n])
		if err != nil {
			break
		}
	}
	if !strings.Contains(got, "SESSION-OPEN") {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("helper did not open a session: %q", got)
	}
	if left := containersOf(t, dc, LabelUser+"="+user); len(left) != 1 {
		t.Fatalf("helper's containers: %v, want 1", left)
	}
	_ = cmd.Process.Kill() // SIGKILL: no Close, no Shutdown
	_ = cmd.Wait()
	for i := 0; i < 100; i++ {
		if len(containersOf(t, dc, LabelUser+"="+user)) == 0 {
			t.Logf("container gone %v after the owner was killed", time.Duration(i)*100*time.Millisecond)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("container still there 10s after its owner was SIGKILLed: %v", containersOf(t, dc, LabelUser+"="+user))
}

// TestCrashHelper is the process TestOwnerCrashLeavesNothing kills.
func TestCrashHelper(t *testing.T) {
	if os.Getenv("ORQEST_DOCKER_CRASH_HELPER") != "1" {
		t.Skip("helper process for TestOwnerCrashLeavesNothing")
	}
	b := NewBackend(nil)
	cfg, _ := json.Marshal(map[string]any{"image": testImage()})
	ctx := context.Background()
	if _, err := b.Configure(ctx, shared.ConfigureRequest{Config: cfg}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Open(ctx, shared.OpenRequest{UserID: os.Getenv("ORQEST_CRASH_USER"), SessionID: "crash"}); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("SESSION-OPEN\n")
	time.Sleep(2 * time.Minute)
}
