package docker

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orqest/sandbox/internal/rtclient"
	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/internal/wheeltest"
	"github.com/orqest/sandbox/shared"
)

// TestDependencies runs the whole dependency path against the real engine:
// a wheel the test builds (archive/zip) in a wheel_dir mounted read-only,
// allowed_packages from Configure, a per-agent venv on the /workspace tmpfs.
func TestDependencies(t *testing.T) {
	user := testUser(t)
	dc := requireDocker(t)
	wheels := t.TempDir()
	for _, w := range []wheeltest.Wheel{
		{Name: "orqdemo", Version: "1.0.0", Files: map[string]string{"orqdemo/__init__.py": "from orqhelper import shout\n\ndef greet(n):\n    return shout('hello ' + n)\n"},
			Requires: []string{"orqhelper"}},
		{Name: "orqhelper", Version: "1.0.0", Files: map[string]string{"orqhelper.py": "def shout(s):\n    return s.upper()\n"}},
		{Name: "orqsecret", Version: "1.0.0", Files: map[string]string{"orqsecret.py": "X = 1\n"}},
	} {
		if _, err := wheeltest.Build(wheels, w); err != nil {
			t.Fatal(err)
		}
	}
	b := wheelBackend(t, wheels, "orqdemo", "OrqHelper")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if info, _ := b.Info(ctx, shared.InfoRequest{}); !info.Has(shared.CapDependencies) {
		t.Error("Info does not declare the dependencies capability")
	}
	sid := openSession(t, b, user)

	// The wheel directory is a read-only bind mount.
	ins := inspectSession(t, ctx, dc, b, sid)
	s := openedSession(t, b, sid)
	var wheelMount bool
	for _, m := range ins.Container.Mounts {
		if m.Destination == rtproto.WheelMount && m.Type == mount.TypeBind && !m.RW && m.Source == wheels {
			wheelMount = true
		}
	}
	if !wheelMount {
		t.Errorf("no read-only bind mount of %s at %s: %+v", wheels, rtproto.WheelMount, ins.Container.Mounts)
	}

	exec := func(agent string, imports, deps []string, code string) (shared.ExecutionResult, error) {
		resp, err := b.Execute(ctx, shared.ExecuteRequest{Code: code, SessionID: sid, AgentID: agent, AllowedImports: imports, Dependencies: deps, Timeout: 20 * time.Second})
		return resp.Result, err
	}

	// Allowed package (and its allowed requirement) installed, imported.
	start := time.Now()
	res, err := exec("agentA", []string{"orqdemo"}, []string{"orqdemo"}, "import orqdemo\nreturn orqdemo.greet('a')")
	if err != nil || !res.Success || string(res.Output) != `"HELLO A"` {
		t.Fatalf("agent A with orqdemo: err=%v res=%+v", err, res)
	}
	t.Logf("first call: venv + 2 wheels + run: %v", time.Since(start))
	start = time.Now()
	res, err = exec("agentA", []string{"orqdemo"}, nil, "import orqdemo\nreturn orqdemo.greet('again')")
	if err != nil || !res.Success || string(res.Output) != `"HELLO AGAIN"` {
		t.Fatalf("agent A again: err=%v res=%+v", err, res)
	}
	t.Logf("warm call in the venv: %v", time.Since(start))

	// Not in allowed_packages (the wheel exists): refused by the plugin...
	_, err = exec("agentA", []string{"orqsecret"}, []string{"orqsecret"}, "import orqsecret\nreturn 1")
	if !errors.Is(err, shared.ErrPermissionDenied) || !strings.Contains(err.Error(), `"orqsecret"`) {
		t.Fatalf("orqsecret: want ErrPermissionDenied naming it, got %v", err)
	}
	// ... and by the runtime when the plugin's check is bypassed.
	tok, _ := rtproto.Mint(s.secret, s.user, s.id, rtproto.ScopeAgent, time.Minute)
	direct := func(a rtproto.ExecuteArgs) error {
		out, err := s.mcp.CallTool(ctx, &mcp.CallToolParams{Name: rtproto.ToolExecute, Meta: mcp.Meta{rtproto.MetaAuthorization: "Bearer " + tok}, Arguments: a})
		if err != nil {
			t.Fatalf("CallTool: %v", err)
		}
		if !out.IsError {
			return nil
		}
		return rtclient.ToolErr(out)
	}
	if err := direct(rtproto.ExecuteArgs{Code: "return 1", AgentID: "agentA", Dependencies: []string{"orqsecret"}}); !errors.Is(err, shared.ErrPermissionDenied) || !strings.Contains(err.Error(), "orqsecret") {
		t.Fatalf("runtime: orqsecret: want ErrPermissionDenied, got %v", err)
	}
	// agent_id "../escape" is refused before any filesystem work, on both sides.
	if _, err := exec("../escape", []string{"orqdemo"}, []string{"orqdemo"}, "return 1"); !errors.Is(err, shared.ErrInvalidArgument) {
		t.Fatalf("plugin: ../escape: %v", err)
	}
	if err := direct(rtproto.ExecuteArgs{Code: "return 1", AgentID: "../escape", Dependencies: []string{"orqdemo"}}); !errors.Is(err, shared.ErrInvalidArgument) {
		t.Fatalf("runtime: ../escape: %v", err)
	}

	// Agent B does not see agent A's venv.
	res, err = exec("agentB", []string{"orqdemo"}, nil, "import orqdemo\nreturn 1")
	if err != nil || res.Success || !strings.Contains(res.Error, "orqdemo") {
		t.Fatalf("agent B imported agent A's package: err=%v res=%+v", err, res)
	}
	// What exists under /workspace: A's venv only, nothing from the refused calls.
	res, err = exec("agentC", []string{"os"}, nil, "import os\nreturn [sorted(os.listdir('/workspace')), sorted(os.listdir('/workspace/venvs'))]")
	if err != nil {
		t.Fatal(err)
	}
	if res.Success && string(res.Output) != `[["agents","venvs"],["agentA"]]` {
		t.Errorf("/workspace after the calls: %s", res.Output)
	} else if !res.Success {
		t.Logf("listing /workspace is refused in the child (%s); skipped", res.Error)
	}
}

