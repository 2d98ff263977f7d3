package inprocess

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orqest/sandbox/host"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/plugin"
)

// The real plugin binary, built once for the tests that go through the host
// (a wedged interpreter must end its process, which a test process cannot).
var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	host.CleanupClients()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

func pluginDir(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "orqest-inprocess-test-")
		if err != nil {
			buildErr = err
			return
		}
		binDir = dir
		out, err := exec.Command("go", "build", "-o", filepath.Join(dir, plugin.PluginPrefix+"inprocess"), "../../cmd/orqest-sandbox-plugin-inprocess").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("building the plugin: %v", buildErr)
	}
	return binDir
}

// loadHost writes an HCL policy with one sandbox "t0" on the inprocess
// plugin and loads it.
func loadHost(t testing.TB, sandboxBody string) (*host.Host, *host.Sandbox, string) {
	t.Helper()
	dir := pluginDir(t)
	cfgDir := t.TempDir()
	path := filepath.Join(cfgDir, "config.hcl")
	src := fmt.Sprintf("plugin_dir = %q\n\nsandbox \"t0\" {\n  plugin = \"inprocess\"\n%s}\n", dir, sandboxBody)
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := host.LoadFile(context.Background(), path)
	if err != nil {
		t.Fatalf("LoadFile: %v\n%s", err, src)
	}
	t.Cleanup(func() { h.Close() })
	sb, err := h.Sandbox(context.Background(), "t0")
	if err != nil {
		t.Fatal(err)
	}
	return h, sb, path
}

