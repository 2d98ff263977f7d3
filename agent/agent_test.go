package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orqest/sandbox/rules"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/shared"
)

// These tests run the runtime's MCP server in-process over the SDK's
// in-memory transport with the host's python3: no Docker needed, so the
// token and agent_id rules are checked on every machine. The same checks
// against the real container are in plugins/docker (TestForgedTokens).

const testUser, testSession = "alice", "sess1"

func startRuntime(t *testing.T) (*mcp.ClientSession, []byte, string) {
	t.Helper()
	py, err := findPython("")
	if err != nil {
		t.Skipf("SKIPPING: no python3: %v", err)
	}
	table := rules.JSON()
	secret := []byte(strings.Repeat("k", 32))
	work := t.TempDir()
	rt := &runtime{
		hello:   rtproto.Hello{Secret: secret, User: testUser, Session: testSession},
		started: time.Now(),
		exec:    &executor{python: py, rules: table, workdir: work},
		log:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := rt.server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Close() })
	return cs, secret, work
}

func callTool(t *testing.T, cs *mcp.ClientSession, tool, tok string, args any) *mcp.CallToolResult {
	t.Helper()
	p := &mcp.CallToolParams{Name: tool, Arguments: args}
	if tok != "" {
		p.Meta = mcp.Meta{rtproto.MetaAuthorization: "Bearer " + tok}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := cs.CallTool(ctx, p)
	if err != nil {
		t.Fatalf("CallTool: %v", err)
	}
	return out
}

func errClass(out *mcp.CallToolResult) string {
	raw, _ := json.Marshal(out.StructuredContent)
	var te toolErrorContent
	_ = json.Unmarshal(raw, &te)
	return te.Class
}

func TestExecuteAndTokens(t *testing.T) {
	cs, secret, _ := startRuntime(t)
	good, _ := rtproto.Mint(secret, testUser, testSession, "", time.Minute)
	out := callTool(t, cs, rtproto.ToolExecute, good, rtproto.ExecuteArgs{Code: "return 1+1"})
	if out.IsError {
		t.Fatalf("execute: %+v", out.Content)
	}
	raw, _ := json.Marshal(out.StructuredContent)
	var res shared.ExecutionResult
	if err := json.Unmarshal(raw, &res); err != nil || !res.Success || string(res.Output) != "2" {
		t.Fatalf("result %s (%v)", raw, err)
	}

	now := time.Now()
	mk := func(scope, user, session string, exp time.Time, key []byte, m jwt.SigningMethod) string {
		c := rtproto.Claims{Scope: scope, Session: session, RegisteredClaims: jwt.RegisteredClaims{
			Issuer: rtproto.Issuer, Subject: user, Audience: jwt.ClaimStrings{rtproto.Audience},
			IssuedAt: jwt.NewNumericDate(exp.Add(-time.Minute)), ExpiresAt: jwt.NewNumericDate(exp)}}
		var k any = key
		if m == jwt.SigningMethodNone {
			k = jwt.UnsafeAllowNoneSignatureType
		}
		s, err := jwt.NewWithClaims(m, c).SignedString(k)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	hs := jwt.SigningMethodHS256
	for name, tok := range map[string]string{
		"missing":    "",
		"alg none":   mk("", testUser, testSession, now.Add(time.Minute), nil, jwt.SigningMethodNone),
		"HS512":      mk("", testUser, testSession, now.Add(time.Minute), secret, jwt.SigningMethodHS512),
		"wrong key":  mk("", testUser, testSession, now.Add(time.Minute), []byte(strings.Repeat("x", 32)), hs),
		"expired":    mk("", testUser, testSession, now.Add(-time.Minute), secret, hs),
		"other user": mk("", "bob", testSession, now.Add(time.Minute), secret, hs),
		"other sess": mk("", testUser, "s2", now.Add(time.Minute), secret, hs),
		"bad scope":  mk("admin", testUser, testSession, now.Add(time.Minute), secret, hs),
		"ttl 1h":     mk("", testUser, testSession, now.Add(time.Hour), secret, hs),
	} {
		if out := callTool(t, cs, rtproto.ToolExecute, tok, rtproto.ExecuteArgs{Code: "return 1"}); !out.IsError || errClass(out) != classUnauthorized {
			t.Errorf("%s: not refused: %+v", name, out)
		}
	}
	// Scope: a token without scope is agent; agent cannot call runtime_info.
	if out := callTool(t, cs, rtproto.ToolInfo, good, map[string]any{}); !out.IsError || errClass(out) != classUnauthorized {
		t.Errorf("agent token reached runtime_info: %+v", out)
	}
	agent, _ := rtproto.Mint(secret, testUser, testSession, rtproto.ScopeAgent, time.Minute)
	if out := callTool(t, cs, rtproto.ToolInfo, agent, map[string]any{}); !out.IsError {
		t.Errorf("explicit agent token reached runtime_info")
	}
	op, _ := rtproto.Mint(secret, testUser, testSession, rtproto.ScopeOperator, time.Minute)
	if out := callTool(t, cs, rtproto.ToolInfo, op, map[string]any{}); out.IsError {
		t.Errorf("operator token refused: %+v", out.Content)
	}
}

func TestAgentIDCheckedBeforeFilesystem(t *testing.T) {
	cs, secret, work := startRuntime(t)
	tok, _ := rtproto.Mint(secret, testUser, testSession, "", time.Minute)
	for _, id := range []string{"../escape", "..", "a/b", "-x", strings.Repeat("a", 65)} {
		out := callTool(t, cs, rtproto.ToolExecute, tok, rtproto.ExecuteArgs{Code: "return 1", AgentID: id})
		if !out.IsError || errClass(out) != classInvalidArgument {
			t.Errorf("agent_id %q accepted: %+v", id, out)
		}
	}
	// Nothing was created, inside or beside the work directory.
	if entries, _ := os.ReadDir(work); len(entries) != 0 {
		t.Errorf("work directory not empty after refused calls: %v", entries)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(work), "escape")); err == nil {
		t.Error("../escape was created")
	}
	out := callTool(t, cs, rtproto.ToolExecute, tok, rtproto.ExecuteArgs{Code: "return 1", AgentID: "bob_2"})
	if out.IsError {
		t.Fatalf("good agent refused: %+v", out.Content)
	}
	if _, err := os.Stat(filepath.Join(work, "agents", "bob_2")); err != nil {
		t.Errorf("agent directory: %v", err)
	}
}

func TestReadHello(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{`{"secret":"` + strings.Repeat("QUFB", 11) + `","user":"u","session":"s"}` + "\n", true},
		{`{"secret":"QUFB","user":"u","session":"s"}` + "\n", false},                                  // short secret
		{`{"secret":"` + strings.Repeat("QUFB", 11) + `","user":"../u","session":"s"}` + "\n", false}, // bad user
		{"not json\n", false},
		{"", false},
	} {
		_, err := readHello(bufioReader(tc.in))
		if (err == nil) != tc.ok {
			t.Errorf("readHello(%q) = %v, want ok=%v", tc.in, err, tc.ok)
		}
	}
}