// A native wheel (a C extension the test compiles against Debian's
// CPython 3.11, the image's) from wheel_dir installs into the agent's
// directory of the exec-allowed tmpfs and imports under the seal; that
// tmpfs allows exec and /workspace still does not; the agent's code
// (even with os allowed) cannot change the installed extension.
func TestNativeDependencies(t *testing.T) {
	user := testUser(t)
	dc := requireDocker(t)
	wheels := t.TempDir()
	ext, err := wheeltest.NativeWheel(t.TempDir(), wheels)
	if err != nil {
		msg := "cannot build a C extension here: " + err.Error()
		if os.Getenv("ORQEST_REQUIRE_DOCKER") == "1" {
			t.Fatal(msg)
		}
		t.Skip("SKIPPING: " + msg)
	}
	b := wheelBackend(t, wheels, "orqnative")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sid := openSession(t, b, user)
	ins := inspectSession(t, ctx, dc, b, sid)
	if opts := ins.Container.HostConfig.Tmpfs[rtproto.NativeMount]; !strings.Contains(opts, ",exec,") || strings.Contains(opts, "noexec") {
		t.Errorf("tmpfs %s: %q, want exec", rtproto.NativeMount, opts)
	}
	if opts := ins.Container.HostConfig.Tmpfs["/workspace"]; !strings.Contains(opts, "noexec") {
		t.Errorf("/workspace: %q, want noexec", opts)
	}

	resp, err := b.Execute(ctx, shared.ExecuteRequest{Code: "import orqnative\nreturn orqnative.add(40, 2)", SessionID: sid, AgentID: "agentN",
		AllowedImports: []string{"orqnative"}, Dependencies: []string{"orqnative"}, Timeout: 30 * time.Second})
	if err != nil || !resp.Result.Success || string(resp.Result.Output) != "42" {
		t.Fatalf("native import in the container: %v %+v", err, resp.Result)
	}
	code := `import os
out = {}
for name, f in [('overwrite', lambda: os.close(os.open(args['so'], os.O_WRONLY | os.O_TRUNC))),
                ('plant', lambda: os.close(os.open(os.path.dirname(args['so']) + '/evil.py', os.O_WRONLY | os.O_CREAT, 0o644))),
                ('remove', lambda: os.unlink(args['so']))]:
    try:
        f()
        out[name] = 'done'
    except Exception as e:
        out[name] = type(e).__name__
return out`
	argsJSON, _ := json.Marshal(map[string]string{"so": rtproto.NativeMount + "/agentN/" + ext.File})
	resp, err = b.Execute(ctx, shared.ExecuteRequest{Code: code, Args: argsJSON, SessionID: sid, AgentID: "agentN", AllowedImports: []string{"os"}, Timeout: 30 * time.Second})
	if err != nil || !resp.Result.Success {
		t.Fatalf("%v %+v", err, resp.Result)
	}
	var out map[string]string
	_ = json.Unmarshal(resp.Result.Output, &out)
	for _, k := range []string{"overwrite", "plant", "remove"} {
		if out[k] == "done" || out[k] == "" {
			t.Errorf("%s of the native directory: %q, want refused", k, out[k])
		}
	}
	if _, err := b.Close(ctx, shared.CloseRequest{SessionID: sid}); err != nil {
		t.Error(err)
	}
}

// wheelBackend is a backend configured with wheel_dir wheels and the
// policy's allowed_packages allowed, shut down when the test ends.
func wheelBackend(t *testing.T, wheels string, allowed ...string) *Backend {
	t.Helper()
	return configuredBackend(t, map[string]any{"image": testImage(), "wheel_dir": wheels}, allowed)
}

// inspectSession returns the engine's view of session sid's container.
func inspectSession(t *testing.T, ctx context.Context, dc *client.Client, b *Backend, sid string) client.ContainerInspectResult {
	t.Helper()
	s := openedSession(t, b, sid)
	ins, err := dc.ContainerInspect(ctx, s.containerID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ins
}
