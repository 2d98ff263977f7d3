package host

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/plugin"
)

// The session lifecycle on the real tier-2 backend: the docker plugin
// (bin/, else built here) with the runtime image.

// Labels of the docker plugin's session containers (plugins/docker).
const (
	dockerTierLabel    = "org.orqest.sandbox.tier=docker"
	dockerSessionLabel = "org.orqest.sandbox.session"
	dockerUserLabel    = "org.orqest.sandbox.user"
)

// dockerTestImage is the tier-2 image (ORQEST_DOCKER_IMAGE overrides it).
func dockerTestImage() string {
	if v := os.Getenv("ORQEST_DOCKER_IMAGE"); v != "" {
		return v
	}
	return "orqest/agent-runtime:0.1.0"
}

// dockerPluginDir returns a directory holding the docker plugin: bin/,
// else one it is built in.
func dockerPluginDir(t *testing.T) string {
	t.Helper()
	dir, _ := filepath.Abs("../bin")
	if _, err := os.Stat(filepath.Join(dir, plugin.PluginPrefix+"docker")); err != nil {
		dir = t.TempDir()
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, plugin.PluginPrefix+"docker"), "./cmd/orqest-sandbox-plugin-docker")
		cmd.Dir = ".."
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build ./cmd/orqest-sandbox-plugin-docker: %v\n%s", err, b)
		}
	}
	return dir
}

