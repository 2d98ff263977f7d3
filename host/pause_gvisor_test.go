package host

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/plugin"
)

// gvisorPauseHost loads a host whose sandbox "g" is the gvisor plugin
// (built here) with sessions: the repository's agent runtime (bin/, `make
// runtime`), and the test's own data and paused directories. Without
// runsc or the runtime it skips, loudly; with ORQEST_REQUIRE_GVISOR=1 it
// fails instead.
func gvisorPauseHost(t *testing.T, pluginDir, dataDir, pausedDir string) *Sandbox {
	t.Helper()
	cfg, diags := ParseConfig(filepath.Join(t.TempDir(), "config.hcl"), []byte(`sandbox "g" {
  plugin = "gvisor"
  config {
    runtime    = "`+gvisorRuntime(t)+`"
    data_dir   = "`+dataDir+`"
    paused_dir = "`+pausedDir+`"
  }
}
`))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	h, err := Load(context.Background(), cfg, WithPluginDirs(pluginDir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	sb, err := h.Sandbox(context.Background(), "g")
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

func skipOrFailGVisor(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("ORQEST_REQUIRE_GVISOR") == "1" {
		t.Fatalf("ORQEST_REQUIRE_GVISOR=1 but %s", why)
	}
	t.Skipf("SKIPPING the host's gVisor pause test: %s", why)
}

func gvisorRuntime(t *testing.T) string {
	t.Helper()
	p, _ := filepath.Abs("../bin/orqest-agent-runtime")
	if _, err := os.Stat(p); err != nil {
		skipOrFailGVisor(t, p+" is missing (make runtime)")
	}
	return p
}

// The scenario on the real tier 3, through the host: a stateful
// session defines a name; PauseSession leaves no process of it running;
// the host closes (its plugin with it) and a new host resumes the session
// by its id; the name is still defined, state_lost false.
func TestGVisorPauseSurvivesHostRestart(t *testing.T) {
	if _, err := exec.LookPath("runsc"); err != nil {
		skipOrFailGVisor(t, "runsc is not installed")
	}
	gvisorRuntime(t)
	pluginDir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(pluginDir, plugin.PluginPrefix+"gvisor"), "./cmd/orqest-sandbox-plugin-gvisor")
	build.Dir = ".."
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build the gvisor plugin: %v\n%s", err, b)
	}
	data, paused := filepath.Join(t.TempDir(), "users"), filepath.Join(t.TempDir(), "paused")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	sb := gvisorPauseHost(t, pluginDir, data, paused)
	open, err := sb.Open(ctx, shared.OpenRequest{UserID: "erin"})
	if err != nil {
		t.Fatal(err)
	}
	id := open.SessionID
	if len(runscUnder(t, sb.PluginPID())) == 0 {
		t.Fatal("no runsc process under the plugin serves the open session: the check after the pause would prove nothing")
	}
	res, err := sb.Execute(ctx, shared.ExecuteRequest{SessionID: id, Code: "total = sum(range(10))\nreturn total", Stateful: true})
	if err != nil || !res.Success || string(res.Output) != "45" {
		t.Fatalf("defining a name: %+v %v", res, err)
	}
	p, err := sb.PauseSession(ctx, id)
	if err != nil || !p.Memory {
		t.Fatalf("PauseSession: %+v %v", p, err)
	}
	if pids := runscUnder(t, sb.PluginPID()); len(pids) > 0 {
		t.Errorf("runsc processes still serve the paused session: %v", pids)
	}
	if info, _ := sb.Session(id); info.State != SessionPaused {
		t.Errorf("the host's record: %+v", info)
	}
	sb.host.Close()

	sb2 := gvisorPauseHost(t, pluginDir, data, paused)
	r, err := sb2.ResumeSession(ctx, id)
	if err != nil || r.UserID != "erin" || r.StateLost {
		t.Fatalf("ResumeSession in a new host: %+v %v", r, err)
	}
	res, err = sb2.Execute(ctx, shared.ExecuteRequest{SessionID: id, Code: "return total + 1", Stateful: true})
	if err != nil || !res.Success || string(res.Output) != "46" || res.StateLost {
		t.Errorf("the name after pause, host restart and resume: %+v %v", res, err)
	}
	if err := sb2.CloseSession(ctx, id); err != nil {
		t.Error(err)
	}
	if ents, _ := os.ReadDir(paused); len(ents) != 0 {
		t.Errorf("saved state left after resume and close: %v", ents)
	}
}

// runscUnder lists the runsc processes (runsc, runsc-sandbox,
// runsc-gofer) descended from process root: the sandboxes a plugin runs.
func runscUnder(t *testing.T, root int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	parent := map[int]int{}
	runsc := map[int]bool{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		rest := string(st[strings.LastIndexByte(string(st), ')')+2:])
		f := strings.Fields(rest)
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		parent[pid], _ = strconv.Atoi(f[1])
		if cmd, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil {
			argv0, _, _ := strings.Cut(string(cmd), "\x00")
			runsc[pid] = strings.HasPrefix(filepath.Base(argv0), "runsc")
		}
	}
	var out []int
	for pid := range runsc {
		if !runsc[pid] {
			continue
		}
		for p, n := parent[pid], 0; p > 1 && n < 64; p, n = parent[p], n+1 {
			if p == root {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}
