package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/orqest/sandbox/host"
	"github.com/orqest/sandbox/internal/httpauth"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/plugin"
)

// needDockerPlugin skips (loudly; fails with ORQEST_REQUIRE_DOCKER=1)
// without the engine and the runtime image, and builds the docker plugin
// into the test's bin directory beside the CLI.
func needDockerPlugin(t *testing.T) {
	t.Helper()
	if out, err := exec.Command("docker", "image", "inspect", runtimeImage()).CombinedOutput(); err != nil {
		msg := fmt.Sprintf("docker or the runtime image is unavailable (run `make image`): %v %s", err, out)
		if os.Getenv("ORQEST_REQUIRE_DOCKER") == "1" {
			t.Fatal(msg)
		}
		t.Skip("SKIPPING: " + msg)
	}
	dockerPlugin := filepath.Join(binDir, plugin.PluginPrefix+"docker")
	if _, err := os.Stat(dockerPlugin); err != nil {
		cmd := exec.Command("go", "build", "-o", dockerPlugin, "./cmd/orqest-sandbox-plugin-docker")
		cmd.Dir = "../.."
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build ./cmd/orqest-sandbox-plugin-docker: %v\n%s", err, b)
		}
	}
}

// runtimeImage is the tier-2 image the docker tests run
// (ORQEST_DOCKER_IMAGE overrides it, as in plugins/docker).
func runtimeImage() string {
	if v := os.Getenv("ORQEST_DOCKER_IMAGE"); v != "" {
		return v
	}
	return "orqest/agent-runtime:0.1.0"
}