func bufioReader(s string) *bufio.Reader { return bufio.NewReader(strings.NewReader(s)) }

// TestRootRuntimeRefusesChildrenOnRoot: a runtime that is root and whose
// Python processes cannot drop their uid (here: the layer disabled through
// the test seam; in a container: no CAP_SETUID/SETGID) runs no code, with
// a clear error, instead of running user code as root.
func TestRootRuntimeRefusesChildrenOnRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: needs root (the runtime's uid in the image)")
	}
	py, err := findPython("")
	if err != nil {
		t.Skipf("SKIPPING: no python3: %v", err)
	}
	for _, mode := range []string{modeForkServer, modeSpawn} {
		e := &executor{python: py, rules: rules.JSON(), workdir: containerWorkdir(t), mode: mode, disable: []string{layerUID}}
		res, err := e.run(context.Background(), rtproto.ExecuteArgs{Code: "return 1"}, nil)
		if !errors.Is(err, shared.ErrUnavailable) || !strings.Contains(err.Error(), "cannot drop to an unprivileged uid") {
			t.Errorf("%s: run = %+v, %v; want ErrUnavailable naming the uid drop", mode, res, err)
		}
		e.shutdown()
	}
}

// containerWorkdir returns a fresh working directory laid out like the
// image's /workspace: the runtime owns it and its Python children, which
// drop to 65534 when the test runs as root (as the runtime does in the
// image), may traverse it (0711) to read their agent's venv.
func containerWorkdir(t *testing.T) string {
	t.Helper()
	work := t.TempDir()
	for _, d := range []string{work, filepath.Dir(work)} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return work
}

// TestExecuteLimits: a call that arrives with its limits resolved runs
// under exactly those; one that leaves them at zero (a plugin called
// directly) gets the contract's defaults from shared.Prepare; one above
// the runtime's ceiling, negative, or below the memory floor is refused
// before anything runs.
func TestExecuteLimits(t *testing.T) {
	py, err := findPython("")
	if err != nil {
		t.Skipf("SKIPPING: no python3: %v", err)
	}
	e := &executor{python: py, rules: rules.JSON(), workdir: containerWorkdir(t), mode: modeSpawn}
	defer e.shutdown()
	ctx := context.Background()
	for _, c := range []struct {
		args rtproto.ExecuteArgs
		want shared.Limits
	}{
		{rtproto.ExecuteArgs{Code: "return 1"}, shared.Limits{TimeoutMS: shared.DefaultTimeout.Milliseconds(), MemoryMB: shared.DefaultMemoryMB, MaxOutputBytes: shared.DefaultMaxOutputBytes}},
		{rtproto.ExecuteArgs{Code: "return 1", TimeoutS: 2.5, MemoryMB: 256, MaxOutputBytes: 4096}, shared.Limits{TimeoutMS: 2500, MemoryMB: 256, MaxOutputBytes: 4096}},
	} {
		res, err := e.run(ctx, c.args, nil)
		if err != nil || !res.Success || res.Limits != c.want {
			t.Errorf("%+v: %+v, %v; want success under %+v", c.args, res, err, c.want)
		}
	}
	for field, args := range map[string]rtproto.ExecuteArgs{
		"timeout":          {Code: "return 1", TimeoutS: 3600},
		"memory_mb":        {Code: "return 1", MemoryMB: 16},
		"max_output_bytes": {Code: "return 1", MaxOutputBytes: -1},
	} {
		var fe *shared.FieldError
		if _, err := e.run(ctx, args, nil); !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("%+v: %v, want a FieldError on %s", args, err, field)
		}
	}
}