// dockerHost loads a host with one docker sandbox "docker" (top: top-level
// HCL; attrs: the sandbox's attributes besides plugin and config) and
// removes users' volumes when the test ends. Without the engine or the
// image it skips, loudly; with ORQEST_REQUIRE_DOCKER=1 it fails instead.
func dockerHost(t *testing.T, top, attrs string, users ...string) (*Host, *Sandbox) {
	t.Helper()
	if out, err := exec.Command("docker", "image", "inspect", dockerTestImage()).CombinedOutput(); err != nil {
		msg := fmt.Sprintf("docker or the runtime image %s is unavailable (run `make image`): %v %s", dockerTestImage(), err, out)
		if os.Getenv("ORQEST_REQUIRE_DOCKER") == "1" {
			t.Fatal(msg)
		}
		t.Skip("SKIPPING: " + msg)
	}
	dir := dockerPluginDir(t)
	t.Cleanup(func() {
		if len(users) > 0 {
			args := []string{"volume", "rm", "-f"}
			for _, u := range users {
				args = append(args, "orqest-user-"+u)
			}
			_ = exec.Command("docker", args...).Run()
		}
	})
	src := fmt.Sprintf("%s\nsandbox \"docker\" {\n  plugin = \"docker\"\n  %s\n  config { image = %q }\n}\n", top, attrs, dockerTestImage())
	cfg, diags := ParseConfig(filepath.Join(t.TempDir(), "config.hcl"), []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	h, err := Load(context.Background(), cfg, WithPluginDirs(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	sb, err := h.Sandbox(context.Background(), "docker")
	if err != nil {
		t.Fatal(err)
	}
	return h, sb
}

func testUser(prefix string) string {
	b := make([]byte, 4)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// containers lists the containers carrying label (key=value), running or
// not.
func containers(t *testing.T, label string) []string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label="+label).Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	return strings.Fields(string(out))
}

// waitContainers polls until the containers carrying label number want.
func waitContainers(t *testing.T, label string, want int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := containers(t, label)
		if len(got) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d containers with %s after %s, want %d: %v", len(got), label, within, want, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A docker session unused for idle_timeout is closed by the host and its
// container removed; the next call on its id runs in a new container and
// says StateLost (the stateful interpreter's names are gone).
func TestDockerIdleSessionReclaimed(t *testing.T) {
	user := testUser("orqtest-idle-")
	_, sb := dockerHost(t, "", `idle_timeout = "2s"`, user)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	open, err := sb.Open(ctx, shared.OpenRequest{UserID: user})
	if err != nil {
		t.Fatal(err)
	}
	id := open.SessionID
	t.Cleanup(func() { sb.CloseSession(context.Background(), id) })
	if res, err := sb.Execute(ctx, shared.ExecuteRequest{Code: "x = 41\nreturn x", SessionID: id, UserID: user, Stateful: true}); err != nil || !res.Success {
		t.Fatalf("stateful call: %+v %v", res, err)
	}
	label := dockerSessionLabel + "=" + id
	if n := len(containers(t, label)); n != 1 {
		t.Fatalf("%d containers for the session, want 1", n)
	}
	info := waitState(t, sb, id, SessionReclaimed, 30*time.Second)
	if info.Reason != ReclaimIdle {
		t.Errorf("reclaimed %+v", info)
	}
	waitContainers(t, label, 0, 30*time.Second)

	res, err := sb.Execute(ctx, shared.ExecuteRequest{Code: "try:\n    return x\nexcept NameError:\n    return 'fresh'", SessionID: id, UserID: user, Stateful: true})
	if err != nil || !res.Success || string(res.Output) != `"fresh"` || !res.StateLost {
		t.Fatalf("call after the reclaim: %+v %v; want success, a fresh interpreter and StateLost", res, err)
	}
	if n := len(containers(t, label)); n != 1 {
		t.Errorf("%d containers for the reopened session, want 1", n)
	}
	if err := sb.CloseSession(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitContainers(t, label, 0, 30*time.Second)
}

// Killing the docker plugin process: the next call on a session the host
// opened runs in the relaunched plugin, in a new container of the same
// session id, and says StateLost; the dead plugin's container is reaped.
func TestDockerPluginKilledSessionReopens(t *testing.T) {
	user := testUser("orqtest-kill-")
	_, sb := dockerHost(t, "", "", user)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	open, err := sb.Open(ctx, shared.OpenRequest{UserID: user})
	if err != nil {
		t.Fatal(err)
	}
	id := open.SessionID
	t.Cleanup(func() { sb.CloseSession(context.Background(), id) })
	if res, err := sb.Execute(ctx, shared.ExecuteRequest{Code: "return 1", SessionID: id, UserID: user}); err != nil || !res.Success || res.StateLost {
		t.Fatalf("first call: %+v %v", res, err)
	}
	pid := sb.PluginPID()
	killPlugin(t, pid)
	res, err := sb.Execute(ctx, shared.ExecuteRequest{Code: "return 2", SessionID: id, UserID: user})
	if err != nil || !res.Success || string(res.Output) != "2" || !res.StateLost {
		t.Fatalf("call after the plugin was killed: %+v %v; want success with StateLost", res, err)
	}
	if sb.Launches() != 2 {
		t.Errorf("launches = %d, want 2", sb.Launches())
	}
	// The killed plugin's container went with the relaunch (the new
	// process reaps what a dead owner left): one container, the new one.
	waitContainers(t, dockerSessionLabel+"="+id, 1, 30*time.Second)
	if err := sb.CloseSession(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitContainers(t, dockerUserLabel+"="+user, 0, 30*time.Second)
}

// 100 identities opening at once against max_sessions = 4: four sessions,
// 96 refusals that name max_sessions, and no container left afterwards.
func TestDockerMaxSessionsManyIdentities(t *testing.T) {
	users := make([]string, 100)
	for i := range users {
		users[i] = testUser(fmt.Sprintf("orqtest-cap%02d-", i))
	}
	h, sb := dockerHost(t, "sessions {\n  max_sessions = 4\n}", "", users...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := sb.Start(ctx); err != nil { // the plugin's launch is not what is measured
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var opened []string
	var refusals []error
	for _, u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := sb.Open(ctx, shared.OpenRequest{UserID: u})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				refusals = append(refusals, err)
				return
			}
			opened = append(opened, r.SessionID)
		}()
	}
	wg.Wait()
	if len(opened) != 4 || len(refusals) != 96 {
		t.Fatalf("%d sessions, %d refusals; want 4 and 96 (first refusal: %v)", len(opened), len(refusals), first(refusals))
	}
	for _, err := range refusals {
		var lim *SessionLimitError
		if !errors.As(err, &lim) || !errors.Is(err, shared.ErrFailedPrecondition) || lim.Limit != "max_sessions" || lim.Max != 4 ||
			!strings.Contains(err.Error(), "max_sessions 4 reached") || !strings.Contains(err.Error(), "close_session") {
			t.Fatalf("refusal %v, want a SessionLimitError naming max_sessions 4", err)
		}
	}
	if n := gaugeValue(t, h, "orqest_sessions_open"); n != 4 {
		t.Errorf("orqest_sessions_open = %v", n)
	}
	for _, id := range opened {
		if err := sb.CloseSession(ctx, id); err != nil {
			t.Errorf("close %s: %v", id, err)
		}
	}
	h.Close()
	// No container of these identities is left, running or not.
	out, err := exec.Command("docker", "ps", "-a", "--filter", "label="+dockerTierLabel, "--format", `{{.Label "`+dockerUserLabel+`"}}`).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range strings.Fields(string(out)) {
		for _, mine := range users {
			if u == mine {
				t.Errorf("a container of %s is left", u)
			}
		}
	}
}

func first(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return errs[0]
}