// A tool promoted under a policy that allowed collections stops running
// once the operator narrows the policy to no imports: the call through the
// host is refused (permission denied, naming the import) and the code does
// not run; a promoted tool within the new policy still runs, and runs with
// the new policy's timeout, not the runtime's default.
func TestPromotedToolsFollowPolicyNarrowing(t *testing.T) {
	needDockerPlugin(t)
	user := "orqtest-narrow-" + randomID()
	t.Cleanup(func() { _ = exec.Command("docker", "volume", "rm", "-f", "orqest-user-"+user).Run() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	load := func(policy string) (*host.Host, *host.Sandbox, string) {
		t.Helper()
		src := fmt.Sprintf(`
policy "p" {
%s
}
sandbox "docker" {
  plugin = "docker"
  policy = "p"
  config {
    image = "orqest/agent-runtime:0.1.0"
    promotion { policy = "eager" }
  }
}
`, policy)
		cfg, diags := host.ParseConfig(filepath.Join(t.TempDir(), "config.hcl"), []byte(src))
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		h, err := host.Load(ctx, cfg, host.WithPluginDirs(binDir))
		if err != nil {
			t.Fatal(err)
		}
		sb, err := h.Sandbox(ctx, "docker")
		if err != nil {
			t.Fatal(err)
		}
		open, err := sb.Open(ctx, shared.OpenRequest{UserID: user})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sb.CloseSession(context.Background(), open.SessionID); h.Close() })
		return h, sb, open.SessionID
	}

	// Promoted under a policy that allows collections.
	_, sb, sid := load(`  allowed_imports = ["collections"]
  timeout = "10s"`)
	tools := map[string]string{
		"counter": "import collections\nreturn dict(collections.Counter(args.get('s', 'abca')))",
		"plain":   "return args.get('x', 1) * 2",
		"spinner": "if args.get('spin'):\n    while True:\n        pass\nreturn 'ok'",
	}
	for name, code := range tools {
		res, err := sb.Execute(ctx, shared.ExecuteRequest{Code: code, ToolName: name, SessionID: sid, UserID: user, AllowedImports: []string{"collections"}})
		if err != nil || !res.Success {
			t.Fatalf("%s: %v %+v", name, err, res)
		}
	}
	tok, err := sb.MintToken(ctx, sid, shared.ScopeAgent, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := sb.CallSessionTool(ctx, sid, "counter", map[string]any{"s": "aab"}, tok.Token); err != nil || !strings.Contains(string(out), `"output":{"a":2,"b":1}`) {
		t.Fatalf("counter under the policy it was promoted with: %s %v", out, err)
	}

	// The operator narrows the policy: no imports, a 1 s timeout.
	_, sb, sid = load(`  timeout = "1s"`)
	tok, err = sb.MintToken(ctx, sid, shared.ScopeAgent, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	out, err := sb.CallSessionTool(ctx, sid, "counter", map[string]any{"s": "aab"}, tok.Token)
	if !errors.Is(err, shared.ErrPermissionDenied) || !strings.Contains(err.Error(), "collections") || !strings.Contains(err.Error(), "not run") {
		t.Fatalf("counter after narrowing: %s %v, want permission denied naming collections", out, err)
	}
	out, err = sb.CallSessionTool(ctx, sid, "plain", map[string]any{"x": 21}, tok.Token)
	if err != nil || !strings.Contains(string(out), `"output":42`) {
		t.Fatalf("plain after narrowing: %s %v", out, err)
	}
	out, err = sb.CallSessionTool(ctx, sid, "spinner", map[string]any{"spin": true}, tok.Token)
	var res shared.ExecutionResult
	if err != nil || json.Unmarshal(out, &res) != nil || res.ErrorKind != shared.KindTimeout || res.Limits.TimeoutMS != 1000 {
		t.Fatalf("spinner after narrowing: %s %v, want a timeout at the policy's 1000 ms", out, err)
	}
}

// A promotion value the docker plugin refuses is a diagnostic at the
// attribute in the policy file (the plugin's FieldError crosses the wire).
func TestPromotionRefusalPointsAtTheAttribute(t *testing.T) {
	needDockerPlugin(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.hcl")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`plugin_dir = %q
sandbox "docker" {
  plugin = "docker"
  config {
    image = "orqest/agent-runtime:0.1.0"
    promotion {
      policy    = "eager"
      threshold = 4
    }
  }
}
`, binDir)), 0o600)
	r := runCLI(t, dir, "", "policy", "check", cfg)
	if r.code != exitError || !strings.Contains(r.stderr, cfg+":8:19: Error: Invalid plugin configuration") || !strings.Contains(r.stderr, "promotion.threshold") {
		t.Errorf("policy check: exit %d\n%s", r.code, r.stderr)
	}
}

// Over mcp serve --http on a session tier, a client sees and calls the
// promoted tools of its own user's library, not another user's.
func TestMCPClientSeesItsLibrary(t *testing.T) {
	alice, bob := "orqtest-mcpa-"+randomID(), "orqtest-mcpb-"+randomID()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	h, sb := dockerSandbox(t, ctx, `config {
    image = "orqest/agent-runtime:0.1.0"
    promotion { policy = "eager" }
  }`, alice, bob)
	// alice's library gets a promoted tool.
	open, err := sb.Open(ctx, shared.OpenRequest{UserID: alice})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := sb.Execute(ctx, shared.ExecuteRequest{Code: "return args.get('x', 0) * 2", ToolName: "double", SessionID: open.SessionID, UserID: alice}); err != nil || !res.Success {
		t.Fatalf("promote: %v %+v", err, res)
	}
	sb.CloseSession(ctx, open.SessionID)

	a, b := mcpHTTPClients(t, ctx, h, sb, alice, bob)
	if names := toolNames(t, a); !slices.Contains(names, "double") {
		t.Fatalf("alice's tools: %v, want her promoted tool double", names)
	}
	if r := call(t, a, "double", map[string]any{"x": 21}); r.IsError || text(r) != "42" {
		t.Fatalf("double: %q", text(r))
	}
	if names := toolNames(t, b); slices.Contains(names, "double") {
		t.Errorf("bob lists alice's library tool: %v", names)
	}
}

// Over mcp serve --http on a tier with a workspace, a client uploads a
// file its run_python code reads, downloads the file the code wrote, and
// lists its own files; another client's workspace is another session's.
func TestMCPClientFiles(t *testing.T) {
	alice, bob := "orqtest-mcpfa-"+randomID(), "orqtest-mcpfb-"+randomID()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	h, sb := dockerSandbox(t, ctx, `config { image = "`+runtimeImage()+`" }`, alice, bob)
	a, b := mcpHTTPClients(t, ctx, h, sb, alice, bob)
	if names := toolNames(t, a); !slices.Contains(names, mcpPutFile) || !slices.Contains(names, mcpGetFile) || !slices.Contains(names, mcpListFiles) {
		t.Fatalf("tools: %v, want the file tools", names)
	}
	if r := call(t, a, mcpPutFile, map[string]any{"path": "in.csv", "text": "a,b\n1,2\n"}); r.IsError {
		t.Fatalf("put_file: %s", text(r))
	}
	r := call(t, a, mcpRunPython, map[string]any{"code": "rows = workspace.read_text('in.csv').splitlines()\nworkspace.write_text('out.txt', 'rows=%d' % len(rows))\nreturn len(rows)"})
	if r.IsError || text(r) != "2" {
		t.Fatalf("run_python reading the upload: %s", text(r))
	}
	r = call(t, a, mcpGetFile, map[string]any{"path": "out.txt"})
	if r.IsError || !strings.Contains(text(r), `"text":"rows=2"`) {
		t.Fatalf("get_file: %s", text(r))
	}
	r = call(t, a, mcpListFiles, map[string]any{})
	if r.IsError || !strings.Contains(text(r), "in.csv") || !strings.Contains(text(r), "out.txt") {
		t.Fatalf("list_files: %s", text(r))
	}
	if r := call(t, a, mcpGetFile, map[string]any{"path": "../etc/passwd"}); !r.IsError {
		t.Errorf("get_file ../etc/passwd: %s, want an error", text(r))
	}
	if r := call(t, b, mcpGetFile, map[string]any{"path": "out.txt"}); !r.IsError {
		t.Errorf("bob downloads alice's file: %s", text(r))
	}
}

// dockerSandbox loads a host with one docker sandbox whose body is config
// and returns the host and it; the users' volumes are removed when the test ends. It
// skips (or fails, with ORQEST_REQUIRE_DOCKER=1) as needDockerPlugin does.
func dockerSandbox(t *testing.T, ctx context.Context, config string, users ...string) (*host.Host, *host.Sandbox) {
	t.Helper()
	return dockerPolicySandbox(t, ctx, "", config, users...)
}

// dockerPolicySandbox is dockerSandbox with policy, the HCL of policy
// blocks and top-level attributes before the sandbox block ("" for none).
func dockerPolicySandbox(t *testing.T, ctx context.Context, policy, config string, users ...string) (*host.Host, *host.Sandbox) {
	t.Helper()
	needDockerPlugin(t)
	t.Cleanup(func() {
		for _, u := range users {
			_ = exec.Command("docker", "volume", "rm", "-f", "orqest-user-"+u).Run()
		}
	})
	cfg, diags := host.ParseConfig(filepath.Join(t.TempDir(), "config.hcl"), []byte(policy+"\nsandbox \"docker\" {\n  plugin = \"docker\"\n  "+config+"\n}\n"))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	h, err := host.Load(ctx, cfg, host.WithPluginDirs(binDir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	sb, err := h.Sandbox(ctx, "docker")
	if err != nil {
		t.Fatal(err)
	}
	return h, sb
}

// mcpHTTPClients serves sb's per-client MCP servers over HTTP with a
// bearer token for each of the two users and returns their sessions.
func mcpHTTPClients(t *testing.T, ctx context.Context, h *host.Host, sb *host.Sandbox, alice, bob string) (a, b *mcp.ClientSession) {
	t.Helper()
	clients, err := newMCPClients(ctx, sb, h.Bus())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { clients.close(&env{stderr: os.Stderr}) })
	const aliceTok, bobTok = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	ts := httptest.NewServer(clients.httpHandler(httpauth.NewVerifier(map[string]string{aliceTok: alice, bobTok: bob}, nil), http.NotFoundHandler()))
	t.Cleanup(ts.Close)
	return httpClientSession(t, ts.URL+"/mcp", aliceTok, nil), httpClientSession(t, ts.URL+"/mcp", bobTok, nil)
}

// A promoted tool of the client's library, called over mcp serve with a
// progress token, streams its output while it runs, as run_python does
// (the runtime's progress, the plugin's and the host's CallToolStream).
func TestMCPLibraryToolStreams(t *testing.T) {
	alice, bob := "orqtest-libsa-"+randomID(), "orqtest-libsb-"+randomID()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	h, sb := dockerPolicySandbox(t, ctx, `policy "default" { allowed_imports = ["time"] }`, `config {
    image = "`+runtimeImage()+`"
    promotion { policy = "eager" }
  }`, alice, bob)
	open, err := sb.Open(ctx, shared.OpenRequest{UserID: alice})
	if err != nil {
		t.Fatal(err)
	}
	code := "import time\nprint('first', flush=True)\ntime.sleep(args.get('pause', 0))\nprint('second')\nreturn 1"
	if res, err := sb.Execute(ctx, shared.ExecuteRequest{Code: code, AllowedImports: []string{"time"}, ToolName: "slow_echo", SessionID: open.SessionID, UserID: alice}); err != nil || !res.Success {
		t.Fatalf("promote: %v %+v", err, res)
	}
	sb.CloseSession(ctx, open.SessionID)
	clients, err := newMCPClients(ctx, sb, h.Bus())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { clients.close(&env{stderr: os.Stderr}) })
	checkStreamed(t, clients.get(ctx, alice), "slow_echo", map[string]any{"pause": 1.5})
}