func waitGone(t testing.TB, pid int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err != nil || strings.Contains(string(b), ") Z ") {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Errorf("plugin process %d still alive after %v", pid, within)
}

// TestHostUnsafeRefusal: through the host, a sandbox block without
// unsafe = true is refused at start with ErrFailedPrecondition.
func TestHostUnsafeRefusal(t *testing.T) {
	_, sb, path := loadHost(t, "")
	err := sb.Start(context.Background())
	if !errors.Is(err, shared.ErrFailedPrecondition) {
		t.Fatalf("Start without unsafe = true: %v, want ErrFailedPrecondition", err)
	}
	if !strings.Contains(err.Error(), "unsafe = true") {
		t.Errorf("refusal does not say how to opt in: %v", err)
	}
	// The refusal names the HCL file and line of the sandbox block.
	if !strings.Contains(err.Error(), path+":") {
		t.Errorf("refusal does not name %s:line:col: %v", path, err)
	}
	_, err = sb.Execute(context.Background(), shared.ExecuteRequest{Code: "return 1"})
	if !errors.Is(err, shared.ErrFailedPrecondition) {
		t.Errorf("Execute without unsafe = true: %v, want ErrFailedPrecondition", err)
	}
}

// TestHostTimeouts: pure-Python loops are stopped by the watchdog without
// restarting the plugin.
func TestHostTimeouts(t *testing.T) {
	_, sb, _ := loadHost(t, "  unsafe = true\n")
	ctx := context.Background()
	if err := sb.Start(ctx); err != nil {
		t.Fatal(err)
	}
	pid := sb.PluginPID()
	for _, code := range []string{"while True:\n    pass", "import time\ntime.sleep(60)"} {
		start := time.Now()
		res, err := sb.Execute(ctx, shared.ExecuteRequest{Code: code, Timeout: 300 * time.Millisecond, AllowedImports: []string{"time"}})
		if err != nil {
			t.Fatalf("%q: %v", code, err)
		}
		if res.ErrorKind != shared.KindTimeout {
			t.Fatalf("%q: %+v", code, res)
		}
		t.Logf("%q returned %v after its deadline", code, (time.Since(start) - 300*time.Millisecond).Round(10*time.Microsecond))
	}
	if p := sb.PluginPID(); p != pid || sb.Launches() != 1 {
		t.Errorf("the plugin was restarted (pid %d -> %d, %d launches) for an interruptible loop", pid, p, sb.Launches())
	}
}

// TestHostWedgedCallRestartsPlugin: a loop inside C code cannot be
// interrupted; after the grace period the call returns error_kind timeout
// saying the backend was restarted, the plugin process ends, and the next
// call runs on a fresh one. The host never hangs.
func TestHostWedgedCallRestartsPlugin(t *testing.T) {
	_, sb, _ := loadHost(t, "  unsafe = true\n  config {\n    grace_ms = 300\n  }\n")
	ctx := context.Background()
	if err := sb.Start(ctx); err != nil {
		t.Fatal(err)
	}
	pid := sb.PluginPID()
	for _, code := range []string{
		"return sum(range(10**12))",
		// Catches every interrupt: only the process exit stops it.
		"while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass",
	} {
		start := time.Now()
		res, err := sb.Execute(ctx, shared.ExecuteRequest{Code: code, Timeout: 300 * time.Millisecond})
		elapsed := time.Since(start)
		if err != nil {
			t.Fatalf("%q: Go error %v, want a timeout result", code, err)
		}
		if res.ErrorKind != shared.KindTimeout || !strings.Contains(res.Error, "restarted") {
			t.Fatalf("%q: %+v, want error_kind timeout saying the backend was restarted", code, res)
		}
		t.Logf("%q: returned after %v (timeout 300ms + grace 300ms): %s", code, elapsed.Round(time.Millisecond), res.Error)
		if elapsed > 3*time.Second {
			t.Errorf("took %v", elapsed)
		}
		waitGone(t, pid, 3*time.Second)
		res, err = sb.Execute(ctx, shared.ExecuteRequest{Code: "return 1 + 1"})
		if err != nil || !res.Success || string(res.Output) != "2" {
			t.Fatalf("next call after the restart: %+v %v", res, err)
		}
		if p := sb.PluginPID(); p == pid || p == 0 {
			t.Errorf("pid after restart %d (before %d)", p, pid)
		}
		pid = sb.PluginPID()
	}
	if n := sb.Launches(); n != 3 {
		t.Errorf("launches = %d, want 3", n)
	}
}

// TestHostMemoryLimit: memory_limit_mb caps the plugin process; a
// MemoryError ends the call and the plugin keeps serving.
func TestHostMemoryLimit(t *testing.T) {
	_, sb, _ := loadHost(t, "  unsafe = true\n  config {\n    memory_limit_mb = 512\n  }\n")
	ctx := context.Background()
	if err := sb.Start(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := sb.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("capabilities seen by the host (Info is fetched before Configure): %v", info.Capabilities)
	pid := sb.PluginPID()
	for _, code := range []string{"x = bytearray(1024 ** 3)\nreturn len(x)", "x = []\nwhile True:\n    x.append(bytearray(1024 * 1024))"} {
		res, err := sb.Execute(ctx, shared.ExecuteRequest{Code: code, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatalf("%q: %v", code, err)
		}
		if res.ErrorKind != shared.KindMemory {
			t.Fatalf("%q: %+v, want error_kind memory", code, res)
		}
		if res.Limits.MemoryMB != 512 {
			t.Errorf("limits.memory_mb = %d, want the process cap 512", res.Limits.MemoryMB)
		}
		res, err = sb.Execute(ctx, shared.ExecuteRequest{Code: "return 'ok'"})
		if err != nil || !res.Success {
			t.Fatalf("after a MemoryError: %+v %v", res, err)
		}
	}
	if sb.PluginPID() != pid {
		t.Errorf("the plugin was restarted by a MemoryError")
	}
}

// TestSharedServingNeedsUnsafeShared: a long-lived server with many callers
// refuses tier 0 (one interpreter for every call) unless the sandbox block
// says unsafe_shared = true.
func TestSharedServingNeedsUnsafeShared(t *testing.T) {
	ctx := context.Background()
	_, sb, _ := loadHost(t, "  unsafe = true\n")
	err := sb.CheckSharedServing(ctx)
	if !errors.Is(err, shared.ErrFailedPrecondition) || !strings.Contains(err.Error(), "unsafe_shared = true") {
		t.Fatalf("CheckSharedServing = %v, want ErrFailedPrecondition naming unsafe_shared", err)
	}
	_, sb, _ = loadHost(t, "  unsafe = true\n  unsafe_shared = true\n")
	if err := sb.CheckSharedServing(ctx); err != nil {
		t.Fatalf("with unsafe_shared = true: %v", err)
	}
}
