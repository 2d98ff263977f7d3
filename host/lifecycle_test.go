package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/plugin"
)

// The plugin lifecycle against testdata/lifeplugin, a real plugin process
// that misbehaves on demand ($ORQEST_TEST_LIFE).

var (
	lifePluginOnce sync.Once
	lifePluginDir  string
	lifePluginErr  error
)

// lifeHost loads a host whose sandbox "s" runs the life plugin with the
// top-level HCL top (a policy block) and the sandbox block's attributes
// attrs; mode goes to $ORQEST_TEST_LIFE. It
// returns the host, the sandbox and the file the plugin lists its
// children's pids in; the test's cleanup ends those children.
func lifeHost(t *testing.T, mode, top, attrs string, opts ...Option) (*Host, *Sandbox, string) {
	t.Helper()
	lifePluginOnce.Do(func() {
		dir, err := os.MkdirTemp(testTmpDir, "orqest-life-plugin-")
		if err != nil {
			lifePluginErr = err
			return
		}
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, plugin.PluginPrefix+"life"), "./host/testdata/lifeplugin")
		cmd.Dir = ".."
		if b, err := cmd.CombinedOutput(); err != nil {
			lifePluginErr = fmt.Errorf("build the life test plugin: %v\n%s", err, b)
			return
		}
		lifePluginDir = dir
	})
	if lifePluginErr != nil {
		t.Fatal(lifePluginErr)
	}
	pids := filepath.Join(t.TempDir(), "pids")
	src := top + "\nsandbox \"s\" {\n  plugin = \"life\"\n" + attrs + "\n}\n"
	cfg, diags := ParseConfig(filepath.Join(t.TempDir(), "config.hcl"), []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	opts = append([]Option{WithPluginDirs(lifePluginDir), WithPluginEnv("ORQEST_TEST_LIFE="+mode, "ORQEST_TEST_LIFE_PIDS="+pids)}, opts...)
	h, err := Load(context.Background(), cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	// First (cleanups run last in, first out): a child left holding the
	// plugin's pipes must not keep Close waiting.
	t.Cleanup(func() {
		for _, pid := range listedPids(pids) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	sb, err := h.Sandbox(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	return h, sb, pids
}

// listedPids reads the pids the life plugin listed in file.
func listedPids(file string) []int {
	b, _ := os.ReadFile(file)
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// within runs fn and fails the test when it has not returned after d (fn
// is left running: the test is failing anyway).
func within(t *testing.T, d time.Duration, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s has not returned after %s", what, d)
	}
}

// A plugin that never completes its handshake — it hangs, it hangs with a
// child holding its pipes (in its process group or out of it), it writes
// garbage, it answers the handshake but not Info — fails the launch within
// the start timeout plus a little, with ErrUnavailable, and leaves no
// process of its group behind.
func TestLaunchBoundedWithoutHandshake(t *testing.T) {
	const start = time.Second
	for _, mode := range []string{"hang", "hang-setsid", "garbage", "info-hang"} {
		t.Run(mode, func(t *testing.T) {
			h, sb, pids := lifeHost(t, mode, "", "", WithStartTimeout(start))
			var err error
			within(t, start+5*time.Second, "Start", func() { err = sb.Start(context.Background()) })
			if !errors.Is(err, shared.ErrUnavailable) {
				t.Fatalf("Start: %v, want ErrUnavailable", err)
			}
			if mode == "hang" || mode == "garbage" {
				kids := listedPids(pids)
				if len(kids) == 0 {
					t.Fatal("the plugin listed no child")
				}
				for _, k := range kids {
					waitDead(t, k) // killed with the plugin's process group
				}
			}
			within(t, 10*time.Second, "Close", func() { h.Close() })
		})
	}
}

// A launch gives up when its caller's context ends, before the start
// timeout.
func TestLaunchFollowsContext(t *testing.T) {
	_, sb, pids := lifeHost(t, "hang", "", "", WithStartTimeout(time.Minute))
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// Cancel once the plugin is running (it lists its child then).
		for deadline := time.Now().Add(10 * time.Second); len(listedPids(pids)) == 0 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
	}()
	var err error
	within(t, 10*time.Second, "Start", func() { err = sb.Start(ctx) })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Start: %v, want context.Canceled", err)
	}
	for _, k := range listedPids(pids) {
		waitDead(t, k)
	}
}

// Close is bounded even when the plugin cannot answer go-plugin's request
// to exit (it is stopped, SIGSTOP): after the shutdown timeout its process
// group is killed.
func TestCloseBoundedWhenPluginWedged(t *testing.T) {
	h, sb, _ := lifeHost(t, "", "", "")
	pid := pluginPid(t, sb)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	within(t, shutdownTimeout+5*time.Second, "Close", func() { h.Close() })
	waitDead(t, pid)
}

// pluginPid asks the life plugin for its pid, through an execution.
func pluginPid(t *testing.T, sb *Sandbox) int {
	t.Helper()
	res, err := sb.Execute(context.Background(), shared.ExecuteRequest{Code: "pid"})
	if err != nil || !res.Success {
		t.Fatalf("pid: %+v %v", res, err)
	}
	pid, err := strconv.Atoi(string(res.Output))
	if err != nil {
		t.Fatalf("pid %s: %v", res.Output, err)
	}
	return pid
}

// A call that arrives right after the plugin was killed, before its
// process is even gone, goes to a relaunched plugin instead of failing:
// the request never reached the dying one.
func TestCallRightAfterKillRelaunches(t *testing.T) {
	_, sb, _ := lifeHost(t, "", "", "")
	pid := pluginPid(t, sb)
	for i := range 20 {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		next := pluginPid(t, sb) // at once: no waiting for the death
		if next == pid {
			t.Fatalf("round %d: the call ran in the killed plugin %d", i, pid)
		}
		pid = next
	}
	if n := sb.Launches(); n != 21 {
		t.Errorf("launches = %d, want 21", n)
	}
}

// The host owns the wall clock of every backend: a plugin that sleeps 8 s
// under a 1 s policy, ignoring its context and its timeout, gets a timeout
// result after the timeout and two graces (1 s each), not a success after
// 8 s, and is killed so that the execution surely ends; the next call runs
// in a new plugin. One that stops when its context ends is told to at the
// first grace and stays.
func TestHostEndsOverrunningExecution(t *testing.T) {
	const policy = "policy \"default\" {\n  timeout = \"1s\"\n}\n"
	for _, c := range []struct {
		name       string
		honoursCtx bool
		why        string
	}{
		{"ignores its context", false, "was killed"},
		{"stops when told", true, "stopped when the host told it to"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, sb, _ := lifeHost(t, "", policy, "")
			pid := pluginPid(t, sb)
			var res shared.ExecutionResult
			var err error
			// timeout 1 s + grace 1 s + grace 1 s, and room for a loaded machine.
			within(t, 6*time.Second, "Execute", func() {
				res, err = sb.Execute(context.Background(), shared.ExecuteRequest{Code: "sleep", Args: []byte(fmt.Sprintf(`{"ms": 8000, "ctx": %v}`, c.honoursCtx))})
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Success || res.ErrorKind != shared.KindTimeout || !strings.Contains(res.Error, "the host's wall clock ended it") || !strings.Contains(res.Error, c.why) {
				t.Fatalf("result %+v, want a timeout the host's wall clock ended (%s)", res, c.why)
			}
			if res.Limits.TimeoutMS != 1000 {
				t.Errorf("limits %+v", res.Limits)
			}
			next := pluginPid(t, sb)
			if c.honoursCtx {
				if next != pid || sb.Launches() != 1 {
					t.Errorf("the plugin that stopped was replaced: pid %d -> %d, %d launches", pid, next, sb.Launches())
				}
				return
			}
			waitDead(t, pid)
			if next == pid || sb.Launches() != 2 {
				t.Errorf("pid %d -> %d, %d launches: want the killed plugin relaunched", pid, next, sb.Launches())
			}
		})
	}
}

// A plugin process that ends during a call after the call's timeout has
// passed gives the timeout the code earned, on any tier (tier 0 ends its
// process so when a C-level loop cannot be interrupted), and the next call
// relaunches it. One that ends before the timeout stays an infrastructure
// error.
func TestPluginDeathAfterTimeoutIsTimeout(t *testing.T) {
	const policy = "policy \"default\" {\n  timeout = \"1s\"\n}\n"
	_, sb, _ := lifeHost(t, "", policy, "")
	ctx := context.Background()
	res, err := sb.Execute(ctx, shared.ExecuteRequest{Code: "sleep", Args: []byte(`{"ms": 1200, "exit": true}`)})
	if err != nil || res.Success || res.ErrorKind != shared.KindTimeout || !strings.Contains(res.Error, "the plugin process ended during the call, after the timeout") {
		t.Fatalf("death after the timeout: %+v %v, want a timeout", res, err)
	}
	pluginPid(t, sb) // relaunched
	_, err = sb.Execute(ctx, shared.ExecuteRequest{Code: "sleep", Args: []byte(`{"ms": 10, "exit": true}`)})
	if !errors.Is(err, shared.ErrPluginShutdown) {
		t.Fatalf("death before the timeout: %v, want ErrPluginShutdown", err)
	}
	if n := sb.Launches(); n != 2 {
		t.Errorf("launches = %d, want 2", n)
	}
}

// A backend's refusal of a config attribute is a diagnostic at the
// attribute (file:line:col of its value inside config {}), as the policy
// docs promise; a refusal that names no attribute points at the config
// block, not the sandbox block. Both with the subprocess plugin (mode) and
// the life plugin.
func TestConfigRefusalPointsAtAttribute(t *testing.T) {
	const block = "  config {\n    colour  = \"red\"\n    flavour = \"sour\"\n  }"
	_, sb, _ := lifeHost(t, "", "", block)
	err := sb.Start(context.Background())
	out := render(t, err)
	if !strings.Contains(out, "config.hcl:6:15: Error: Invalid plugin configuration") || !strings.Contains(out, `plugin "life" refused flavour`) {
		t.Errorf("flavour: %s", out)
	}

	_, sb, _ = lifeHost(t, "", "", "  config {\n    colour = \"none\"\n  }")
	err = sb.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "config.hcl:4:3: sandbox \"s\": plugin \"life\" refused its configuration") || !errors.Is(err, shared.ErrInvalidArgument) {
		t.Errorf("colour: %v, want it at the config block (4:3), wrapping ErrInvalidArgument", err)
	}

	h := newHost(t, "sandbox \"t\" {\n  plugin = \"subprocess\"\n  config {\n    mode = \"bogus\"\n  }\n}\n")
	out = render(t, h.StartAll(context.Background()))
	if !strings.Contains(out, "config.hcl:4:12: Error: Invalid plugin configuration") || !strings.Contains(out, `plugin "subprocess" refused mode: unknown mode "bogus"`) {
		t.Errorf("subprocess mode: %s", out)
	}
}

// The docker plugin's refusals of its config block are diagnostics at the
// attribute too, including a nested block's (no engine is needed: these
// are refused before the engine is asked).
func TestDockerConfigRefusalPointsAtAttribute(t *testing.T) {
	dir := dockerPluginDir(t)
	for _, c := range []struct{ block, pos, want string }{
		{"  config {\n    network = \"host\"\n  }", "config.hcl:4:15:", `plugin "docker" refused network: "host": want "none"`},
		{"  config {\n    memory_mb = -1\n  }", "config.hcl:4:17:", `plugin "docker" refused memory_mb: a negative limit`},
		{"  config {\n    pool {\n      size = -2\n    }\n  }", "config.hcl:5:14:", `plugin "docker" refused pool.size`},
	} {
		src := "sandbox \"d\" {\n  plugin = \"docker\"\n" + c.block + "\n}\n"
		cfg, diags := ParseConfig(filepath.Join(t.TempDir(), "config.hcl"), []byte(src))
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		h, err := Load(context.Background(), cfg, WithPluginDirs(dir))
		if err != nil {
			t.Fatal(err)
		}
		out := render(t, h.StartAll(context.Background()))
		h.Close()
		if !strings.Contains(out, c.pos+" Error: Invalid plugin configuration") || !strings.Contains(out, c.want) {
			t.Errorf("%s:\n%s", c.block, out)
		}
	}
}
